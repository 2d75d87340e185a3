"""`runfix`: a table of subcommands (`COMMANDS`), each its arguments and the module whose
`command(args)` runs it. A command's module is imported only when it runs: `serve` never
loads docker-py or the headless runner, `run` never loads pygls."""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from lsp_server import __version__

DESCRIPTION = """\
runfix runs your file's cells in a persistent Jupyter kernel (or a locked-down Docker
container, or a remote Jupyter Server) — Python's, or the kernel of the file's language —
and says what they printed, returned or raised on the right lines: as a language server
for your editor (`runfix serve`), or in a terminal (`runfix run FILE`).

exit status: 0 all went well; 1 the code raised, timed out or killed the kernel (or a
check failed); 2 a mistake in what was asked (a missing file, a bad argument); 130
interrupted (Ctrl-C)."""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, not {text!r}")
    return value


def _serve(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])


def _remote(p: argparse.ArgumentParser) -> None:
    where = p.add_argument_group("a remote kernel (Jupyter Server, Enterprise Gateway)")
    where.add_argument("--remote", metavar="URL", help="run on the server at URL")
    where.add_argument(
        "--token-env", metavar="NAME", help="the environment variable holding its token"
    )
    where.add_argument("--kernel-name", metavar="NAME", help="its kernel spec (python3)")


def _format(p: argparse.ArgumentParser, coming: str, json_is: str) -> None:
    """`--format`: the text as `coming` come, or a report for CI (`json_is`: what JSON holds)."""
    p.add_argument(
        "--format",
        default="text",
        choices=["text", "github", "sarif", "json"],
        help=f"text: compiler-style lines as {coming} come; github: workflow annotations; "
        f"sarif: a SARIF 2.1.0 log; json: {json_is}",
    )


def _run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "file",
        type=Path,
        help="a Python file (or R, shell, TypeScript…: its language's kernel); "
        "`# %%%%` lines split it into cells; or a notebook (.ipynb): its code cells",
    )
    p.add_argument(
        "--inplace",
        action="store_true",
        help="with a notebook: write each code cell's outputs into it (as `jupyter nbconvert "
        "--execute --inplace`)",
    )
    p.add_argument(
        "--cell",
        type=int,
        help="run only this cell (from 1; a notebook's as it numbers its cells), in a fresh kernel",
    )
    p.add_argument(
        "--above",
        action="store_true",
        help="with --cell: run the cells above it first, as the kernel would have run them",
    )
    p.add_argument("--timeout", type=_seconds, help="seconds per cell (default: the setting, 120)")
    _format(p, "results", "results and problems as one object")
    p.add_argument(
        "--fix",
        action="store_true",
        help="fix failing cells with the model (each fix proven by running it) and write the file",
    )
    p.add_argument(
        "--generate",
        action="store_true",
        help="write the body of each empty prompt (`# ai: …`) with the model, after running the "
        "cells above it, run it, and write the file (model-written code a check flags is not "
        "run headless)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each request to the model and its answer as it came (to stderr)",
    )
    p.add_argument(
        "--line",
        type=int,
        metavar="N",
        help="with --generate: only the prompt on line N (written again if it has a body)",
    )
    p.add_argument(
        "--dependents-of",
        type=int,
        metavar="LINE",
        help="run the cells up to the one holding LINE (from 1), then only the cells below "
        "that read what it defines (directly or through others)",
    )
    _remote(p)


def _test(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        type=Path,
        nargs="*",
        help="test files or folders, or tests (`file::name`) (default: the project's tests)",
    )
    p.add_argument("-k", metavar="EXPR", help="only the tests pytest's -k EXPR selects")
    p.add_argument(
        "--fix",
        action="store_true",
        help="fix each failure's module function with the model: written only when the "
        "failing tests pass and every passing test still passes (test files never changed)",
    )
    p.add_argument(
        "--timeout", type=_seconds, help="seconds one test may run (default: the setting, 120)"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="with --fix: print each request to the model and its answer as it came (to stderr)",
    )
    _format(p, "failures", "every test's outcome and each failure's places")
    _remote(p)


def _history(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, nargs="?", help="only this file's runs")
    p.add_argument(
        "--json",
        action="store_true",
        help="as one JSON array of runs, newest first (their line numbers from 1, as in the text)",
    )
    p.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    p.add_argument(
        "--show",
        type=int,
        metavar="N",
        help="run #N in full: its code, what it showed and raised, and for the model's code "
        "what the model was asked (its size) and answered, its time, tokens and why it ended",
    )


def _export(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="the script (cells split by `# %%%%` lines)")
    p.add_argument("-o", "--output", type=Path, help="the notebook (default: FILE.ipynb)")
    p.add_argument("--force", action="store_true", help="replace the notebook if it exists")


def _import(p: argparse.ArgumentParser) -> None:
    p.add_argument("notebook", type=Path)
    p.add_argument("-o", "--output", type=Path, help="the script (default: NOTEBOOK.py)")
    p.add_argument("--force", action="store_true", help="replace the script if it exists")


