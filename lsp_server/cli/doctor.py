"""`runfix doctor` (is everything runfix needs here, and how fast does it start?) and
`runfix sandbox build`."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor import sandbox
from executor.base import ExecutorUnavailable
from executor.configs import DockerConfig
from executor.docker import DockerKernel, describe_engine, describe_image
from executor.events import RunRequest, RunStatus
from executor.interpreter import find_interpreter, install_hint, ipykernel_version
from executor.jupyter import JupyterKernel
from executor.local import LocalKernel
from executor.trust import TrustStore
from lsp_server import __version__
from lsp_server.cli.run import project_settings
from lsp_server.executors import docker_config, remote_config
from lsp_server.model.client import ModelClient, ModelConfig
from lsp_server.settings import Settings

if TYPE_CHECKING:  # imported when used: it loads httpx and websockets
    from executor.remote import RemoteKernel


async def doctor(folder: Path, command_line: Mapping[str, Any] | None = None) -> int:
    print(f"runfix {__version__} on Python {sys.version.split()[0]} ({sys.executable})")
    print(f"project folder: {folder}")
    settings = project_settings(folder, command_line)
    print(f"executor:       {settings.executor}")
    if settings.executor == "remote":
        ok = await _doctor_remote(folder, settings)
    else:
        local_ok = await _doctor_local(folder, settings)
        needed = settings.executor == "docker"
        docker_ok = await _doctor_docker(folder, docker_config(settings), needed)
        ok = docker_ok if settings.executor == "docker" else local_ok
    await _doctor_model(settings)
    if ok:
        print("everything runfix needs to run code is here.")
    return 0 if ok else 1


async def _doctor_local(folder: Path, settings: Settings) -> bool:
    python = find_interpreter(folder, settings.python)
    print(f"interpreter:    {python.path}  (from {python.source})")
    if not _may_start(folder, python.path):
        # Checking it would start it: the folder's interpreter is the folder's code.
        print("  not started: it comes with this folder, which you have not trusted.")
        print(f"  to let it run: runfix trust {folder}  (or answer runfix's question)")
        return True
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


def _may_start(folder: Path, python: str) -> bool:
    """Whether doctor may start `python` for the folder: the folder is decided, or it is the
    interpreter runfix itself runs on (nothing of the folder's)."""
    decided = TrustStore().decision(folder)
    print(f"trust:          {decided[1].value if decided else 'not decided'}")
    return decided is not None or os.path.realpath(python) == os.path.realpath(sys.executable)


async def _doctor_start(
    label: str, kernel: JupyterKernel, folder: Path, *, shutdown: bool = True
) -> bool:
    """Start the kernel, run something trivial, stop it (unless the caller will); say how
    long each took."""
    began = time.perf_counter()
    try:
        await kernel.start()
        started = time.perf_counter() - began
        outcome = await kernel.execute(RunRequest("1 + 1", str(folder / "<doctor>"), timeout=30))
    except ExecutorUnavailable as exc:
        print(f"{label + ':':<15} FAILED — {exc}")
        return False
    finally:
        if shutdown:
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


async def _doctor_remote(folder: Path, settings: Settings) -> bool:
    """The server: its URL, the token (whether it is set and taken), the kernel spec, and a
    kernel's start and round trip. Never the token itself."""
    from executor.remote import RemoteKernel

    config = remote_config(settings)
    if not config.url:
        print("remote:         no URL — set runfix's remote.url (or --remote URL)")
        return False
    token = config.token_env
    if token:
        said = f"token from {token} ({'set' if os.environ.get(token) else 'NOT SET'})"
    else:
        said = "no token (remote.tokenEnv is not set)"
    print(f"remote:         {config.url}  ({said})")
    kernel = RemoteKernel(folder, config)
    try:
        return await _doctor_server(kernel, folder)
    finally:
        await kernel.shutdown()


async def _doctor_server(kernel: RemoteKernel, folder: Path) -> bool:
    config = kernel.config
    try:
        about = await kernel.about_server()
    except ExecutorUnavailable as exc:
        print(f"server:         FAILED — {exc}")
        return False
    print(f"server:         {about}")
    names = await kernel.kernel_names()
    if names and config.kernel_name not in names:
        print(f"kernel spec:    {config.kernel_name} MISSING — it has {', '.join(names)}")
        print("  fix: set runfix's remote.kernelName to one of them")
        return False
    print(f"kernel spec:    {config.kernel_name}" + (f"  (of {', '.join(names)})" if names else ""))
    if not await _doctor_start("remote", kernel, folder, shutdown=False):
        return False
    trips = sorted([await kernel.round_trip() for _ in range(5)])
    print(f"round trip:     {trips[2] * 1000:.1f} ms (median of 5 empty executes)")
    return True


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


def build_sandbox(tag: str, method: str, mirror: str | None, if_missing: bool) -> int:
    if if_missing:
        try:
            if describe_image(tag) is not None:
                print(f"runfix sandbox: {tag} is there")
                return 0
        except ExecutorUnavailable as exc:
            print(f"runfix sandbox: {exc}", file=sys.stderr)
            return 1
    try:
        sandbox.build(
            tag, method, mirror=mirror or sandbox.MIRROR, say=lambda line: print(line, flush=True)
        )
    except sandbox.BuildError as exc:
        print(f"runfix sandbox: error: {exc}", file=sys.stderr)
        return 1
    return 0
