"""What a folder's kernel is made of: plain frozen data, cheap to import.

The kernels themselves (`executor.local`, `executor.docker`) import
jupyter_client and docker-py, ~0.3 s together; the language server reads its
settings into these configs long before it starts a kernel, and `runfix serve`
answers `initialize` without importing either (`pool.create` does, on first use).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar
from urllib.parse import urlsplit

DEFAULT_IMAGE = "runfix-sandbox:latest"
NOT_A_SETTING = {"setting": False}
"""A config field's metadata: runfix fills it in; no setting names it."""


def default_transport() -> str:
    """IPC where ZeroMQ has it (not on Windows), else TCP on loopback."""
    return "tcp" if os.name == "nt" else "ipc"


@dataclass(frozen=True)
class Spec:
    """A Jupyter kernelspec of another language than Python: how its kernel starts."""

    name: str
    """The kernelspec's name (`ir`, `bash`, `deno`)."""
    language: str
    """The language it says it runs (`R`, `bash`, `typescript`)."""
    argv: tuple[str, ...]
    """Its command, `{connection_file}` in it."""
    env: tuple[tuple[str, str], ...] = ()
    interrupt_mode: str = "signal"
    display_name: str = ""


@dataclass(frozen=True)
class LocalConfig:
    """A kernel run by a local interpreter; the pool replaces the kernel when this changes."""

    KIND: ClassVar[str] = "kernel"
    """The `executor` setting that makes this kind (its row of `executor.kinds`)."""

    python: str
    hidden_env: tuple[str, ...] = ()
    """Variables the kernel must not see (API keys)."""
    transport: str = field(default_factory=default_transport)
    spec: Spec | None = None
    """Another language's kernel (None: ipykernel in `python`): code is sent to it as it is,
    without runfix's helper, which is Python."""


@dataclass(frozen=True)
class DockerConfig:
    """A kernel in a locked-down container (`executor.docker`)."""

    KIND: ClassVar[str] = "docker"
    """The `executor` setting that makes this kind (its row of `executor.kinds`)."""

    image: str = DEFAULT_IMAGE
    network: str = "none"
    memory: str = "1g"
    """Memory and memory + swap (no swap beyond it)."""
    cpus: float = 1.0
    pids: int = 256
    tmpfs_size: str = "256m"
    workspace: str = "rw"
    """"rw" or "ro": how the folder is mounted at /workspace."""
    user: str | None = None
    """"uid[:gid]"; None: the host user's, or an unprivileged one when that is root."""
    wheels: str | None = None
    """A host folder of wheels, mounted read-only, that installs may use offline."""

    def install_blocked(self) -> str | None:
        """Why an install cannot work in this sandbox, and how to allow it; None if it can."""
        if self.network != "none" or self.wheels:
            return None
        return (
            'The sandbox has no network (docker.network is "none"), so it cannot download '
            "packages. To allow installs, set runfix's docker.network to a Docker network that "
            'reaches your package index (for example "bridge"), or put the wheels in a folder '
            "and set docker.wheels to it (mounted read-only; pip installs from it offline)."
        )


@dataclass(frozen=True)
class RemoteConfig:
    """A kernel on a Jupyter Server or an Enterprise Gateway (`executor.remote`).

    The token is not here: it is read from the variable `token_env` names when the
    kernel connects, so it is never part of a setting, a log line or a comparison."""

    KIND: ClassVar[str] = "remote"
    """The `executor` setting that makes this kind (its row of `executor.kinds`)."""

    url: str | None = None
    """The server's base URL (http(s)://host:port/prefix); None: not set yet."""
    token_env: str | None = None
    """The environment variable holding the server's token; None: no token is sent."""
    kernel_name: str = "python3"
    kernel_env: tuple[tuple[str, str], ...] = ()
    """Sent with the kernel's creation (Enterprise Gateway: KERNEL_USERNAME, KERNEL_NAMESPACE)."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra HTTP headers for every request to the server (a proxy's, say)."""
    verify_tls: bool = True
    languages: tuple[str, ...] = field(default=(), metadata=NOT_A_SETTING)
    """Another language's kernel: the kernelspec `language`s that run it, lower-cased, as
    the server lists them (`/api/kernelspecs`); empty: Python's, `kernel_name`."""
    language: str = field(default="Python", metadata=NOT_A_SETTING)
    """That language as a person names it (what a message says)."""
    named: str | None = field(default=None, metadata=NOT_A_SETTING)
    """That language's kernelspec by name (runfix's `kernels` setting), else None."""

    @property
    def host(self) -> str:
        """The server's host (and port, when not the scheme's), for the status line."""
        parts = urlsplit(self.url or "")
        return parts.netloc.rpartition("@")[2] or "?"


KernelConfig = LocalConfig | DockerConfig | RemoteConfig
