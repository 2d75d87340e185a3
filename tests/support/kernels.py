"""Other languages' kernels the tests and `scripts/bench_run.py` start: bash_kernel's and
Deno's kernelspecs (both test dependencies), written as their installers would write them;
`scripts/null_kernel.py`'s (a Lua kernel that does nothing) for the tests that ask for it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

DENO = Path(sys.executable).with_name("deno")
"""The `deno` wheel's binary."""


def write_kernelspecs(root: Path) -> None:
    """bash_kernel's and Deno's kernelspecs under `root/kernels/` (a Jupyter data folder),
    where they are installed in this Python; IRkernel's is Debian's, on the path already."""
    specs: dict[str, tuple[str, list[str]]] = {}
    if importlib.util.find_spec("bash_kernel") is not None:
        specs["bash"] = ("bash", [sys.executable, "-m", "bash_kernel", "-f", "{connection_file}"])
    if DENO.is_file():
        specs["deno"] = (
            "typescript",
            [str(DENO), "jupyter", "--kernel", "--conn", "{connection_file}"],
        )
    for name, (language, argv) in specs.items():
        _write(root, name, language, argv)


def write_null_kernelspec(root: Path) -> None:
    """The null kernel's kernelspec under `root/kernels/`: a Lua kernel that answers at once,
    and publishes a `-- late` run's value after its idle (`scripts/null_kernel.py`). Not on
    the servers' Jupyter path: there, no kernel runs Lua."""
    null = Path(__file__).parents[2] / "scripts" / "null_kernel.py"
    _write(root, "null", "lua", [sys.executable, str(null), "-f", "{connection_file}"])


def _write(root: Path, name: str, language: str, argv: list[str]) -> None:
    folder = root / "kernels" / name
    folder.mkdir(parents=True, exist_ok=True)
    kernel = {"argv": argv, "display_name": name, "language": language}
    (folder / "kernel.json").write_text(json.dumps(kernel))
