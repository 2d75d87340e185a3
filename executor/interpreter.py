"""Which Python runs a folder's kernel, and whether it can.

Order: the `python` setting → `.venv/` or `venv/` in the folder →
`VIRTUAL_ENV` → the server's own interpreter.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_BIN = "Scripts" if os.name == "nt" else "bin"
_EXE = "python.exe" if os.name == "nt" else "python"


@dataclass(frozen=True)
class Interpreter:
    path: str
    source: str
    """Where the choice came from, for `runfix doctor` and messages."""


def find_interpreter(folder: Path, setting: str | None = None) -> Interpreter:
    if setting:
        chosen = Path(os.path.expanduser(setting))
        if not chosen.is_absolute():
            chosen = folder / chosen
        if chosen.is_dir():
            chosen = chosen / _BIN / _EXE
        return Interpreter(str(chosen), "the `python` setting")
    base = os.fspath(folder)  # (strings, not Paths: this is looked up on every run)
    for name in (".venv", "venv"):
        found = os.path.join(base, name, _BIN, _EXE)
        if os.path.exists(found):
            return Interpreter(found, f"the folder's {name}/")
    if venv := os.environ.get("VIRTUAL_ENV"):
        found = os.path.join(venv, _BIN, _EXE)
        if os.path.exists(found):
            return Interpreter(str(Path(found)), "VIRTUAL_ENV")
    return Interpreter(sys.executable, "the interpreter runfix runs on")


OFF_PATH = "import sys; del sys.path[0]; "
"""Code run with `python -c` starts with the working directory at `sys.path[0]`; this
takes it off before anything is imported (what `-P` does on 3.11+, on every version)."""
_RUN_MODULE = OFF_PATH + (
    "import runpy; runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def module_command(python: str, module: str, *args: str) -> list[str]:
    """`python -m module args`, with the working directory off `sys.path` when the
    interpreter starts: a folder's own `ipykernel_launcher.py`, `pip.py` or `runpy.py` is
    never imported instead of the real one. (Code the user runs later still imports the
    folder's modules: IPython puts the folder back on the path for cells.)"""
    return [python, "-c", _RUN_MODULE, module, *args]


_PYTHON = re.compile(r"python(\d+(\.\d+)*)?(\.exe)?", re.I)
_R = {"r", "r.exe", "rscript", "rscript.exe"}
R_QUIET = ("--no-init-file", "--no-environ")
"""R reads `.Rprofile` and `.Renviron` from the folder it starts in: not for a kernel."""


def guarded(argv: Sequence[str]) -> list[str]:
    """A kernelspec's command, started so that nothing of the folder it starts in runs before
    the user's first cell: a Python-launched kernel (`python -m bash_kernel`) with the working
    directory off `sys.path` (a folder's own `bash_kernel/` or `ipykernel_launcher.py` is
    never imported instead), R without the folder's (or the user's) `.Rprofile`/`.Renviron`.
    Other commands are as the kernelspec says."""
    args = [str(a) for a in argv]
    if not args:
        return args
    program = os.path.basename(args[0])
    if _PYTHON.fullmatch(program) and "-m" in args[1:-1]:
        at = args.index("-m", 1)
        return [args[0], *args[1:at], "-c", _RUN_MODULE, args[at + 1], *args[at + 2 :]]
    if program.lower() in _R:
        return [args[0], *(f for f in R_QUIET if f not in args), *args[1:]]
    return args


_checked: dict[str, str | None] = {}
# The installed distribution's version, read from its metadata: importing ipykernel to
# ask it would take a second. Pythons without importlib.metadata (< 3.8) import it.
_VERSION_OF_IPYKERNEL = OFF_PATH + (
    "\ntry:\n"
    "    from importlib.metadata import version\n"
    "    print(version('ipykernel'))\n"
    "except ImportError:\n"
    "    import ipykernel\n"
    "    print(ipykernel.__version__)\n"
)


async def ipykernel_version(python: str) -> str | None:
    """The interpreter's ipykernel version, or None when it has none (or cannot run)."""
    if python in _checked:
        return _checked[python]
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-c",
            _VERSION_OF_IPYKERNEL,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    except (OSError, asyncio.TimeoutError):
        return None
    version = out.decode().strip() if proc.returncode == 0 else None
    if version:
        _checked[python] = version  # only a success is cached: the user may install it
    return version


def install_hint(python: str) -> str:
    return f"{python} -m pip install ipykernel"


def kernel_environment(
    python: str, base: Mapping[str, str] | None = None, hidden: Iterable[str] = ()
) -> dict[str, str]:
    """The environment a local kernel gets: ours, minus secrets, plus the interpreter's venv."""
    env = dict(os.environ if base is None else base)
    for name in hidden:
        env.pop(name, None)
    env.pop("PYTHONSTARTUP", None)
    bindir = Path(python).parent
    if (bindir.parent / "pyvenv.cfg").exists():
        env["VIRTUAL_ENV"] = str(bindir.parent)
        env["PATH"] = os.pathsep.join([str(bindir), env.get("PATH", "")])
    return env
