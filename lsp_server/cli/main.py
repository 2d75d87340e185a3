"""The `runfix` command's arguments; each command imports what it needs when it runs
(`serve` never loads docker-py or the headless runner, `run` never loads pygls)."""

from __future__ import annotations

import argparse
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_server import __version__

DESCRIPTION = """\
runfix runs your Python file's cells in a persistent Jupyter kernel (or a locked-down
Docker container, or a remote Jupyter Server) and says what they printed, returned or
raised on the right lines: as a language server for your editor (`runfix serve`), or in a
terminal (`runfix run FILE`).

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="runfix", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"runfix {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    run = commands.add_parser(
        "run",
        help="run a file's cells headless, compiler-style output",
        description="Run a file's cells headless. Typing this is your decision to run the "
        "file's folder: it is not asked whether the folder is trusted.",
    )
    run.add_argument("file", type=Path, help="a Python file; `# %%%%` lines split it into cells")
    run.add_argument("--cell", type=int, help="run only this cell (1-based)")
    run.add_argument(
        "--timeout", type=_seconds, help="seconds per cell (default: the setting, 120)"
    )
    run.add_argument(
        "--format",
        default="text",
        choices=["text", "github", "sarif", "json"],
        help="text: compiler-style lines as results come; github: workflow annotations; "
        "sarif: a SARIF 2.1.0 log; json: results and problems as one object",
    )
    run.add_argument(
        "--fix",
        action="store_true",
        help="fix failing cells with the model (each fix proven by running it) and write the file",
    )
    history = commands.add_parser("history", help="recent runs from the folder's run record")
    history.add_argument("file", type=Path, nargs="?", help="only this file's runs")
    history.add_argument("--json", action="store_true", help="as JSON (lines counted from 1)")
    history.add_argument("--limit", type=int, default=50, help="how many (default 50)")
    out = commands.add_parser("export", help="a percent script and its last outputs → .ipynb")
    out.add_argument("file", type=Path, help="the script (cells split by `# %%%%` lines)")
    out.add_argument("-o", "--output", type=Path, help="the notebook (default: FILE.ipynb)")
    out.add_argument("--force", action="store_true", help="replace the notebook if it exists")
    into = commands.add_parser("import", help="a notebook → a percent-format script")
    into.add_argument("notebook", type=Path)
    into.add_argument("-o", "--output", type=Path, help="the script (default: NOTEBOOK.py)")
    into.add_argument("--force", action="store_true", help="replace the script if it exists")
    trust = commands.add_parser(
        "trust",
        help="let a folder run its code (its interpreter, its files), or revoke or list that",
        description="runfix starts nothing in a folder until you decide how its code runs. "
        "The decision is kept in your state folder (never in the repository) and covers the "
        "folders inside it.",
    )
    trust.add_argument("folder", type=Path, nargs="?", help="the folder (default: this one)")
    trust.add_argument(
        "--choice",
        default="trust",
        choices=["trust", "sandbox", "own"],
        help="trust: its own interpreter and settings; sandbox: the Docker sandbox; own: "
        "runfix's own Python (default: trust)",
    )
    trust.add_argument("--revoke", action="store_true", help="forget the folder's decision")
    trust.add_argument("--list", action="store_true", help="list the decided folders")
    check = commands.add_parser("doctor", help="check the interpreter, ipykernel and a kernel")
    check.add_argument(
        "folder", type=Path, nargs="?", default=Path.cwd(), help="the project (default: here)"
    )
    for command in (run, check):
        where = command.add_argument_group("a remote kernel (Jupyter Server, Enterprise Gateway)")
        where.add_argument("--remote", metavar="URL", help="run on the server at URL")
        where.add_argument(
            "--token-env", metavar="NAME", help="the environment variable holding its token"
        )
        where.add_argument("--kernel-name", metavar="NAME", help="its kernel spec (python3)")
    images = commands.add_parser("sandbox", help="the Docker sandbox's image")
    sandbox_commands = images.add_subparsers(dest="sandbox_command", required=True)
    build = sandbox_commands.add_parser(
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
    args = parser.parse_args(argv)

    if args.command == "serve":
        # Only `serve` needs pygls and the LSP server: `runfix run` never imports them.
        from lsp_server.lsp.launch import serve_stdio, serve_tcp

        level = getattr(logging, args.log_level)
        if args.tcp:
            host, _, port = args.tcp.rpartition(":")
            if not host or not port.isdigit():
                parser.error("--tcp takes HOST:PORT, e.g. 127.0.0.1:2087")
            return serve_tcp(level, host, int(port))
        return serve_stdio(level)
    if args.command == "run":
        from lsp_server.cli.run import run_file

        try:
            return run_file(
                args.file, args.cell, args.timeout, args.fix, args.format, _command_line(args)
            )
        except KeyboardInterrupt:  # the kernel is stopped by then; one line, not a traceback
            print("runfix: interrupted", file=sys.stderr)
            return 130
    if args.command == "export":
        from lsp_server.record.notebooks import export

        return export(args.file, args.output, args.force)
    if args.command == "import":
        from lsp_server.record.notebooks import import_notebook

        return import_notebook(args.notebook, args.output, args.force)
    if args.command == "trust":
        from lsp_server.cli.trust import trust_command

        return trust_command(args.folder, args.choice, args.revoke, args.list)
    if args.command == "history":
        from lsp_server.cli.history import show_history

        return show_history(args.file, args.json, args.limit)
    from lsp_server.cli.doctor import build_sandbox, doctor
    from lsp_server.cli.run import project_folder

    if args.command == "sandbox":
        from executor.configs import DEFAULT_IMAGE

        tag = args.tag or DEFAULT_IMAGE
        return build_sandbox(tag, args.method, args.mirror, args.if_missing)
    import asyncio

    if not args.folder.is_dir():
        print(f"runfix: error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    return asyncio.run(doctor(project_folder(args.folder.resolve()), _command_line(args)))


def _command_line(args: argparse.Namespace) -> dict[str, Any]:
    """Settings given on the command line: the user's own, like an editor's."""
    remote = {
        key: value
        for key, value in (
            ("url", args.remote),
            ("tokenEnv", args.token_env),
            ("kernelName", args.kernel_name),
        )
        if value is not None
    }
    return {"executor": "remote", "remote": remote} if args.remote else {}


if __name__ == "__main__":
    sys.exit(main())
