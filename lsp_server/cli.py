"""The `runfix` command: `serve` (the language server), `run` (headless, `headless.py`),
`doctor`, `sandbox build` (the Docker sandbox's image)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
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
from executor.events import RunRequest, RunStatus
from executor.interpreter import find_interpreter, install_hint, ipykernel_version
from executor.jupyter import JupyterKernel
from executor.kernel import LocalKernel
from lsp_server import __version__
from lsp_server.executors import docker_config
from lsp_server.headless import project_folder, project_settings, run_file
from lsp_server.model import ModelClient, ModelConfig
from lsp_server.settings import Settings


async def doctor(folder: Path) -> int:
    print(f"runfix {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    print(f"project folder: {folder}")
    settings = project_settings(folder)
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
        # Only `serve` needs pygls and the LSP server: `runfix run` never imports them.
        from lsp_server.app import create_server, serve_stdio, serve_tcp, setup_logging

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
