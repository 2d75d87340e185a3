"""Settings → the folder's kernel config, by the kind the `executor` setting names
(`executor.kinds`): a local kernel, a locked-down container, a remote one."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from executor.configs import KernelConfig, LocalConfig, default_transport
from executor.interpreter import find_interpreter
from executor.kinds import KINDS, Kind
from lsp_server.settings import Settings


def kind(settings: Settings) -> Kind:
    return KINDS[settings.executor]


def kernel_config(folder: Path, settings: Settings) -> KernelConfig:
    """What runs the folder's code. The container never gets a host variable, so it needs no
    list of secrets, nor does a remote one (it runs in its server's environment); the local
    kernel gets the server's environment minus the secrets (`Settings.secret_names`)."""
    section = kind(settings).section
    if section is not None:
        return cast(KernelConfig, getattr(settings, section))
    python = find_interpreter(folder, settings.python).path
    transport = default_transport() if settings.transport == "auto" else settings.transport
    return LocalConfig(python, tuple(sorted(settings.secret_names())), transport)


def sandboxed(settings: Settings) -> bool:
    """Whether code runs in the container (then flagged code needs no confirmation)."""
    return kind(settings).sandboxed


def install_blocked(settings: Settings) -> str | None:
    """Why "Install <dist>" cannot work with these settings (and how to allow it), else None."""
    return settings.docker.install_blocked() if sandboxed(settings) else None
