"""Installing a missing package into the executor's environment.

`distributions.provider_for` says which distribution provides an import
(`sklearn` → `scikit-learn`); `install` runs uv when it is on PATH (fast, and
it targets the interpreter explicitly) and else the interpreter's own pip.
The installer gets the kernel's environment: no API keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.cancel import or_cancelled, stop
from executor.interpreter import kernel_environment, module_command

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def valid_distribution(name: str) -> bool:
    """A plain distribution name: no options, paths or URLs can ride in as arguments."""
    return bool(_NAME.match(name)) and len(name) <= 100


def install_command(python: str, distributions: Iterable[str]) -> list[str]:
    """uv, told to read no configuration (a folder's `uv.toml` or `[tool.uv]` could name
    another index), else the interpreter's pip with the folder off its path."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--no-config", "--python", python, *distributions]
    return module_command(python, "pip", "install", "--disable-pip-version-check", *distributions)


@dataclass(frozen=True)
class InstallResult:
    ok: bool
    output: str
    command: list[str]
    cancelled: bool = False


def refused(distributions: list[str]) -> InstallResult | None:
    """The answer to a request with no distributions or one that is not a plain name."""
    bad = [d for d in distributions if not valid_distribution(d)]
    if bad or not distributions:
        return InstallResult(False, f"not a distribution name: {', '.join(bad) or '(none)'}", [])
    return None


async def install(
    python: str,
    distributions: list[str],
    cwd: Path,
    *,
    hidden_env: Iterable[str] = (),
    on_line: Callable[[str], None] | None = None,
    cancel: asyncio.Event | None = None,
    timeout: float = 600.0,
) -> InstallResult:
    if (refusal := refused(distributions)) is not None:
        return refusal
    command = install_command(python, distributions)
    env = kernel_environment(python, hidden=hidden_env)
    return await run_process(command, cwd, env, on_line, cancel, timeout)


async def run_process(
    command: list[str],
    cwd: Path,
    env: Mapping[str, str],
    on_line: Callable[[str], None] | None,
    cancel: asyncio.Event | None,
    timeout: float,
) -> InstallResult:
    """A command of the kernel's interpreter (pip, pytest) in `cwd`: its output line by line
    (stdout and stderr as one), cancellable, killed after `timeout` seconds."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=str(cwd),
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    lines: list[str] = []

    async def read() -> None:
        assert process.stdout is not None
        async for raw in process.stdout:
            take_line(raw, lines, on_line)
        await process.wait()

    async def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()

    reader = asyncio.ensure_future(read())
    if (stopped := await until_done(reader, kill, lines, command, cancel, timeout)) is not None:
        return stopped
    return InstallResult(process.returncode == 0, "\n".join(lines), command)


def take_line(raw: bytes, lines: list[str], on_line: Callable[[str], None] | None) -> None:
    line = raw.decode("utf-8", "replace").rstrip()
    lines.append(line)
    if on_line is not None and line:
        on_line(line)


async def until_done(
    reader: asyncio.Future[Any],
    kill: Callable[[], Awaitable[None]],
    lines: list[str],
    command: list[str],
    cancel: asyncio.Event | None,
    timeout: float,
) -> InstallResult | None:
    """Wait for an installer's output to end; on cancel or timeout kill it and say so."""
    try:
        # shielded: the reader goes on draining what the killed installer still writes
        if await or_cancelled(asyncio.wait_for(asyncio.shield(reader), timeout), cancel) is None:
            return None
    except asyncio.TimeoutError:
        pass
    await kill()
    await asyncio.wait({reader}, timeout=10)
    if not reader.done():
        await stop(reader)
    cancelled = cancel is not None and cancel.is_set()
    why = "cancelled" if cancelled else f"timed out after {timeout:g}s"
    return InstallResult(False, "\n".join([*lines, why]), command, cancelled=cancelled)
