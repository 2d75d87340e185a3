"""The `runfix` command: `serve` (the language server), `run` (headless), `doctor`,
`sandbox build` (the Docker sandbox's image)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
import tokenize
from collections.abc import Sequence
from pathlib import Path

from executor import sandbox
from executor.base import ExecutorUnavailable
from executor.docker import (
    DEFAULT_IMAGE,
    DockerConfig,
    DockerKernel,
    describe_engine,
    describe_image,
)
from executor.events import RunOutcome, RunRequest, RunStatus
from executor.interpreter import find_interpreter, install_hint, ipykernel_version
from executor.jupyter import JupyterKernel
from executor.kernel import LocalKernel
from executor.safety import Finding, describe
from executor.text import split_lines
from lsp_server import __version__
from lsp_server.cells import code_of
from lsp_server.context import error_text
from lsp_server.edits import apply_to_lines
from lsp_server.executors import docker_config, kernel_config, sandboxed
from lsp_server.fixing import Fixer
from lsp_server.model import ModelClient, ModelConfig
from lsp_server.results import DocumentResults, Problem, StatementResult, build
from lsp_server.runs import Piece, pieces_for, run_request
from lsp_server.settings import PROJECT, Settings, read_pyproject, resolve

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
    settings = resolve((PROJECT, table))
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


def run_file(path: Path, cell: int | None, timeout: float | None, fix: bool = False) -> int:
    shown = str(path)
    path = path.resolve()
    try:
        with tokenize.open(path) as f:  # the coding cookie (or BOM) decides, as for Python
            source, encoding = f.read(), f.encoding
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        print(f"runfix: error: cannot read {shown}: {exc}", file=sys.stderr)
        return 2
    lines = split_lines(source)
    folder = project_folder(path)
    settings = _settings(folder)
    pieces: list[Piece] = pieces_for(lines, None, settings.prompt_markers)
    if cell is not None:
        if not 1 <= cell <= len(pieces):
            print(f"runfix: error: {shown} has {len(pieces)} cells with code", file=sys.stderr)
            return 2
        pieces = [pieces[cell - 1]]
    headless = _Headless(shown, path, folder, settings, lines, timeout, fix, encoding)
    return asyncio.run(headless.run(pieces))


class _Headless:
    """`runfix run`: run pieces in order; with `--fix`, fix failing ones and write the file."""

    def __init__(
        self,
        shown: str,
        path: Path,
        folder: Path,
        settings: Settings,
        lines: list[str],
        timeout: float | None,
        fix: bool,
        encoding: str = "utf-8",
    ) -> None:
        self.shown, self.path, self.folder, self.settings = shown, path, folder, settings
        self.encoding = encoding
        self.lines, self.timeout, self.fix = lines, timeout or settings.timeout, fix
        config = kernel_config(folder, settings)
        self.kernel = config.create(
            folder, grace=settings.interrupt_grace, startup_timeout=settings.kernel_start_timeout
        )
        self.model = ModelClient(ModelConfig.from_settings(settings))

    def request(self, code: str, first: int) -> RunRequest:
        return run_request(self.settings, str(self.path), code, first, self.timeout)

    def show(self, outcome: RunOutcome, lines: list[str], piece: Piece) -> None:
        results = build(
            outcome, path=str(self.path), lines=lines, fallback_line=piece.first, folder=self.folder
        )
        for line in format_results(self.shown, lines, results):
            print(line, flush=True)

    async def run(self, pieces: list[Piece]) -> int:
        try:
            await self.kernel.start()
        except ExecutorUnavailable as exc:
            print(f"{self.shown}:1:1: error: {exc}")
            return 2
        failed = fixed = False
        shift = 0
        try:
            for number, original in enumerate(pieces, 1):
                piece = Piece(original.first + shift, original.last + shift)
                code = code_of(self.lines, piece.first, piece.last)
                outcome = await self.kernel.execute(self.request(code, piece.first))
                self.show(outcome, self.lines, piece)
                if outcome.status == RunStatus.ERROR and self.fix:
                    new = await self.fix_piece(piece, code, outcome)
                    if new is not None:
                        fixed = True
                        height = new.rstrip("\n").count("\n") + 1
                        self.lines = apply_to_lines(self.lines, piece.first, piece.last, new)
                        shift += height - (piece.last - piece.first + 1)
                        continue
                if outcome.status != RunStatus.OK:
                    failed = True
                    if number < len(pieces):
                        print(
                            f"{self.shown}: note: stopped; {len(pieces) - number} later cell(s) "
                            "not run"
                        )
                    break
        finally:
            await self.kernel.shutdown()
            await self.model.close()
        if fixed:
            self.path.write_text("".join(self.lines), encoding=self.encoding)
            print(f"{self.shown}: note: wrote the fixes", flush=True)
        return 1 if failed else 0

    async def fix_piece(self, piece: Piece, code: str, outcome: RunOutcome) -> str | None:
        async def run(candidate: str) -> RunOutcome:
            return await self.kernel.execute(self.request(candidate, piece.first))

        async def ask(messages: list[dict[str, str]], what: str) -> str:
            print(f"{self.shown}:{piece.first + 1}: note: fixing, {what}", flush=True)
            return await self.model.complete(messages)

        async def confirm(candidate: str, findings: list[Finding]) -> bool:
            if sandboxed(self.settings):
                return True  # the container is the control
            print(
                f"{self.shown}:{piece.first + 1}: warning: the model's fix {describe(findings)}; "
                "not run headless (review it, or run it in the editor)",
                flush=True,
            )
            return False

        fixer = Fixer(
            ask=ask,
            run=run,
            variables=self.kernel.variables,
            confirm=confirm,
            report=lambda message: None,
            max_attempts=self.settings.fix_max_attempts,
            budget=self.settings.context_budget,
        )
        error = outcome.error
        text = error_text(error.message, error.text) if error else outcome.note
        result = await fixer.fix(self.lines, piece.first, piece.last, code, text)
        where = f"{self.shown}:{piece.first + 1}:1"
        if result.status == "fixed" and result.code is not None and result.outcome is not None:
            print(f"{where}: note: fixed on attempt {result.attempts}", flush=True)
            new_lines = apply_to_lines(self.lines, piece.first, piece.last, result.code)
            self.show(result.outcome, new_lines, piece)
            return result.code
        print(f"{where}: error: not fixed: {result.message}", flush=True)
        return None


async def doctor(folder: Path) -> int:
    print(f"runfix {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    print(f"project folder: {folder}")
    settings = _settings(folder)
    print(f"executor:       {settings.executor}")
    local_ok = await _doctor_local(folder, settings)
    needed = settings.executor == "docker"
    docker_ok = await _doctor_docker(folder, docker_config(settings), needed)
    await _doctor_model(settings)
    ok = docker_ok if settings.executor == "docker" else local_ok
    if ok:
        print("everything runfix needs to run code is here.")
    return 0 if ok else 1


async def _doctor_local(folder: Path, settings: Settings) -> bool:
    python = find_interpreter(folder, settings.python)
    print(f"interpreter:    {python.path}  (from {python.source})")
    version = await ipykernel_version(python.path)
    if version is None:
        print("ipykernel:      MISSING — runfix cannot run code with this interpreter.")
        print(f"  fix: {install_hint(python.path)}")
        print("  or point the `python` setting at an interpreter that has it.")
        return False
    print(f"ipykernel:      {version}")
    kernel = LocalKernel(folder, python.path)
    print(f"kernel log:     {kernel.log_path}  (its stdout, stderr and ipykernel's own log)")
    return await _doctor_start("kernel", kernel, folder)


async def _doctor_start(label: str, kernel: JupyterKernel, folder: Path) -> bool:
    """Start the kernel, run something trivial, stop it; say how long each took."""
    began = time.perf_counter()
    try:
        await kernel.start()
        started = time.perf_counter() - began
        outcome = await kernel.execute(RunRequest("1 + 1", str(folder / "<doctor>"), timeout=30))
    except ExecutorUnavailable as exc:
        print(f"{label + ':':<15} FAILED — {exc}")
        return False
    finally:
        await kernel.shutdown()
    if outcome.status != RunStatus.OK:
        print(f"{label + ':':<15} started, but a trivial run ended {outcome.status.value}")
        return False
    print(f"{label + ' start:':<15} {started:.2f}s; trivial run {outcome.duration * 1000:.1f} ms")
    return True


async def _doctor_docker(folder: Path, config: DockerConfig, needed: bool) -> bool:
    """The engine, the sandbox image, and how long a container kernel takes to start."""
    try:
        engine = await asyncio.to_thread(describe_engine)
    except ExecutorUnavailable as exc:
        if needed:
            print(f"docker:         unavailable — {exc}")
        else:
            print('docker:         no engine answers (only `executor: "docker"` needs one)')
        return False
    print(f"docker:         {engine}")
    image = await asyncio.to_thread(describe_image, config.image)
    if image is None:
        print(f"sandbox image:  {config.image} MISSING — build it: runfix sandbox build")
        return False
    print(f"sandbox image:  {image}")
    return await _doctor_start("container", DockerKernel(folder, config), folder)


async def _doctor_model(settings: Settings) -> None:
    """The model endpoint: what is configured, and whether it answers (never the key)."""
    config = ModelConfig.from_settings(settings)
    has_key = "set" if config.api_key() else "not set"
    print(f"model:          {config.name} at {config.base_url} ({config.api_key_env} {has_key})")
    if (why := config.missing()) is not None:
        print(f"  {why}")
        return
    client = ModelClient(config)
    try:
        problem = await client.unanswered()
    finally:
        await client.close()
    print(f"  the endpoint does not answer: {problem}" if problem else "  the endpoint answers.")


def build_sandbox(tag: str, method: str, mirror: str, if_missing: bool) -> int:
    if if_missing:
        try:
            if describe_image(tag) is not None:
                print(f"runfix sandbox: {tag} is there")
                return 0
        except ExecutorUnavailable as exc:
            print(f"runfix sandbox: {exc}", file=sys.stderr)
            return 1
    try:
        sandbox.build(tag, method, mirror=mirror, say=lambda line: print(line, flush=True))
    except sandbox.BuildError as exc:
        print(f"runfix sandbox: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, not {text!r}")
    return value


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
    run.add_argument(
        "--timeout", type=_seconds, help="seconds per cell (default: the setting, 120)"
    )
    run.add_argument(
        "--fix",
        action="store_true",
        help="fix failing cells with the model (each fix proven by running it) and write the file",
    )
    check = commands.add_parser("doctor", help="check the interpreter, ipykernel and a kernel")
    check.add_argument("folder", type=Path, nargs="?", default=Path.cwd())
    images = commands.add_parser("sandbox", help="the Docker sandbox's image")
    sandbox_commands = images.add_subparsers(dest="sandbox_command", required=True)
    build = sandbox_commands.add_parser(
        "build", help="build the default image (python3 + ipykernel), with or without a registry"
    )
    build.add_argument("--tag", default=DEFAULT_IMAGE, help=f"image name (default {DEFAULT_IMAGE})")
    build.add_argument(
        "--method",
        default="auto",
        choices=["auto", "dockerfile", "rootfs"],
        help="dockerfile: from python:3.11-slim (needs a registry); rootfs: debootstrap + "
        "docker import (needs root, no registry); auto: dockerfile if the base image can be had",
    )
    build.add_argument("--mirror", default=sandbox.MIRROR, help="Debian mirror for --method rootfs")
    build.add_argument("--if-missing", action="store_true", help="do nothing if the image exists")
    args = parser.parse_args(argv)

    if args.command == "serve":
        from lsp_server.server import create_server, serve_stdio, serve_tcp, setup_logging

        server = create_server()
        setup_logging(server, getattr(logging, args.log_level))
        if args.tcp:
            host, _, port = args.tcp.rpartition(":")
            if not host or not port.isdigit():
                parser.error("--tcp takes HOST:PORT, e.g. 127.0.0.1:2087")
            return serve_tcp(server, host, int(port))
        return serve_stdio(server)
    if args.command == "run":
        return run_file(args.file, args.cell, args.timeout, args.fix)
    if args.command == "sandbox":
        return build_sandbox(args.tag, args.method, args.mirror, args.if_missing)
    return asyncio.run(doctor(project_folder(args.folder.resolve())))


if __name__ == "__main__":
    sys.exit(main())
