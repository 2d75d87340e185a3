"""The kinds of executor, in one table: what the `executor` setting may say, and for each
its config, its kernel class, where its options live in the settings, and what it means for
trust. Every place that tells the kinds apart reads this table.

The kernel classes are imported on first use (jupyter_client, docker-py and httpx take
~0.3 s): a server answers `initialize` before it needs any of them. Each class is
`runfix doctor`'s check of its kind too (`JupyterKernel.diagnose`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.configs import DockerConfig, KernelConfig, LocalConfig, RemoteConfig

if TYPE_CHECKING:
    from executor.jupyter import Kernel


@dataclass(frozen=True)
class Kind:
    """One kind of executor: a row of `KINDS`."""

    config: type[KernelConfig]
    section: str | None
    """The settings group holding its options (`docker.image`) and the `Settings` attribute
    holding its config; None: made from the top-level settings (`python`, `transport`)."""
    asks_trust: bool
    """It starts an interpreter on this machine that the folder may ship: the user decides
    first (`executor.trust`)."""
    sandboxed: bool
    """Code runs locked away from this machine: flagged code needs no confirmation."""
    load: Callable[[], type[Kernel]]
    """Its kernel class, imported when called."""

    @property
    def name(self) -> str:
        """The `executor` setting's value (named by its config: `LocalConfig.KIND`)."""
        return self.config.KIND

    def kernel(
        self, folder: Path, config: Any, *, grace: float = 3.0, startup_timeout: float = 60.0
    ) -> Kernel:
        if not isinstance(config, self.config):
            raise TypeError(f"a {self.name} kernel needs a {self.config.__name__}")
        return self.load()(folder, config, grace=grace, startup_timeout=startup_timeout)


def _local() -> type[Kernel]:
    from executor.local import LocalKernel

    return LocalKernel


def _docker() -> type[Kernel]:
    from executor.docker import DockerKernel

    return DockerKernel


def _remote() -> type[Kernel]:
    from executor.remote import RemoteKernel

    return RemoteKernel


LOCAL = Kind(LocalConfig, None, asks_trust=True, sandboxed=False, load=_local)
DOCKER = Kind(DockerConfig, "docker", asks_trust=False, sandboxed=True, load=_docker)
REMOTE = Kind(RemoteConfig, "remote", asks_trust=False, sandboxed=False, load=_remote)
KINDS: dict[str, Kind] = {kind.name: kind for kind in (LOCAL, DOCKER, REMOTE)}
"""By `executor` setting; the first is the default. Elsewhere a kind is named through its
row (`LOCAL.name`), never by its string."""


def kind_of(config: KernelConfig) -> Kind:
    """The kind a config makes."""
    return next(kind for kind in KINDS.values() if isinstance(config, kind.config))