def _notebook(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=["read", "write"],
        help="read: print the notebook as percent text (`# %%%%` cells); write: make the "
        "notebook of the percent text on stdin, keeping what did not change and adding the "
        "latest runs' outputs",
    )
    p.add_argument("notebook", type=Path)


def _trust(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", type=Path, nargs="?", help="the folder (default: this one)")
    p.add_argument(
        "--choice",
        default="trust",
        choices=["trust", "sandbox", "own"],
        help="trust: its own interpreter and settings; sandbox: the Docker sandbox; own: "
        "runfix's own Python (default: trust)",
    )
    p.add_argument("--revoke", action="store_true", help="forget the folder's decision")
    p.add_argument("--list", action="store_true", help="list the decided folders")


def _doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "folder", type=Path, nargs="?", default=Path.cwd(), help="the project (default: here)"
    )
    _remote(p)


def _sandbox(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="sandbox_command", required=True)
    build = actions.add_parser(
        "build", help="build the default image (python3 + ipykernel), with or without a registry"
    )
    build.add_argument("--tag", help="image name (default: runfix's sandbox image)")
    build.add_argument(
        "--method",
        default="auto",
        choices=["auto", "dockerfile", "rootfs"],
        help="dockerfile: from python:3.11-slim (needs a registry); rootfs: debootstrap + "
        "docker import (needs root, no registry); auto: dockerfile if the base image can be had",
    )
    build.add_argument("--mirror", help="Debian mirror for --method rootfs (default: Debian's)")
    build.add_argument("--if-missing", action="store_true", help="do nothing if the image exists")


@dataclass(frozen=True)
class Command:
    help: str
    handler: str
    """`module:function`, called with the parsed arguments; imported when the command runs."""
    arguments: Callable[[argparse.ArgumentParser], None]
    description: str | None = field(default=None)


COMMANDS: dict[str, Command] = {
    "serve": Command(
        "run the language server (stdio by default)", "lsp_server.lsp.launch:command", _serve
    ),
    "run": Command(
        "run a file's cells headless, compiler-style output",
        "lsp_server.cli.run:command",
        _run,
        "Run a file's cells headless. Typing this is your decision to run the file's folder: "
        "it is not asked whether the folder is trusted.",
    ),
    "test": Command(
        "run the project's tests (pytest), failures on the lines that raised",
        "lsp_server.cli.test:command",
        _test,
        "Run the project's tests with pytest in the folder's own interpreter (or its sandbox), "
        "through runfix's plugin: each failure on the line of the test that failed, with the "
        "values pytest compared and the line of the module that raised. Typing this is your "
        "decision to run the folder's code.",
    ),
    "history": Command(
        "recent runs from the folder's run record", "lsp_server.cli.history:command", _history
    ),
    "export": Command(
        "a percent script and its last outputs → .ipynb",
        "lsp_server.cli.notebooks:export_command",
        _export,
    ),
    "import": Command(
        "a notebook → a percent-format script", "lsp_server.cli.notebooks:import_command", _import
    ),
    "notebook": Command(
        "a notebook as percent text for an editor's buffer, and back (Neovim's .ipynb)",
        "lsp_server.cli.notebooks:notebook_command",
        _notebook,
    ),
    "trust": Command(
        "let a folder run its code (its interpreter, its files), or revoke or list that",
        "lsp_server.cli.trust:command",
        _trust,
        "runfix starts nothing in a folder until you decide how its code runs. The decision "
        "is kept in your state folder (never in the repository) and covers the folders "
        "inside it.",
    ),
    "doctor": Command(
        "check the interpreter, ipykernel and a kernel", "lsp_server.cli.doctor:command", _doctor
    ),
    "sandbox": Command("the Docker sandbox's image", "lsp_server.cli.sandbox:command", _sandbox),
    "dap": Command(
        "a debug adapter (DAP, stdio) for any editor, debugging in your editor's kernel",
        "lsp_server.cli.dap:command",
        lambda p: None,
        "Debug Adapter Protocol clients (nvim-dap, dape, dap-mode, VS Code) start it; a "
        "launch names a file (`program`) and a line of the cell to debug (`line`).",
    ),
    "mcp": Command(
        "an MCP server (stdio) for coding agents, sharing your editor's kernel",
        "lsp_server.cli.mcp:command",
        lambda p: None,
        "Coding agents (Claude Code, Codex, Cursor, VS Code) run code in the kernel your "
        "editor's runfix uses for a folder, after you allow it in the editor.",
    ),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="runfix", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top.add_argument("--version", action="version", version=f"runfix {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.arguments(
            commands.add_parser(name, help=command.help, description=command.description)
        )
    return top


def handler(name: str) -> Callable[[argparse.Namespace], int]:
    module, _, function = COMMANDS[name].handler.partition(":")
    return cast(
        Callable[[argparse.Namespace], int], getattr(importlib.import_module(module), function)
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return handler(args.command)(args)


if __name__ == "__main__":
    sys.exit(main())
