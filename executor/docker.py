"""A Jupyter kernel in a locked-down Docker container, as an `Executor`.

One container per workspace folder. Plain Docker limits nothing unless told
to, so every limit is set here explicitly: no network, a read-only root with
a size-capped tmpfs at /tmp, memory (= memory + swap), cpus and pids limits,
no capabilities, no-new-privileges, a non-root user, capped logs, an
environment built from nothing, and never the Docker socket. The folder is
mounted at /workspace, the kernel's cwd.

The kernel talks to the server over IPC sockets in a runtime directory mounted
from the host (0700, owned by the container's user): no network is needed, so
none is given. The run loop is `jupyter.JupyterKernel`'s; this class says how
the container starts, dies, is interrupted and is cleaned up after.

Liveness and the process count are read from the host (the container's init
process and its cgroup) so a run pays no Docker API call; the API is used to
start, signal, inspect and remove.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.types import LogConfig, Mount

from executor.base import ExecutorUnavailable, short_error
from executor.cancel import stop
from executor.channels import QuickClient
from executor.configs import DEFAULT_IMAGE, DockerConfig
from executor.events import Error, Frame, RunOutcome, RunStatus
from executor.install import InstallResult, take_line, until_done
from executor.interpreter import module_command
from executor.jupyter import JupyterKernel
from executor.kernel_channels import STATEMENT_FILE, Say
from executor.owner import owner, owner_alive, pid_exists

log = logging.getLogger(__name__)
DOCKER_SAID = 200
"""Characters of an error Docker gave kept in what runfix says."""

LABEL = "io.runfix"
FOLDER_LABEL = "io.runfix.folder"
OWNER_LABEL = "io.runfix.owner"
UNPRIVILEGED = "65534:65534"
"""The container's user when runfix runs as root and the folder is root's (nobody)."""

RUNTIME = "/runfix/rt"
SITE = "/runfix/site"
WHEELS = "/runfix/wheels"
WORKSPACE = "/workspace/"
"""Where the folder is mounted in the container (its files' paths there start so)."""
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PROCESS_ALARM = 0.9
"""Share of the pids limit at which processes a run left behind are stopped."""


# -- the engine -------------------------------------------------------------------------

_engine: docker.DockerClient | None = None
_engine_lock = threading.Lock()
_swept = False


def engine() -> docker.DockerClient:
    """The Docker engine from the environment (DOCKER_HOST or the default socket), checked."""
    global _engine
    with _engine_lock:
        if _engine is None:
            try:
                client = docker.from_env(timeout=60)
                client.ping()
            except docker.errors.DockerException as exc:
                raise ExecutorUnavailable(
                    f"No Docker engine answers ({short_error(exc, DOCKER_SAID)}). Start one "
                    '(dockerd, Docker Desktop) or set runfix\'s executor to "kernel".'
                ) from exc
            _engine = client
        return _engine


def describe_engine() -> str:
    """The engine's version and storage, for `runfix doctor` (raises when none answers)."""
    client = engine()
    version, info = client.version(), client.info()
    return (
        f"engine {version.get('Version', '?')} (API {version.get('ApiVersion', '?')}, "
        f"{version.get('Os', '?')}/{version.get('Arch', '?')}, storage {info.get('Driver', '?')})"
    )


def describe_image(name: str) -> str | None:
    """The image's id, size and age, for `runfix doctor`; None when it is not there."""
    try:
        image = engine().images.get(name)
    except docker.errors.ImageNotFound:
        return None
    size = image.attrs.get("Size", 0) / 1e6
    created = str(image.attrs.get("Created", "?"))[:10]
    return f"{name} ({(image.short_id or '?').removeprefix('sha256:')}, {size:.0f} MB, {created})"


def sandbox_ready(image: str) -> bool:
    """Whether the sandbox can run here now: an engine answers and has the image."""
    try:
        return describe_image(image) is not None
    except (ExecutorUnavailable, docker.errors.DockerException, OSError):
        return False


def sweep(client: docker.DockerClient) -> list[str]:
    """Remove runfix containers whose server is gone (crashed or killed); their names."""
    removed = []
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        value = container.labels.get(OWNER_LABEL, "")
        if owner_alive(value):
            continue
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
            removed.append(container.name or container.id or "?")
    if removed:
        log.info("removed %d runfix container(s) left by a server that is gone", len(removed))
    return removed


def _sweep_once(client: docker.DockerClient) -> None:
    global _swept
    with _engine_lock:
        if _swept:
            return
        _swept = True
    try:
        sweep(client)
    except docker.errors.DockerException as exc:
        log.warning(
            "could not look for leftover runfix containers: %s", short_error(exc, DOCKER_SAID)
        )


def container_user(folder: Path, setting: str | None) -> tuple[int, int]:
    """uid:gid for the kernel: the setting, ours, the folder owner's, else nobody."""
    if setting:
        uid, _, gid = setting.partition(":")
        return int(uid), int(gid or uid)
    if os.getuid() != 0:
        return os.getuid(), os.getgid()
    with contextlib.suppress(OSError):
        st = folder.stat()
        if st.st_uid != 0:
            return st.st_uid, st.st_gid
    uid, _, gid = UNPRIVILEGED.partition(":")
    return int(uid), int(gid)


def sandbox_environment() -> dict[str, str]:
    """The container's whole environment: built here, nothing taken from the host."""
    return {
        "PATH": SANDBOX_PATH,
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": SITE,
        "PYTHONDONTWRITEBYTECODE": "1",
        "IPYTHONDIR": "/tmp/.ipython",
        "MPLBACKEND": "Agg",
        "RUNFIX_STATEMENT_FILE": f"{RUNTIME}/{STATEMENT_FILE}",
    }


def _private_dir(prefix: str, uid: int, gid: int) -> Path:
    """A 0700 directory the container's user owns (we may only chown as root)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o700)
    if (uid, gid) != (os.getuid(), os.getgid()):
        os.chown(path, uid, gid)
    return path


def _connection(runtime: Path, uid: int, gid: int) -> dict[str, Any]:
    """Write the kernel's connection file (as the container sees it); the host's view back."""
    info: dict[str, Any] = {
        "transport": "ipc",
        "ip": f"{RUNTIME}/k",
        "shell_port": 1,
        "iopub_port": 2,
        "stdin_port": 3,
        "control_port": 4,
        "hb_port": 5,
        "key": secrets.token_hex(32),
        "signature_scheme": "hmac-sha256",
        "kernel_name": "runfix",
    }
    path = runtime / "kernel.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    if (uid, gid) != (os.getuid(), os.getgid()):
        os.chown(path, uid, gid)
    return {**info, "ip": str(runtime / "k")}


class _Cgroup:
    """The container's cgroup as the host sees it: task count and process ids, cheaply."""

    def __init__(self, pid: int) -> None:
        self.current: Path | None = None
        self.procs: Path | None = None
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                base = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            elif controllers == "":
                base = Path("/sys/fs/cgroup") / path.lstrip("/")
            else:
                continue
            if (base / "pids.current").exists():
                self.current, self.procs = base / "pids.current", base / "cgroup.procs"
                return

    def tasks(self) -> int | None:
        if self.current is None:
            return None
        try:
            return int(self.current.read_text())
        except (OSError, ValueError):
            return None

    def processes(self) -> list[int]:
        if self.procs is None:
            return []
        try:
            return [int(p) for p in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []


class DockerKernel(JupyterKernel[DockerConfig]):
    """A kernel in a locked-down container of its own, the folder mounted at /workspace."""

    where = "container"
    _replaced = "the container was replaced and the kernel's state was lost."

    def __init__(
        self,
        folder: Path,
        config: DockerConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(folder, config, grace=grace, startup_timeout=startup_timeout)
        self.uid, self.gid = container_user(folder, config.user)
        self.container: Container | None = None
        self._site: Path | None = None
        self._init_pid: int | None = None
        """The container's init (docker-init) as a host pid, when this host can see it."""
        self._kernel_pid: int | None = None
        self._cgroup: _Cgroup | None = None
        self._api: docker.APIClient | None = None

    @property
    def launched(self) -> bool:
        return self.container is not None

    @property
    def _container_id(self) -> str:
        assert self.container is not None and self.container.id is not None
        return self.container.id

    def _inspect(self) -> dict[str, Any]:
        """The engine's record of the container (blocking: call it in a thread)."""
        assert self._api is not None
        attrs: dict[str, Any] = self._api.inspect_container(self._container_id)
        return attrs

    @property
    def user(self) -> str:
        return f"{self.uid}:{self.gid}"

    # -- starting --------------------------------------------------------------------

    async def _launch(self) -> None:
        began = time.perf_counter()
        client = await asyncio.to_thread(engine)
        await asyncio.to_thread(_sweep_once, client)
        self._check_user()
        self._check_folder()
        self._runtime = _private_dir("runfix-rt-", self.uid, self.gid)
        if self._site is None:
            self._site = _private_dir("runfix-site-", self.uid, self.gid)
        info = _connection(self._runtime, self.uid, self.gid)
        runtime, site = self._runtime, self._site
        container = await asyncio.to_thread(
            _create, client, self.folder, self.config, runtime, site, self.user
        )
        self.container = container
        self._api = client.api
        attrs = await asyncio.to_thread(self._inspect)
        self._init_pid = _visible_pid(attrs["State"].get("Pid") or 0)
        self._cgroup = _Cgroup(self._init_pid) if self._init_pid else None
        kc = QuickClient()
        kc.load_connection_info(info)  # type: ignore[arg-type]
        kc.start_channels()
        await self._connect_watching(kc)
        self._kernel_pid = self._find_kernel_pid()
        self.started_in = time.perf_counter() - began
        log.info(
            "container %s for %s ready in %.2fs (%s, user %s)",
            self.container.name,
            self.folder,
            self.started_in,
            self.config.image,
            self.user,
        )

    def _check_user(self) -> None:
        if (self.uid, self.gid) == (os.getuid(), os.getgid()) or os.getuid() == 0:
            return
        raise ExecutorUnavailable(
            f"docker.user {self.user} is not your own user ({os.getuid()}:{os.getgid()}); "
            "runfix can hand the kernel its private runtime folder only as your user or as root. "
            "Leave docker.user unset."
        )

    def _check_folder(self) -> None:
        """The kernel's cwd is the folder: its user must be able to enter it."""
        try:
            st = self.folder.stat()
        except OSError as exc:
            raise ExecutorUnavailable(f"The folder {self.folder} cannot be read: {exc}") from exc
        if st.st_uid == self.uid:
            bits = st.st_mode >> 6
        elif st.st_gid == self.gid:
            bits = st.st_mode >> 3
        else:
            bits = st.st_mode
        if bits & 0o5 != 0o5:
            raise ExecutorUnavailable(
                f"The sandbox runs as uid {self.uid}, which cannot enter {self.folder} (owner "
                f"uid {st.st_uid}, mode {stat.filemode(st.st_mode)}). Set docker.user to a uid "
                "that can, or open the folder to it (for example chmod o+rx)."
            )

    async def _connect_watching(self, kc: Any) -> None:
        """Connect, but give up at once (with the container's last words) if it exits."""
        connecting = asyncio.ensure_future(self._connect(kc))
        try:
            while not connecting.done():
                await asyncio.wait({connecting}, timeout=0.2)
                if not connecting.done() and not await self.is_alive():
                    await stop(connecting)
                    kc.stop_channels()
                    raise ExecutorUnavailable(await self._exit_story())
            await connecting
        finally:
            if not connecting.done():
                connecting.cancel()

    async def _exit_story(self) -> str:
        assert self.container is not None
        container = self.container

        def read() -> tuple[dict[str, Any], str]:
            attrs = self._inspect()
            logs = container.logs(tail=8).decode("utf-8", "replace").strip()
            return attrs, logs

        try:
            attrs, logs = await asyncio.to_thread(read)
        except docker.errors.DockerException as exc:
            return f"The sandbox container exited at start ({short_error(exc, DOCKER_SAID)})."
        code = attrs.get("State", {}).get("ExitCode")
        said = f": {logs}" if logs else ""
        return (
            f"The sandbox container exited at start (code {code}){said}. The image "
            f"{self.config.image} needs python3 with ipykernel (`runfix sandbox build` makes one)."
        )

    def _find_kernel_pid(self) -> int | None:
        """The kernel: the init's child right after start (later ones may be orphans)."""
        if self._init_pid is None:
            return None
        try:
            children = Path(f"/proc/{self._init_pid}/task/{self._init_pid}/children").read_text()
        except OSError:
            children = " ".join(
                str(p)
                for p in (self._cgroup.processes() if self._cgroup else [])
                if _parent(p) == self._init_pid
            )
        pids = [int(p) for p in children.split()]
        return pids[0] if len(pids) == 1 else None

    async def _relaunch(self) -> None:
        await self._discard()
        await self._launch()

    async def _discard(self) -> None:
        self._disconnect()
        container, self.container = self.container, None
        self._init_pid = self._kernel_pid = None
        self._cgroup = None
        if container is not None:
            try:
                await asyncio.to_thread(container.remove, force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.DockerException as exc:
                log.warning(
                    "could not remove container %s: %s",
                    container.name,
                    short_error(exc, DOCKER_SAID),
                )
        if self._runtime is not None:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = None

    async def _stop_gracefully(self) -> None:
        assert self.container is not None
        await asyncio.to_thread(self.container.stop, timeout=3)

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._site is not None:
            shutil.rmtree(self._site, ignore_errors=True)
            self._site = None

    # -- watching ----------------------------------------------------------------------

    async def _interrupt(self) -> None:
        """SIGINT to the container's init, which hands it to the kernel."""
        if self.container is None:
            return
        try:
            await asyncio.to_thread(self.container.kill, signal="SIGINT")
        except docker.errors.DockerException as exc:
            log.warning(
                "could not interrupt container %s: %s",
                self.container.name,
                short_error(exc, DOCKER_SAID),
            )

    async def is_alive(self) -> bool:
        if self.container is None:
            return False
        if self._init_pid is not None:
            return pid_exists(self._init_pid)
        try:
            attrs = await asyncio.to_thread(self._inspect)
        except docker.errors.DockerException:
            return False
        return bool(attrs["State"].get("Running"))

    async def _death_cause(self) -> str | None:
        """Out of memory, or the exit code, from Docker's record of the container."""
        if self.container is None:
            return None
        state: dict[str, Any] = {}
        for _ in range(20):  # the engine records the exit (and OOM) a moment after it
            try:
                state = (await asyncio.to_thread(self._inspect))["State"]
            except docker.errors.DockerException:
                return None
            if not state.get("Running"):
                break
            await asyncio.sleep(0.1)
        if state.get("OOMKilled"):
            return f"killed: out of memory (limit {self.config.memory})"
        if state.get("Running"):
            return None
        return f"The kernel died (its container exited with code {state.get('ExitCode')})"

    async def _after_run(self, outcome: RunOutcome) -> RunOutcome:
        outcome = self._explain_denied(self._host_paths(outcome))
        return await self._stop_strays(outcome)

    def _explain_denied(self, outcome: RunOutcome) -> RunOutcome:
        """A write the folder refused to the sandbox's unprivileged user says why, and what
        changes it (a bare `PermissionError` does not)."""
        error = outcome.error
        if error is None or error.ename != "PermissionError" or self.user != UNPRIVILEGED:
            return outcome
        why = (
            " (the sandbox runs as nobody, uid 65534: runfix runs as root and root owns "
            f"{self.folder}; set docker.user to a uid that may write there, or give the "
            "folder to one)"
        )
        explained = replace(error, evalue=error.evalue + why, text=error.text.rstrip() + why + "\n")
        events = tuple(explained if e is error else e for e in outcome.events)
        return replace(outcome, events=events)

    def _host_paths(self, outcome: RunOutcome) -> RunOutcome:
        """Traceback frames in /workspace name the folder's files, as the editor knows them."""
        if outcome.status == RunStatus.OK:
            return outcome

        def host(frame: Frame) -> Frame:
            return replace(frame, filename=self._host(frame.filename))

        events = tuple(
            replace(e, frames=tuple(host(f) for f in e.frames)) if isinstance(e, Error) else e
            for e in outcome.events
        )
        return replace(outcome, events=events)

    async def _stop_strays(self, outcome: RunOutcome) -> RunOutcome:
        """Stop what a run left behind at the process limit (a fork bomb), keeping the kernel."""
        if self._cgroup is None or self.container is None:
            return outcome
        tasks = self._cgroup.tasks()
        if tasks is None or tasks < PROCESS_ALARM * self.config.pids:
            return outcome
        keep = {self._init_pid, self._kernel_pid}
        stopped = 0
        for _ in range(5):
            strays = [p for p in self._cgroup.processes() if p not in keep]
            if not strays:
                break
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    stopped += 1
            await asyncio.sleep(0.1)
        await self._reap()
        left = [p for p in self._cgroup.processes() if p not in keep]
        tasks = self._cgroup.tasks() or 0
        if self._kernel_pid is None or left or tasks >= PROCESS_ALARM * self.config.pids:
            log.warning("processes at the limit in %s; replacing it", self.container.name)
            await self._restart_locked()
            note = f"The run hit the sandbox's process limit ({self.config.pids}); {self._replaced}"
            return replace(outcome, state_lost=True, note=_join(outcome.note, note))
        note = (
            f"The run hit the sandbox's process limit ({self.config.pids}); the "
            f"{stopped} process(es) it left were stopped. The kernel's state is kept."
        )
        log.warning("%s", note)
        return replace(outcome, note=_join(outcome.note, note))

    async def diagnose(self, say: Say) -> bool:
        """The engine, the sandbox image, and how long a container kernel takes to start."""
        try:
            found = await asyncio.to_thread(describe_engine)
        except ExecutorUnavailable as exc:
            say(f"docker:         unavailable — {exc}")
            return False
        say(f"docker:         {found}")
        image = await asyncio.to_thread(describe_image, self.config.image)
        if image is None:
            say(f"sandbox image:  {self.config.image} MISSING — build it: runfix sandbox build")
            return False
        say(f"sandbox image:  {image}")
        return await self.try_start("container", say)

    async def _reap(self) -> None:
        """Have the kernel collect its dead children: as zombies they still count as pids."""
        with contextlib.suppress(Exception):
            await self._channels.execute_interactive(
                "__import__('_runfix_kernel').reap()", silent=True, store_history=False, timeout=10
            )

    # -- installing --------------------------------------------------------------------

    def install_blocked(self) -> str | None:
        return self.config.install_blocked()

    async def _install(
        self,
        distributions: list[str],
        on_line: Say | None,
        cancel: asyncio.Event | None,
        timeout: float,
    ) -> InstallResult:
        """pip inside the container, into the folder's site directory (the root is read-only)."""
        await self.start()
        command = module_command(
            "python3",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-cache-dir",
            "--no-warn-script-location",
            "--target",
            SITE,
            "--upgrade",
        )
        if self.config.wheels:
            command += ["--find-links", WHEELS]
            if self.config.network == "none":
                command.append("--no-index")
        command += distributions
        return await self._exec(command, on_line, cancel, timeout)

    async def _exec(
        self, command: list[str], on_line: Say | None, cancel: asyncio.Event | None, timeout: float
    ) -> InstallResult:
        assert self._api is not None
        api, container, user = self._api, self._container_id, self.user
        return await _exec(api, container, user, command, on_line, cancel, timeout)

    async def _command(
        self, command: list[str], on_line: Say, cancel: asyncio.Event, timeout: float
    ) -> InstallResult:
        """A process in the container, in /workspace (the folder), as the kernel's user."""
        await self.start()
        return await self._exec(command, on_line, cancel, timeout)

    def _host(self, path: str) -> str:
        """A path in /workspace as the folder's file the editor knows."""
        return str(self.folder / path[len(WORKSPACE) :]) if path.startswith(WORKSPACE) else path

    def _inside(self, path: str) -> str | None:
        """A file of the folder as the container sees it (None: outside the folder)."""
        relative = Path(path)
        if not relative.is_relative_to(self.folder):
            return None
        return WORKSPACE + relative.relative_to(self.folder).as_posix()


async def _exec(
    api: docker.APIClient,
    container_id: str,
    user: str,
    command: list[str],
    on_line: Callable[[str], None] | None,
    cancel: asyncio.Event | None,
    timeout: float,
) -> InstallResult:
    """`command` run in the container (`docker exec`) as `user`, its lines passed on as they
    come; cancelled by `cancel`, killed after `timeout` seconds."""
    env = {**sandbox_environment(), "TMPDIR": "/tmp"}
    exec_id = (
        await asyncio.to_thread(
            api.exec_create,
            container_id,
            command,
            user=user,
            environment=env,
            workdir="/workspace",
        )
    )["Id"]
    loop = asyncio.get_running_loop()
    lines: list[str] = []

    def pump() -> None:
        pending = b""
        for chunk in api.exec_start(exec_id, stream=True):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                loop.call_soon_threadsafe(take_line, raw, lines, on_line)
        if pending:
            loop.call_soon_threadsafe(take_line, pending, lines, on_line)

    async def kill() -> None:
        pid = (await asyncio.to_thread(api.exec_inspect, exec_id)).get("Pid") or 0
        if pid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    reader = asyncio.ensure_future(asyncio.to_thread(pump))
    if (stopped := await until_done(reader, kill, lines, command, cancel, timeout)) is not None:
        return stopped
    code = (await asyncio.to_thread(api.exec_inspect, exec_id)).get("ExitCode")
    return InstallResult(code == 0, "\n".join(lines), command)


def _visible_pid(pid: int) -> int | None:
    """The init's host pid if this process can see it (same pid namespace), else None."""
    if pid <= 0:
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if b"init" in cmdline or b"tini" in cmdline else None


def _create(
    client: docker.DockerClient,
    folder: Path,
    config: DockerConfig,
    runtime: Path,
    site: Path,
    user: str,
) -> Container:
    """The sandbox's container for `folder`, started: the folder at /workspace (read-only
    unless `docker.workspace` says), the kernel's runtime folder and its site-packages
    mounted, read-only root, no capabilities, the limits of `config`."""
    mounts = [
        Mount("/workspace", str(folder), type="bind", read_only=config.workspace == "ro"),
        Mount(RUNTIME, str(runtime), type="bind"),
        Mount(SITE, str(site), type="bind"),
    ]
    if config.wheels:
        mounts.append(Mount(WHEELS, config.wheels, type="bind", read_only=True))
    try:
        client.images.get(config.image)  # never a silent pull behind "starting"
    except docker.errors.ImageNotFound as exc:
        build = "runfix sandbox build" + (
            "" if config.image == DEFAULT_IMAGE else f" --tag {config.image}"
        )
        raise ExecutorUnavailable(
            f"The sandbox image {config.image} is not there. Build it with `{build}` (or "
            "`docker pull` it), or set docker.image to an image with python3 and ipykernel."
        ) from exc
    name = f"runfix-{_slug(folder)}-{secrets.token_hex(3)}"
    try:
        return client.containers.run(
            config.image,
            module_command("python3", "ipykernel_launcher", "-f", f"{RUNTIME}/kernel.json"),
            name=name,
            labels={LABEL: "1", FOLDER_LABEL: str(folder), OWNER_LABEL: owner()},
            detach=True,
            init=True,
            user=user,
            working_dir="/workspace",
            environment=sandbox_environment(),
            hostname="runfix",
            network_mode=config.network,
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={config.tmpfs_size},mode=1777"},
            mem_limit=config.memory,
            memswap_limit=config.memory,
            nano_cpus=int(config.cpus * 1e9),
            pids_limit=config.pids,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            mounts=mounts,
        )
    except docker.errors.APIError as exc:
        with contextlib.suppress(docker.errors.DockerException):  # created, not started
            client.containers.get(name).remove(force=True)
        raise ExecutorUnavailable(
            "Docker could not start the sandbox: "
            f"{exc.explanation or short_error(exc, DOCKER_SAID)}"
        ) from exc


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _slug(folder: Path) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", folder.name).strip("-.")[:40] or "folder"


def _join(first: str, second: str) -> str:
    return f"{first} {second}" if first else second
