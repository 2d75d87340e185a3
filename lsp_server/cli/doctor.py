"""`runfix doctor`: is everything runfix needs here, and how fast does it start? The
executor's own check is its kernel class's (`JupyterKernel.diagnose`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from executor.base import ExecutorUnavailable
from executor.configs import DEFAULT_IMAGE
from executor.docker import describe_engine, describe_image
from executor.interpreter import find_interpreter
from executor.kinds import KINDS
from executor.trust import TrustStore
from lsp_server import __version__
from lsp_server.cli.run import command_line, project_folder, project_settings
from lsp_server.executors import kernel_config
from lsp_server.model.client import ModelClient, ModelConfig
from lsp_server.settings import Settings


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
    if not kind.sandboxed:
        await _sandbox_note()
    await _doctor_model(settings)
    if ok:
        print("everything runfix needs to run code is here.")
    return 0 if ok else 1


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


def command(args: argparse.Namespace) -> int:
    if not args.folder.is_dir():
        print(f"runfix: error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    return asyncio.run(doctor(project_folder(args.folder.resolve()), command_line(args)))
