"""Settings → the folder's kernel config: a local kernel, a locked-down container, a remote one."""

from __future__ import annotations

from pathlib import Path

from executor.configs import (
    DockerConfig,
    KernelConfig,
    LocalConfig,
    RemoteConfig,
    default_transport,
)
from executor.interpreter import find_interpreter
from lsp_server.model.client import secret_names
from lsp_server.settings import Settings


def docker_config(settings: Settings) -> DockerConfig:
    return DockerConfig(
        image=settings.docker_image,
        network=settings.docker_network,
        memory=settings.docker_memory,
        cpus=settings.docker_cpus,
        pids=settings.docker_pids,
        tmpfs_size=settings.docker_tmpfs_size,
        workspace=settings.docker_workspace,
        user=settings.docker_user,
        wheels=settings.docker_wheels,
    )


def remote_config(settings: Settings) -> RemoteConfig:
    return RemoteConfig(
        url=settings.remote_url,
        token_env=settings.remote_token_env,
        kernel_name=settings.remote_kernel_name,
        kernel_env=settings.remote_kernel_env,
        headers=settings.remote_headers,
        verify_tls=settings.remote_verify_tls,
    )


def kernel_config(folder: Path, settings: Settings) -> KernelConfig:
    """What runs the folder's code. The container never gets a host variable, so it needs no
    list of secrets, nor does a remote one (it runs in its server's environment); the local
    kernel gets the server's environment minus the secrets (`secret_names`)."""
    if settings.executor == "docker":
        return docker_config(settings)
    if settings.executor == "remote":
        return remote_config(settings)
    python = find_interpreter(folder, settings.python).path
    transport = default_transport() if settings.transport == "auto" else settings.transport
    return LocalConfig(python, tuple(sorted(secret_names(settings))), transport)


def sandboxed(settings: Settings) -> bool:
    """Whether code runs in the container (then flagged code needs no confirmation)."""
    return settings.executor == "docker"


def install_blocked(settings: Settings) -> str | None:
    """Why "Install <dist>" cannot work with these settings (and how to allow it), else None."""
    return docker_config(settings).install_blocked() if sandboxed(settings) else None
