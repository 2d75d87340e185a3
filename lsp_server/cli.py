"""The `runfix` command: `serve` (the language server), `run` (headless), `doctor`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.events import RunRequest, RunStatus
from executor.interpreter import find_interpreter, install_hint, ipykernel_version
from executor.kernel import LocalKernel
from lsp_server import __version__
from lsp_server.cells import code_of
from lsp_server.results import DocumentResults, Problem, StatementResult, build
from lsp_server.runs import Piece, pieces_for
from lsp_server.settings import Settings, read_pyproject, resolve

NOTE_LINES = 20  # output lines shown per statement; the rest is counted


def project_folder(start: Path) -> Path:
    """The nearest folder above `start` that looks like a project root, else its own folder."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / m).exists() for m in ("pyproject.toml", ".git", ".venv", "venv")):
            return candidate
    return folder


def _settings(folder: Path) -> Settings:
    table, problem = read_pyproject(folder)
    settings = resolve(("pyproject.toml [tool.runfix]", table))
    for message in ([problem] if problem else []) + list(settings.problems):
        print(f"runfix: warning: {message}", file=sys.stderr)
    return settings


def _column(line: str) -> int:
    return len(line) - len(line.lstrip()) + 1


def format_results(shown: str, lines: Sequence[str], results: DocumentResults) -> list[str]:
    """Compiler-style lines: `path:line:col: error|warning|note: message`."""

    def at(line: int, col: int | None = None) -> str:
        text = lines[line] if 0 <= line < len(lines) else ""
        return f"{shown}:{line + 1}:{col if col is not None else _column(text)}"

    items: list[tuple[int, int, list[str]]] = []
    for s in results.statements:
        items.append((s.last, 0, _notes(at(s.last), s)))
    for p in results.problems:
        items.append((p.first, 1, _problem(at, p)))
    return [line for _, _, out in sorted(items, key=lambda i: (i[0], i[1])) for line in out]


def _notes(where: str, result: StatementResult) -> list[str]:
    text = result.text.rstrip("\n").splitlines() or [""]
    out = [f"{where}: note: {line}" for line in text[:NOTE_LINES]]
    if len(text) > NOTE_LINES:
        out.append(f"{where}: note: … {len(text) - NOTE_LINES} more lines")
    if result.truncated:
        out.append(f"{where}: note: … output truncated ({result.truncated:,} characters dropped)")
    return out


def _problem(at: object, p: Problem) -> list[str]:
    assert callable(at)
    col = p.column + 1 if p.column is not None else None
    out = [f"{at(p.first, col)}: {p.severity}: {p.message}"]
    for r in p.related:
        where = f"{r.path}:{r.line + 1}:1" if r.path else at(r.line)
        out.append(f"{where}: note: {r.name}")
    return out


def run_file(path: Path, cell: int | None, timeout: float | None) -> int:
    shown = str(path)
    path = path.resolve()
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"runfix: error: cannot read {shown}: {exc}", file=sys.stderr)
        return 2
    lines = source.splitlines(True)
    pieces: list[Piece] = pieces_for(lines, None)
    if cell is not None:
        if not 1 <= cell <= len(pieces):
            print(f"runfix: error: {shown} has {len(pieces)} cells with code", file=sys.stderr)
            return 2
        pieces = [pieces[cell - 1]]
    return asyncio.run(_run_pieces(shown, path, lines, pieces, timeout))


async def _run_pieces(
    shown: str, path: Path, lines: list[str], pieces: list[Piece], timeout: float | None
) -> int:
    folder = project_folder(path)
    settings = _settings(folder)
    python = find_interpreter(folder, settings.python)
    kernel = LocalKernel(folder, python.path, grace=settings.interrupt_grace)
    try:
        await kernel.start()
    except ExecutorUnavailable as exc:
        print(f"{shown}:1:1: error: {exc}")
        return 2
    failed = False
    try:
        for number, piece in enumerate(pieces, 1):
            request = RunRequest(
                code=code_of(lines, piece.first, piece.last),
                filename=str(path),
                first_line=piece.first + 1,
                timeout=timeout or settings.timeout,
                output_limit=settings.output_limit,
            )
            outcome = await kernel.execute(request)
            results = build(
                outcome, path=str(path), lines=lines, fallback_line=piece.first, folder=folder
            )
            for line in format_results(shown, lines, results):
                print(line, flush=True)
            if outcome.status != RunStatus.OK:
                failed = True
                if number < len(pieces):
                    print(f"{shown}: note: stopped; {len(pieces) - number} later cell(s) not run")
                break
    finally:
        await kernel.shutdown()
    return 1 if failed else 0


async def doctor(folder: Path) -> int:
    print(f"runfix {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    print(f"project folder: {folder}")
    settings = _settings(folder)
    python = find_interpreter(folder, settings.python)
    print(f"interpreter:    {python.path}  (from {python.source})")
    version = await ipykernel_version(python.path)
    if version is None:
        print("ipykernel:      MISSING — runfix cannot run code with this interpreter.")
        print(f"  fix: {install_hint(python.path)}")
        print("  or point the `python` setting at an interpreter that has it.")
        return 1
    print(f"ipykernel:      {version}")
    kernel = LocalKernel(folder, python.path)
    began = time.perf_counter()
    try:
        await kernel.start()
        started = time.perf_counter() - began
        outcome = await kernel.execute(RunRequest("1 + 1", str(folder / "<doctor>"), timeout=30))
    except ExecutorUnavailable as exc:
        print(f"kernel:         FAILED — {exc}")
        return 1
    finally:
        await kernel.shutdown()
    if outcome.status != RunStatus.OK:
        print(f"kernel:         started, but a trivial run ended {outcome.status.value}")
        return 1
    print(f"kernel start:   {started:.2f}s; trivial run {outcome.duration * 1000:.1f} ms")
    print("everything runfix needs is here.")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="runfix", description=__doc__)
    parser.add_argument("--version", action="version", version=f"runfix {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING"])
    run = commands.add_parser("run", help="run a file's cells headless, compiler-style output")
    run.add_argument("file", type=Path)
    run.add_argument("--cell", type=int, help="run only this cell (1-based)")
    run.add_argument("--timeout", type=float, help="seconds per cell (default: setting, 120)")
    check = commands.add_parser("doctor", help="check the interpreter, ipykernel and a kernel")
    check.add_argument("folder", type=Path, nargs="?", default=Path.cwd())
    args = parser.parse_args(argv)

    if args.command == "serve":
        from lsp_server.server import create_server, serve_stdio, serve_tcp, setup_logging

        server = create_server()
        setup_logging(server, getattr(logging, args.log_level))
        if args.tcp:
            host, _, port = args.tcp.rpartition(":")
            if not host or not port.isdigit():
                parser.error("--tcp takes HOST:PORT, e.g. 127.0.0.1:2087")
            serve_tcp(server, host, int(port))
        else:
            serve_stdio(server)
        return 0
    if args.command == "run":
        return run_file(args.file, args.cell, args.timeout)
    return asyncio.run(doctor(project_folder(args.folder.resolve())))


if __name__ == "__main__":
    sys.exit(main())
