"""Settings → the folder's kernel config: a local kernel or a locked-down container."""

from __future__ import annotations

from pathlib import Path

from executor.configs import DockerConfig, LocalConfig, default_transport
from executor.interpreter import find_interpreter
from lsp_server.model import secret_names
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


def kernel_config(folder: Path, settings: Settings) -> LocalConfig | DockerConfig:
    """What runs the folder's code. The container never gets a host variable, so it needs no
    list of secrets; the local kernel gets the server's environment minus the model keys."""
    if settings.executor == "docker":
        return docker_config(settings)
    python = find_interpreter(folder, settings.python).path
    transport = default_transport() if settings.transport == "auto" else settings.transport
    return LocalConfig(python, tuple(sorted(secret_names(settings))), transport)


def sandboxed(settings: Settings) -> bool:
    """Whether code runs in the container (then flagged code needs no confirmation)."""
    return settings.executor == "docker"


def install_blocked(settings: Settings) -> str | None:
    """Why "Install <dist>" cannot work with these settings (and how to allow it), else None."""
    return docker_config(settings).install_blocked() if sandboxed(settings) else None
