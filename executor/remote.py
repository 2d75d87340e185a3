"""A Jupyter kernel on a Jupyter Server or an Enterprise Gateway, as an `Executor`.

The server's REST API creates, interrupts, restarts and deletes the kernel
(httpx); its kernel WebSocket carries the Jupyter messages, JSON with a
`channel` field (websockets). `KernelSocket` gives the run loop
(`jupyter.JupyterKernel`) the calls it makes of a jupyter_client kernel client,
so a remote run is read exactly as a local one.

A network fails in ways a local kernel does not, and each has its answer:

- the WebSocket drops: reconnect in the background with backoff, with the same
  session, so the server replays what the kernel said meanwhile; a run waits
  (its timeout still counts) and the editor never does;
- the kernel is gone when we come back (culled when idle, the server
  restarted): a new kernel, and the run or the next one says the state was lost;
- the kernel dies and the server restarts it (it says so on iopub): the same;
- the token is refused, nothing answers, TLS fails: `ExecutorUnavailable`
  with what to do.

The token is read from the environment variable `remote.tokenEnv` names, sent
only in the Authorization header to the configured server (redirects are not
followed), never logged and never sent to the kernel.

Every kernel runfix creates is written down (its id, server, and the runfix
process that owns it) in the user's state folder; a runfix that starts deletes
what a dead one left on the same server, and only that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import InvalidStatus, WebSocketException

from executor.base import ExecutorUnavailable, short_error
from executor.configs import RemoteConfig
from executor.events import RunRequest, RunStatus
from executor.install import InstallResult, take_line
from executor.jupyter import JupyterKernel
from executor.kernel_channels import NotReady, Say
from executor.kernel_socket import KernelSocket
from executor.owner import owner, owner_alive
from executor.server_api import REQUEST_TIMEOUT, Failed, Gone, ServerApi

log = logging.getLogger(__name__)

OWNER_ENV = "KERNEL_RUNFIX_OWNER"
"""Sent with each kernel's creation: an Enterprise Gateway passes KERNEL_* to the kernel,
so an administrator can tell runfix's kernels (and whose) from the rest."""
CHECK_AFTER = 5.0
"""Seconds of silence from the kernel after which `is_alive` asks the server whether it still
has it (a culled kernel's WebSocket may stay open): at the start of a run after a pause, and
every so often during a silent one."""
RECONNECT_FIRST, RECONNECT_MOST = 0.2, 5.0
"""Seconds between reconnection attempts: doubling from the first up to the most."""
RECONNECT_PATIENCE = 30.0
"""Seconds a run waits for a lost connection to come back before it answers that the server
cannot be reached (reconnecting goes on)."""
CHECK_TIMEOUT = 5.0
"""Seconds the question "do you still have the kernel?" may take before a run."""
ATTACH_PATIENCE = 2.0
"""Seconds a new WebSocket session waits for the kernel's first answer before another is
opened (doubling, up to the start timeout)."""


def ledger_path() -> Path:
    """Where runfix writes down the remote kernels it created (the user's state folder)."""
    from executor.local import log_folder

    return log_folder().parent / "remote-kernels.json"


@contextlib.contextmanager
def _ledger() -> Iterator[list[dict[str, Any]]]:
    """The list of kernels runfix created, locked while the caller reads and changes it."""
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    with os.fdopen(fd, "r+", encoding="utf-8") as f:
        with contextlib.suppress(ImportError, OSError):
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            entries = json.loads(f.read() or "[]")
        except ValueError:
            entries = []
        if not isinstance(entries, list):
            entries = []
        yield entries
        f.seek(0)
        f.truncate()
        f.write(json.dumps(entries, indent=1))


def _write_down(url: str, kernel_id: str, folder: Path) -> None:
    with contextlib.suppress(OSError), _ledger() as entries:
        entries.append(
            {
                "url": url,
                "id": kernel_id,
                "owner": owner(),
                "folder": str(folder),
                "at": time.time(),
            }
        )


def _cross_off(kernel_id: str) -> None:
    with contextlib.suppress(OSError), _ledger() as entries:
        entries[:] = [e for e in entries if e.get("id") != kernel_id]


def _orphans(url: str) -> list[str]:
    """The kernels on `url` whose runfix is gone."""
    try:
        with _ledger() as entries:
            return [
                str(e["id"])
                for e in entries
                if e.get("url") == url and "id" in e and not owner_alive(str(e.get("owner", "")))
            ]
    except OSError:
        return []


