"""`runfix doctor`: is everything runfix needs here, and how fast does it start? The
executor's own check is its kernel class's (`JupyterKernel.diagnose`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from executor._kernel_jail import landlock_abi, unavailable
from executor.base import ExecutorUnavailable
from executor.configs import DEFAULT_IMAGE
from executor.docker import describe_engine, describe_image
from executor.interpreter import find_interpreter
from executor.kinds import KINDS
from executor.trust import TrustStore
from lsp_server import __version__
from lsp_server.cli.run import command_line, project_folder, project_settings
from lsp_server.executors import kernel_config
from lsp_server.model.client import ModelClient, ModelConfig, ModelError
from lsp_server.settings import OPENAI_URL, Settings


async def doctor(folder: Path, command_line: Mapping[str, Any] | None = None) -> int:
    print(f"runfix {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    print(f"project folder: {folder}")
    settings = project_settings(folder, command_line)
    print(f"executor:       {settings.executor}")
    kind = KINDS[settings.executor]
    if kind.asks_trust and not _may_start(folder, settings):
        ok = True  # nothing to check until the folder is decided
    else:
        ok = await kind.kernel(folder, kernel_config(folder, settings)).diagnose(print)
    print(jail_line(settings.executor))
    if not kind.sandboxed:
        await _sandbox_note()
    await _doctor_model(settings)
    if ok:
        print("everything runfix needs to run code is here.")
    return 0 if ok else 1


def jail_line(executor: str) -> str:
    """Where model code runs first here (`executor/_kernel_jail.py`), in one line."""
    why = unavailable()
    where = "the container's kernel" if executor == "docker" else "the kernel"
    if executor == "remote":
        return "jail:           asked of the server's kernel when model code first runs there"
    if why is not None:
        return (
            f"jail:           none here ({why}): model code is asked about before it runs in "
            f"{where}"
        )
    machine = os.uname().machine
    seccomp = " + seccomp" if machine in ("x86_64", "aarch64") else ""
    return (
        f"jail:           Landlock ABI {landlock_abi()}{seccomp} ({machine}): model code runs "
        f"first in a confined fork of {where}"
    )


def _may_start(folder: Path, settings: Settings) -> bool:
    """Whether doctor may start the folder's interpreter: the folder is decided, or it is the
    interpreter runfix itself runs on (nothing of the folder's). Checking it would start it,
    and the folder's interpreter is the folder's code."""
    python = find_interpreter(folder, settings.python)
    print(f"interpreter:    {python.path}  (from {python.source})")
    decided = TrustStore().decision(folder)
    print(f"trust:          {decided[1].value if decided else 'not decided'}")
    if decided is None and os.path.realpath(python.path) != os.path.realpath(sys.executable):
        print("  not started: it comes with this folder, which you have not trusted.")
        print(f"  to let it run: runfix trust {folder}  (or answer runfix's question)")
        return False
    return True


async def _sandbox_note() -> None:
    """Whether the sandbox could be used here (`executor: "docker"`); nothing is started."""
    try:
        engine = await asyncio.to_thread(describe_engine)
    except ExecutorUnavailable:
        print('docker:         no engine answers (only `executor: "docker"` needs one)')
        return
    image = await asyncio.to_thread(describe_image, DEFAULT_IMAGE)
    print(f"docker:         {engine}; sandbox image {image or DEFAULT_IMAGE + ' not built'}")


PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]
"""The completion doctor asks for: one short answer proves the model writes."""
BUSY_WAIT = 30.0
"""Seconds doctor waits for an endpoint that is slow to answer before calling it stuck: a
local server answering another client's long request is busy, not down."""


async def _doctor_model(settings: Settings) -> None:
    """The model endpoint: what is configured, whether it answers, and a completion (streamed
    and not) with its time and speed; never the key."""
    config = ModelConfig.from_settings(settings)
    if config.base_url == OPENAI_URL or config.api_key():
        key = f"{config.api_key_env} {'set' if config.api_key() else 'not set'}"
    else:
        key = "no key: a local endpoint needs none"
    print(f"model:          {config.name} at {config.base_url} ({key})")
    if (why := config.missing()) is not None:
        print(f"  {why}")
        return
    client = ModelClient(config)
    try:
        served = await client.served()
    finally:
        await client.close()
    if served and not {config.name, f"{config.name}:latest"} & set(served):  # (Ollama's tags)
        names = ", ".join(served[:8]) + (" …" if len(served) > 8 else "")
        print(
            f"  the endpoint serves {names}; not {config.name}: set model.name (or RUNFIX_MODEL) "
            f"to {'it' if len(served) == 1 else 'one of them'}"
        )
        return
    for stream in (True, False):
        said = await _completion(replace(config, stream=stream, timeout=BUSY_WAIT))
        print(f"  {'streamed' if stream else 'not streamed'}: {said}")
        if said.startswith(("nothing answers", "no answer")):
            return
    print(f"  several answers (model.candidates): {await _several(config)}")


async def _completion(config: ModelConfig) -> str:
    """One short completion: what came back, how long it took and how fast it was written;
    else why none came (nothing listening, no answer within `BUSY_WAIT`, an error)."""
    client = ModelClient(config)
    began = time.monotonic()
    first: list[float] = []

    def arrived(text: str) -> None:
        if text and not first:
            first.append(time.monotonic() - began)

    try:
        reply = await client.complete(PROBE, on_text=arrived, max_tokens=8)
    except ModelError as exc:
        took = time.monotonic() - began
        text = str(exc)
        if "Cannot reach" in text:
            return f"nothing answers at {config.base_url} (is the server running?)"
        if "did not answer within" in text:
            return (
                f"no answer within {took:.0f} s: the server is busy (another client's request?) "
                "or stuck"
            )
        return text
    finally:
        await client.close()
    took = time.monotonic() - began
    words = reply.strip().replace("\n", " ")[:40] or "(an empty answer)"
    used = client.last_usage
    speed = f", {used[1] / took:.1f} tokens/s" if used and used[1] and took > 0 else ""
    wait = f", first text after {first[0]:.2f} s" if first and config.stream else ""
    slow = " (slow: a local model reads the prompt before it writes)" if took > 5 else ""
    return f"{words!r} in {took:.2f} s{wait}{speed}{slow}"


async def _several(config: ModelConfig) -> str:
    """How the endpoint gives a fix's candidates: one request's `n` choices, concurrent
    requests it answers at once, or one after another (then each candidate costs one
    answer's time)."""
    client = ModelClient(replace(config, timeout=BUSY_WAIT))
    try:
        began = time.monotonic()
        await client.complete(PROBE, max_tokens=8)
        one = time.monotonic() - began
        began = time.monotonic()
        got = await client.complete_many(PROBE, 3, max_tokens=8, temperature=0.8)
        three = time.monotonic() - began
    except ModelError as exc:
        return f"not asked ({exc})"
    finally:
        await client.close()
    took = f"3 in {three:.2f} s, one in {one:.2f} s"
    if client.many == "n":
        return f"one request's `n` ({len(got)} choices; {took})"
    if three < 2 * max(one, 0.05):
        return f"concurrent requests, answered at once (`n` not taken; {took})"
    return (
        f"one after another ({took}): each candidate costs an answer's time; "
        "model.candidates = 1 asks one at a time"
    )


def command(args: argparse.Namespace) -> int:
    if not args.folder.is_dir():
        print(f"runfix: error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    return asyncio.run(doctor(project_folder(args.folder.resolve()), command_line(args)))