_swept: set[str] = set()
"""The servers this process has already looked for what a dead runfix left."""


# -- the executor --------------------------------------------------------------------------


def _gone_from(host: str) -> str:
    return (
        f"The kernel is gone from {host} (the server culled it when idle, was restarted, or "
        "someone shut the kernel down)"
    )


async def _sweep(api: ServerApi) -> None:
    """Delete what a dead runfix left on this server (once per server and process)."""
    if api.base in _swept:
        return
    _swept.add(api.base)
    orphans = await asyncio.to_thread(_orphans, api.base)
    for kernel_id in orphans:
        try:
            await api.request("DELETE", f"/api/kernels/{kernel_id}")
        except Gone:
            pass
        except ExecutorUnavailable as exc:
            log.warning("could not delete kernel %s left by a dead runfix: %s", kernel_id, exc)
            continue
        await asyncio.to_thread(_cross_off, kernel_id)
    if orphans:
        log.info("deleted %d kernel(s) a runfix that is gone left on %s", len(orphans), api.base)


class RemoteKernel(JupyterKernel[RemoteConfig]):
    """A kernel on a Jupyter Server or an Enterprise Gateway, one per workspace folder."""

    where = "remote kernel"
    _replaced = "a new kernel was started and the state was lost."

    def __init__(
        self,
        folder: Path,
        config: RemoteConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(folder, config, grace=grace, startup_timeout=startup_timeout)
        self.api = ServerApi(config)
        """The server's REST API."""
        self.base = self.api.base
        self._kernel_id: str | None = None
        self._socket: KernelSocket | None = None
        self._gone: str | None = None
        """Why the kernel is gone for good (the server does not have it), once known."""
        self._unreachable: str | None = None
        """Why the server cannot be reached now (reconnecting goes on meanwhile)."""
        self._checking: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._closing = False
        self._asked = 0.0
        """Loop time the server was last asked whether it still has the kernel."""
        self._preload: asyncio.Future[None] | None = None
        """runfix's helper, on its way into a kernel being connected (`_connect`)."""
        self._spec_language: str | None = None
        """Another language's kernel: the `language` of the kernelspec it was started from."""

    @property
    def label(self) -> str:
        language = f" · {self.config.language}" if self.plain else ""
        return f"remote · {self.config.host}{language}"

    @property
    def plain(self) -> bool:
        return bool(self.config.languages)

    @property
    def language(self) -> str:
        if not self.config.languages:
            return "python"
        return self._spec_language or self.config.languages[0]

    @property
    def kernel_id(self) -> str | None:
        return self._kernel_id

    @property
    def launched(self) -> bool:
        return self._kernel_id is not None

    # -- lifecycle hooks ---------------------------------------------------------------

    async def _launch(self) -> None:
        if not self.base:
            raise ExecutorUnavailable(
                "Set runfix's remote.url to your Jupyter Server or Enterprise Gateway (say \""
                'http://127.0.0.1:8888"): executor "remote" runs code there.'
            )
        if urlsplit(self.base).scheme not in ("http", "https"):
            raise ExecutorUnavailable(
                f"remote.url must start with http:// or https://: {self.base}"
            )
        began = time.perf_counter()
        await _sweep(self.api)
        await self._create()
        await self._attach()
        self.started_in = time.perf_counter() - began
        log.info(
            "remote kernel %s on %s for %s ready in %.2fs",
            self._kernel_id,
            self.config.host,
            self.folder,
            self.started_in,
        )

    async def _create(self) -> None:
        env = {**dict(self.config.kernel_env), OWNER_ENV: owner()}
        if self.plain:
            name, self._spec_language = await self.api.spec_name()
        else:
            name = self.config.kernel_name
        body = {"name": name, "env": env}
        try:
            model = await self.api.request(
                "POST", "/api/kernels", body, timeout=self.startup_timeout
            )
        except Failed:
            # Neither server says "no such kernel" plainly (a 500 either way): look.
            names = await self.api.kernel_names()
            if names and not self.plain and self.config.kernel_name not in names:
                raise ExecutorUnavailable(
                    f"{self.config.host} has no kernel named {self.config.kernel_name!r} "
                    f"(runfix's remote.kernelName); it has {', '.join(names)}."
                ) from None
            raise
        if not isinstance(model, dict) or not isinstance(model.get("id"), str):
            raise ExecutorUnavailable(f"{self.base} did not say which kernel it started.")
        self._kernel_id = model["id"]
        self._gone = None
        await asyncio.to_thread(_write_down, self.base, model["id"], self.folder)

    async def _attach(self) -> None:
        """A new WebSocket session to the kernel; then wait for it and load the helper.

        A session opened while the server restarts the kernel can be left on the ports of the
        process that died (Jupyter Server binds a session's streams to the ports of the moment,
        and a kernel that dies soon after its start comes back on new ones): it is never
        answered. So a session the kernel does not answer within `ATTACH_PATIENCE` seconds
        (doubling) is replaced by a new one, until the start timeout."""
        loop = asyncio.get_running_loop()
        until = loop.time() + self.startup_timeout
        patience = ATTACH_PATIENCE
        while True:
            left = until - loop.time()
            try:
                await self._attach_once(min(patience, left))
                return
            except NotReady:
                if patience >= left:
                    raise
            log.info(
                "kernel %s on %s did not answer: a new session", self._kernel_id, self.config.host
            )
            patience *= 2

    async def _attach_once(self, ready_within: float) -> None:
        self._stop_reconnecting()
        url = self.api.socket_url(self._kernel_id or "")
        link = KernelSocket(url, self.api.headers(), self.api.tls(), self._dropped)
        try:
            await link.open(timeout=min(self.startup_timeout, REQUEST_TIMEOUT))
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise ExecutorUnavailable(self.api.refused(status, "")) from None
            raise ExecutorUnavailable(
                f"{self.config.host} refused the kernel's WebSocket (HTTP {status})."
            ) from None
        except (OSError, WebSocketException, asyncio.TimeoutError) as exc:
            raise ExecutorUnavailable(self.api.no_answer(exc)) from None
        self._socket = link
        self._unreachable = None
        await self._connect(link, ready_within)

    async def _connect(self, kc: Any, ready_within: float | None = None) -> None:
        """As every kernel's, but the helper is sent right behind kernel_info instead of
        after its answer (the kernel takes them in order): a start waits one round trip
        fewer."""
        if not self.plain:
            self._preload = asyncio.ensure_future(super()._load_helper(kc))
        try:
            await super()._connect(kc, ready_within)
        finally:
            preload, self._preload = self._preload, None
            if preload is not None:
                preload.cancel()

    async def _load_helper(self, kc: Any) -> None:
        preload, self._preload = self._preload, None
        if preload is None:
            await super()._load_helper(kc)
        else:
            await preload  # sent with the handshake: its answer is all that is left

    def _dropped(self, link: KernelSocket) -> None:
        if link is not self._socket or self._closing:
            return
        log.warning("lost the WebSocket of kernel %s on %s", self._kernel_id, self.config.host)
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.ensure_future(self._reconnect(link))

    async def _reconnect(self, link: KernelSocket) -> None:
        """Back to the same kernel with backoff, for as long as this is its link.

        It ends when the server says the kernel is gone (`_gone`: the next run gets a new
        kernel). Past `RECONNECT_PATIENCE`, runs stop waiting (`_unreachable`: they answer
        at once that the server cannot be reached) while this goes on trying, so the kernel
        and its state are back the moment the network is."""
        loop = asyncio.get_running_loop()
        patience = loop.time() + RECONNECT_PATIENCE
        delay = RECONNECT_FIRST
        while link is self._socket and not link.closed:
            await asyncio.sleep(delay)  # first: the server needs a moment to see the drop
            delay = min(delay * 2, RECONNECT_MOST)
            try:
                await self.api.request("GET", f"/api/kernels/{self._kernel_id}")
                await link.open(timeout=REQUEST_TIMEOUT)
            except Gone:
                self._gone = _gone_from(self.config.host)
                return
            except (ExecutorUnavailable, OSError, WebSocketException, asyncio.TimeoutError) as exc:
                if self._unreachable is None and loop.time() >= patience:
                    self._unreachable = (
                        f"The connection to {self.config.host} was lost ({short_error(exc)}); "
                        "runfix keeps reconnecting in the background, and the kernel's state "
                        "is kept if the server still has it"
                    )
                    log.warning("%s", self._unreachable)
                continue
            self._unreachable = None
            log.info("reconnected to kernel %s on %s", self._kernel_id, self.config.host)
            return

    def _stop_reconnecting(self) -> None:
        for task in (self._reconnecting, self._checking):
            if task is not None:
                task.cancel()
        self._reconnecting = self._checking = None

    async def _relaunch(self) -> None:
        """Restart the kernel on the server; a new one when the server no longer has it."""
        began = time.perf_counter()
        self._stop_reconnecting()
        said = self._socket.kernel_restarted if self._socket is not None else None
        self._disconnect()
        self._socket = None
        if said in ("restarting", "restarted") and self._gone is None:
            # The server restarted it itself (its own restarter, JupyterLab): a fresh kernel
            # already, or soon; restarting it again would race that restart.
            pass
        elif self._kernel_id is not None and self._gone is None:
            path = f"/api/kernels/{self._kernel_id}"
            try:
                await self.api.request("POST", f"{path}/restart", timeout=self.startup_timeout)
            except Gone:
                await self._forget()
            except ExecutorUnavailable:
                try:  # a Jupyter Server answers 500 for a kernel it no longer has
                    await self.api.request("GET", path)
                except Gone:
                    await self._forget()
                else:
                    raise
        else:
            await self._forget()
        if self._kernel_id is None:
            await self._create()
        await self._attach()
        self.started_in = time.perf_counter() - began

    async def _forget(self) -> None:
        """Let go of the kernel (the server no longer has it, or runfix deleted it)."""
        if self._kernel_id is not None:
            await asyncio.to_thread(_cross_off, self._kernel_id)
        self._kernel_id, self._gone, self._unreachable = None, None, None

    async def _discard(self) -> None:
        self._closing = True
        try:
            self._stop_reconnecting()
            self._disconnect()
            self._socket = None
            if self._kernel_id is not None:
                with contextlib.suppress(Gone, ExecutorUnavailable):
                    await self.api.request("DELETE", f"/api/kernels/{self._kernel_id}")
                await self._forget()
            await self.api.close()
        finally:
            self._closing = False

    async def _stop_gracefully(self) -> None:
        """The server asks the kernel to shut down, and kills it if it does not."""
        if self._kernel_id is None:
            return
        self._closing = True
        with contextlib.suppress(Gone):
            await self.api.request("DELETE", f"/api/kernels/{self._kernel_id}")
        await self._forget()

    async def _interrupt(self) -> None:
        if self._kernel_id is None:
            return
        try:
            await self.api.request("POST", f"/api/kernels/{self._kernel_id}/interrupt")
        except Gone:
            self._gone = _gone_from(self.config.host)
        except ExecutorUnavailable as exc:
            log.warning("could not interrupt kernel %s: %s", self._kernel_id, exc)

    async def is_alive(self) -> bool:
        """Mostly known without a round trip: the WebSocket says when the server restarted
        the kernel, a reconnection when it is gone. After `CHECK_AFTER` seconds of silence
        from the kernel the server is asked whether it still has it (a culled kernel's
        WebSocket may stay open): before a run, waiting for the answer; during one, in the
        background. While reconnecting the kernel is taken as alive; once the server has
        been out of reach for long, this raises `ExecutorUnavailable` saying so (the run
        answers at once; the kernel is kept)."""
        link = self._socket
        if self._unreachable is not None:
            raise ExecutorUnavailable(self._unreachable)
        if (
            self._kernel_id is None
            or link is None
            or self._gone is not None
            or link.kernel_restarted is not None
        ):
            return False
        now = asyncio.get_running_loop().time()
        if link.connected.is_set() and now - max(link.heard, self._asked) >= CHECK_AFTER:
            self._asked = now
            if self._running:
                if self._checking is None or self._checking.done():
                    self._checking = asyncio.ensure_future(self._check())
            else:
                await self._check()
        return self._gone is None

    async def _check(self) -> None:
        """Ask the server whether it still has the kernel; `_gone` if not."""
        kernel_id = self._kernel_id
        try:
            await self.api.request("GET", f"/api/kernels/{kernel_id}", timeout=CHECK_TIMEOUT)
        except Gone:
            if kernel_id == self._kernel_id:
                self._gone = _gone_from(self.config.host)
        except ExecutorUnavailable as exc:
            log.info("could not ask %s about its kernel: %s", self.config.host, exc)

    async def _death_cause(self) -> str | None:
        if self._gone is not None:
            return self._gone
        said = self._socket.kernel_restarted if self._socket is not None else None
        host = self.config.host
        causes = {
            "restarting": f"The kernel died on {host} (crash, os._exit or out of memory) "
            "and the server restarted it",
            "dead": f"The kernel died on {host} and the server could not restart it",
            "restarted": f"Someone restarted the kernel on {host} (JupyterLab, say)",
            "shutdown": _gone_from(self.config.host),
        }
        return causes.get(said) if said is not None else None

    async def round_trip(self) -> float:
        """Seconds for one empty execute through the kernel's WebSocket (`runfix doctor`)."""
        await self.start()
        assert self._socket is not None
        began = time.perf_counter()
        await self._socket.execute_interactive("", silent=True, store_history=False, timeout=30)
        return time.perf_counter() - began

    async def diagnose(self, say: Say) -> bool:
        """The server: its URL, the token (whether it is set and taken, never the token
        itself), the kernel spec, a kernel's start and its round trip."""
        config = self.config
        if not config.url:
            say("remote:         no URL — set runfix's remote.url (or --remote URL)")
            return False
        if config.token_env:
            is_set = "set" if os.environ.get(config.token_env) else "NOT SET"
            said = f"token from {config.token_env} ({is_set})"
        else:
            said = "no token (remote.tokenEnv is not set)"
        say(f"remote:         {config.url}  ({said})")
        try:
            return await self._diagnose_server(say)
        finally:
            await self.shutdown()

    async def _diagnose_server(self, say: Say) -> bool:
        if not await self.api.diagnose(say):
            return False
        if not await self.try_start("remote", say, shutdown=False):
            return False
        trips = sorted([await self.round_trip() for _ in range(5)])
        say(f"round trip:     {trips[2] * 1000:.1f} ms (median of 5 empty executes)")
        return True

    # -- installing --------------------------------------------------------------------

    async def _command(
        self, command: list[str], on_line: Say, cancel: asyncio.Event, timeout: float
    ) -> InstallResult:
        raise ExecutorUnavailable(
            "a remote Jupyter Server runs code in its kernel only, away from this folder's "
            "files: runfix runs the project's tests with the local kernel or the sandbox "
            "(the `executor` setting)"
        )

    async def _install(
        self,
        distributions: list[str],
        on_line: Say | None,
        cancel: asyncio.Event | None,
        timeout: float,
    ) -> InstallResult:
        """pip in the remote kernel's own interpreter, run by the kernel (the server gives no
        other way in); its lines are passed on as pip prints them."""
        return await _pip_in_kernel(self, distributions, on_line, cancel, timeout)


_PIP = """\
import subprocess as _sp, sys as _sys
_p = _sp.Popen(
    [_sys.executable, "-m", "pip", *{arguments!r}],
    stdout=_sp.PIPE, stderr=_sp.STDOUT, text=True,
)
try:
    for _line in _p.stdout:
        print(_line, end="", flush=True)
finally:
    if _p.poll() is None:
        _p.kill()
    _code = _p.wait()
if _code:
    raise RuntimeError(f"pip exited with code {{_code}}")
"""


async def _pip_in_kernel(
    kernel: RemoteKernel,
    distributions: list[str],
    on_line: Say | None,
    cancel: asyncio.Event | None,
    timeout: float,
) -> InstallResult:
    """pip run by the kernel in its own interpreter (`_PIP`), its lines passed on as they come."""
    arguments = [
        "install",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        *distributions,
    ]
    command = ["python", "-m", "pip", *arguments]
    lines: list[str] = []
    pending = [""]

    def take(text: str) -> None:
        *complete, pending[0] = (pending[0] + text).split("\n")
        for line in complete:
            take_line(line.encode(), lines, on_line)

    code = _PIP.format(arguments=arguments)
    request = RunRequest(code, "<runfix install>", 1, timeout, 200_000)
    outcome = await kernel.execute(request, cancel=cancel, on_stream=take)
    if pending[0]:
        take_line(pending[0].encode(), lines, on_line)
    if outcome.status == RunStatus.CANCELLED:
        return InstallResult(False, "\n".join([*lines, "cancelled"]), command, cancelled=True)
    if outcome.status == RunStatus.TIMEOUT:
        lines.append(f"timed out after {timeout:g}s")
    return InstallResult(outcome.status == RunStatus.OK, "\n".join(lines), command)
