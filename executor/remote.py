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
import queue
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, WebSocketException

from executor.base import ExecutorUnavailable
from executor.configs import RemoteConfig
from executor.events import RunRequest, RunStatus
from executor.install import InstallResult, refused, take_line
from executor.jupyter import JupyterKernel
from executor.owner import owner, owner_alive

log = logging.getLogger(__name__)

OWNER_ENV = "KERNEL_RUNFIX_OWNER"
"""Sent with each kernel's creation: an Enterprise Gateway passes KERNEL_* to the kernel,
so an administrator can tell runfix's kernels (and whose) from the rest."""
MAX_MESSAGE = 256 * 1024 * 1024
"""The largest WebSocket message taken (a kernel's image output, base64)."""
REQUEST_TIMEOUT = 15.0
"""Seconds a REST call may take (kernel creation and restart: the start timeout)."""
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


class _Gone(Exception):
    """The server does not know the kernel (404)."""


class _Failed(ExecutorUnavailable):
    """The server answered a request with an error (not a refusal)."""


class _Connect(connect):
    def process_redirect(self, exc: Exception) -> Exception:
        return exc  # not followed: the Authorization header would go along


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _tls_problem(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE" in str(seen).upper():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class KernelSocket:
    """One kernel's channels over the server's WebSocket.

    It answers the calls the run loop makes of a jupyter_client client:
    `execute` and `input` queue a message and return at once; `get_*_msg` wait
    for one with a timeout (`queue.Empty`); `execute_interactive` and
    `wait_for_ready` wait for their own reply. The messages of those two
    never reach the queues. While the connection is down, what is sent waits
    for the next one."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        tls: ssl.SSLContext | None,
        on_drop: Callable[[KernelSocket], None],
    ) -> None:
        self.session = uuid.uuid4().hex
        self._url = f"{url}?session_id={self.session}"
        self._headers, self._tls, self._on_drop = headers, tls, on_drop
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._outbox: asyncio.Queue[str] = asyncio.Queue()
        self._queues: dict[str, asyncio.Queue[dict[str, Any]]] = {
            name: asyncio.Queue() for name in ("iopub", "shell", "stdin")
        }
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._quiet: set[str] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()
        self.closed = False
        self.heard = 0.0
        """Loop time of the last message from the kernel (or of the connection)."""
        self.kernel_restarted: str | None = None
        """Once the kernel's state is gone: "restarting" or "dead" (the server said it died),
        "restarted" or "shutdown" (someone else did it; ipykernel said so)."""

    # -- the connection ----------------------------------------------------------------

    async def open(self, timeout: float) -> None:
        """Connect (again, with the same session: the server replays what it kept)."""
        ws = await _Connect(
            self._url,
            additional_headers=self._headers,
            ssl=self._tls,
            open_timeout=timeout,
            max_size=MAX_MESSAGE,
            max_queue=None,
            ping_interval=20,
            ping_timeout=20,
            user_agent_header="runfix",
        )
        if self.closed:
            await ws.close()
            return
        self._ws = ws
        self.heard = asyncio.get_running_loop().time()
        self._reader = asyncio.ensure_future(self._read(ws))
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())
        self.connected.set()

    async def _read(self, ws: ClientConnection) -> None:
        sock = ws.transport.get_extra_info("socket")
        try:
            async for frame in ws:
                _ack_now(sock)
                msg = _decode(frame)
                if msg is not None:
                    self._take(msg)
        except WebSocketException as exc:
            log.info("the kernel's WebSocket closed: %s", _short(exc))
        except Exception:
            log.exception("reading the kernel's WebSocket failed")
        finally:
            if self._ws is ws:
                self._ws = None
                self.connected.clear()
                if not self.closed:
                    self._on_drop(self)

    async def _write(self) -> None:
        while True:
            text = await self._outbox.get()
            while True:
                await self.connected.wait()
                ws = self._ws
                if ws is None:
                    continue
                try:
                    await ws.send(text)
                    break
                except WebSocketException:
                    self.connected.clear()  # sent again once reconnected

    def _take(self, msg: dict[str, Any]) -> None:
        self.heard = asyncio.get_running_loop().time()
        channel = msg.get("channel")
        parent = str((msg.get("parent_header") or {}).get("msg_id") or "")
        if channel == "iopub":
            if msg.get("msg_type") == "shutdown_reply" and parent not in self._quiet:
                # Someone else shut the kernel down (the idle culler, a DELETE) or restarted it
                # (JupyterLab's Restart): ipykernel says so to every client.
                restart = bool((msg.get("content") or {}).get("restart"))
                self.kernel_restarted = "restarted" if restart else "shutdown"
            if msg.get("msg_type") == "status":
                state = (msg.get("content") or {}).get("execution_state")
                if not parent and state in ("restarting", "dead"):
                    self.kernel_restarted = state
                if parent in self._quiet:
                    if state == "idle":
                        self._quiet.discard(parent)
                    return
            if parent in self._quiet:
                return
            self._queues["iopub"].put_nowait(msg)
        elif channel in ("shell", "control"):
            waiting = self._waiting.pop(parent, None)
            if waiting is not None:
                if not waiting.done():
                    waiting.set_result(msg)
            elif channel == "shell":
                self._queues["shell"].put_nowait(msg)
        elif channel == "stdin":
            self._queues["stdin"].put_nowait(msg)

    def stop_channels(self) -> None:
        self.closed = True
        self.connected.clear()
        for task in (self._reader, self._writer):
            if task is not None:
                task.cancel()
        for waiting in self._waiting.values():
            waiting.cancel()
        if self._ws is not None:
            closing = asyncio.ensure_future(self._ws.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            self._ws = None

    # -- messages ----------------------------------------------------------------------

    def _send(self, msg_type: str, content: dict[str, Any], channel: str = "shell") -> str:
        msg_id = uuid.uuid4().hex
        msg = {
            "header": {
                "msg_id": msg_id,
                "msg_type": msg_type,
                "username": "runfix",
                "session": self.session,
                "date": datetime.now(timezone.utc).isoformat(),
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        self._outbox.put_nowait(json.dumps(msg))
        return msg_id

    def execute(
        self,
        code: str,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
    ) -> str:
        content = _execute(code, silent, store_history, user_expressions, allow_stdin)
        return self._send("execute_request", content)

    def input(self, value: str) -> None:
        self._send("input_reply", {"value": value}, "stdin")

    async def _reply(self, msg_type: str, content: dict[str, Any], timeout: float) -> Any:
        """Send a request and wait for its reply, dropping what it says on iopub."""
        loop = asyncio.get_running_loop()
        msg_id = self._send(msg_type, content)
        waiting: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._waiting[msg_id] = waiting
        self._quiet.add(msg_id)
        try:
            return await asyncio.wait_for(waiting, timeout)
        except BaseException:
            self._quiet.discard(msg_id)  # its idle may never come
            raise
        finally:
            self._waiting.pop(msg_id, None)

    async def execute_interactive(
        self,
        code: str,
        *,
        silent: bool = False,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
        timeout: float = 60.0,
    ) -> Any:
        content = _execute(code, silent, store_history, user_expressions, allow_stdin=False)
        try:
            return await self._reply("execute_request", content, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"the kernel did not answer within {timeout:g}s") from None

    async def wait_for_ready(self, timeout: float = 60.0) -> None:
        try:
            await self._reply("kernel_info_request", {}, timeout)
        except asyncio.TimeoutError:
            raise RuntimeError(f"the kernel did not answer within {timeout:g}s") from None

    async def _get(self, name: str, timeout: float | None) -> dict[str, Any]:
        box = self._queues[name]
        if not box.empty() or timeout == 0:
            try:
                return box.get_nowait()
            except asyncio.QueueEmpty:
                raise queue.Empty from None
        try:
            return await asyncio.wait_for(box.get(), timeout)
        except asyncio.TimeoutError:
            raise queue.Empty from None

    async def get_iopub_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("iopub", timeout)

    async def get_shell_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("shell", timeout)

    async def get_stdin_msg(self, timeout: float | None = None) -> dict[str, Any]:
        return await self._get("stdin", timeout)


_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _ack_now(sock: Any) -> None:
    """Acknowledge what came at once (Linux: TCP_QUICKACK, which lapses: so, each time).

    A kernel's answer is several small WebSocket frames (busy, the input, the result, the
    reply, idle). A server that writes them without TCP_NODELAY (Jupyter Server's does)
    holds each after the first until it is acknowledged, and a receiver delays its
    acknowledgement up to 40 ms: every run took ~48 ms on loopback, ~12 ms with this."""
    if _QUICKACK is not None and sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)


def _execute(
    code: str,
    silent: bool,
    store_history: bool,
    user_expressions: dict[str, str] | None,
    allow_stdin: bool,
) -> dict[str, Any]:
    """An execute_request's content."""
    return {
        "code": code,
        "silent": silent,
        "store_history": store_history,
        "user_expressions": user_expressions or {},
        "allow_stdin": allow_stdin,
        "stop_on_error": True,
    }


def _decode(frame: str | bytes) -> dict[str, Any] | None:
    """A message from a text frame (JSON), or a binary one (JSON and buffers, which runfix
    does not use: a widget's)."""
    try:
        if isinstance(frame, str):
            msg = json.loads(frame)
        else:
            count = struct.unpack("!I", frame[:4])[0]
            offsets = struct.unpack(f"!{count}I", frame[4 : 4 + 4 * count])
            end = offsets[1] if count > 1 else len(frame)
            msg = json.loads(frame[offsets[0] : end])
    except (ValueError, struct.error):
        log.warning("dropped a message from the kernel's WebSocket that is not Jupyter's")
        return None
    return msg if isinstance(msg, dict) else None


# -- kernels runfix created ----------------------------------------------------------------


def ledger_path() -> Path:
    """Where runfix writes down the remote kernels it created (the user's state folder)."""
    from executor.kernel import log_folder

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


class RemoteKernel(JupyterKernel):
    """A kernel on a Jupyter Server or an Enterprise Gateway, one per workspace folder."""

    where = "remote kernel"
    executor = "remote"
    _replaced = "a new kernel was started and the state was lost."

    def __init__(
        self,
        folder: Path,
        config: RemoteConfig,
        *,
        grace: float = 3.0,
        startup_timeout: float = 60.0,
    ) -> None:
        super().__init__(folder, grace=grace, startup_timeout=startup_timeout)
        self.config: RemoteConfig = config
        self.base = (config.url or "").rstrip("/")
        self._http: httpx.AsyncClient | None = None
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

    @property
    def label(self) -> str:
        return f"remote · {self.config.host}"

    @property
    def kernel_id(self) -> str | None:
        return self._kernel_id

    @property
    def launched(self) -> bool:
        return self._kernel_id is not None

    # -- talking to the server ---------------------------------------------------------

    def _token(self) -> str | None:
        name = self.config.token_env
        if name is None:
            return None
        value = os.environ.get(name, "").strip()
        if not value:
            raise ExecutorUnavailable(
                f"Set the environment variable {name} to the token of {self.base} "
                "(runfix's remote.tokenEnv names it; the token itself is never a setting), "
                "then restart the kernel."
            )
        return value

    def _headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        token = self._token()
        if token is not None:
            headers["Authorization"] = f"token {token}"
        return headers

    def _tls(self) -> ssl.SSLContext | None:
        if not self.base.startswith("https:"):
            return None
        context = ssl.create_default_context()
        if not self.config.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                verify=self._tls() or True,
                timeout=httpx.Timeout(REQUEST_TIMEOUT),
                follow_redirects=False,
            )
        return self._http

    async def _request(
        self, method: str, path: str, body: Any = None, *, timeout: float | None = None
    ) -> Any:
        """Call the server's REST API; its JSON answer (None for an empty one).

        Raises `_Gone` for a 404 on a kernel, `ExecutorUnavailable` saying what to do for the
        rest."""
        url = f"{self.base}{path}"
        try:
            response = await self._client().request(
                method,
                url,
                json=body,
                headers=self._headers(),
                timeout=timeout or REQUEST_TIMEOUT,
            )
        except httpx.TimeoutException:
            raise ExecutorUnavailable(
                f"{self.config.host} did not answer {method} {path} within "
                f"{timeout or REQUEST_TIMEOUT:g}s."
            ) from None
        except httpx.HTTPError as exc:
            raise ExecutorUnavailable(self._no_answer(exc)) from None
        if response.status_code in (401, 403):
            raise ExecutorUnavailable(self._refused(response.status_code, _reason(response)))
        if response.status_code == 404 and path.startswith("/api/kernels/"):
            raise _Gone(path)
        if response.status_code >= 400:
            raise _Failed(
                f"{self.config.host} answered {method} {path} with HTTP {response.status_code}: "
                f"{_reason(response)}"
            )
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ExecutorUnavailable(
                f"{self.base} did not answer as a Jupyter Server does (no JSON from {path}); "
                "check remote.url."
            ) from None

    def _no_answer(self, exc: BaseException) -> str:
        if _tls_problem(exc):
            return (
                f"TLS with {self.config.host} failed: {_short(exc)}. Give this machine the "
                "server's certificate authority (SSL_CERT_FILE), or set runfix's "
                "remote.verifyTls to false for a server you trust."
            )
        return (
            f"Nothing answers at {self.base} ({_short(exc)}). Is the Jupyter Server or "
            "Enterprise Gateway running, and the tunnel to it open? (runfix's remote.url)"
        )

    def _refused(self, status: int, reason: str) -> str:
        token = self.config.token_env
        if "KERNEL_USERNAME" in reason:  # an Enterprise Gateway that wants to know who
            fix = "set KERNEL_USERNAME (and what else it needs) in runfix's remote.kernelEnv"
        elif token:
            fix = f"set {token} to a valid token for {self.base}"
        else:
            fix = "set runfix's remote.tokenEnv to the environment variable holding its token"
        said = f" ({reason})" if reason else ""
        return f"{self.config.host} refused runfix (HTTP {status}){said}: {fix}."

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
        await self._sweep()
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

    async def _sweep(self) -> None:
        """Delete what a dead runfix left on this server (once per server and process)."""
        if self.base in _swept:
            return
        _swept.add(self.base)
        orphans = await asyncio.to_thread(_orphans, self.base)
        for kernel_id in orphans:
            try:
                await self._request("DELETE", f"/api/kernels/{kernel_id}")
            except _Gone:
                pass
            except ExecutorUnavailable as exc:
                log.warning("could not delete kernel %s left by a dead runfix: %s", kernel_id, exc)
                continue
            await asyncio.to_thread(_cross_off, kernel_id)
        if orphans:
            log.info(
                "deleted %d kernel(s) a runfix that is gone left on %s", len(orphans), self.base
            )

    async def _create(self) -> None:
        env = {**dict(self.config.kernel_env), OWNER_ENV: owner()}
        body = {"name": self.config.kernel_name, "env": env}
        try:
            model = await self._request("POST", "/api/kernels", body, timeout=self.startup_timeout)
        except _Failed:
            # Neither server says "no such kernel" plainly (a 500 either way): look.
            names = await self.kernel_names()
            if names and self.config.kernel_name not in names:
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

    async def about_server(self) -> str:
        """What the server says it is (`GET /api`), checking the URL and the token on the way:
        `/api/kernelspecs` answers only with a token it takes."""
        about = await self._request("GET", "/api")
        await self._request("GET", "/api/kernelspecs")  # an Enterprise Gateway may not list kernels
        if not isinstance(about, dict) or "version" not in about:
            raise ExecutorUnavailable(f"{self.base} does not answer as a Jupyter Server does.")
        gateway = about.get("gateway_version")
        kind = f"Enterprise Gateway {gateway}" if gateway else "Jupyter Server"
        return f"{kind} (server API {about['version']}); the token is accepted"

    async def kernel_names(self) -> list[str]:
        """The server's kernel specs (empty when it will not say)."""
        try:
            specs = await self._request("GET", "/api/kernelspecs")
        except (ExecutorUnavailable, _Gone):
            return []
        return sorted((specs or {}).get("kernelspecs", {}))

    def _socket_url(self) -> str:
        parts = urlsplit(self.base)
        scheme = "wss" if parts.scheme == "https" else "ws"
        path = f"{parts.path}/api/kernels/{quote(self._kernel_id or '')}/channels"
        return urlunsplit((scheme, parts.netloc, path, "", ""))

    async def _attach(self) -> None:
        """A new WebSocket session to the kernel; then wait for it and load the helper."""
        self._stop_reconnecting()
        link = KernelSocket(self._socket_url(), self._headers(), self._tls(), self._dropped)
        try:
            await link.open(timeout=min(self.startup_timeout, REQUEST_TIMEOUT))
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status in (401, 403):
                raise ExecutorUnavailable(self._refused(status, "")) from None
            raise ExecutorUnavailable(
                f"{self.config.host} refused the kernel's WebSocket (HTTP {status})."
            ) from None
        except (OSError, WebSocketException, asyncio.TimeoutError) as exc:
            raise ExecutorUnavailable(self._no_answer(exc)) from None
        self._socket = link
        self._unreachable = None
        await self._connect(link)

    async def _connect(self, kc: Any) -> None:
        """As every kernel's, but the helper is sent right behind kernel_info instead of
        after its answer (the kernel takes them in order): a start waits one round trip
        fewer."""
        self._preload = asyncio.ensure_future(super()._load_helper(kc))
        try:
            await super()._connect(kc)
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
                await self._request("GET", f"/api/kernels/{self._kernel_id}")
                await link.open(timeout=REQUEST_TIMEOUT)
            except _Gone:
                self._gone = self._gone_note()
                return
            except (ExecutorUnavailable, OSError, WebSocketException, asyncio.TimeoutError) as exc:
                if self._unreachable is None and loop.time() >= patience:
                    self._unreachable = (
                        f"The connection to {self.config.host} was lost ({_short(exc)}); "
                        "runfix keeps reconnecting in the background, and the kernel's state "
                        "is kept if the server still has it"
                    )
                    log.warning("%s", self._unreachable)
                continue
            self._unreachable = None
            log.info("reconnected to kernel %s on %s", self._kernel_id, self.config.host)
            return

    def _gone_note(self) -> str:
        return (
            f"The kernel is gone from {self.config.host} (the server culled it when idle, was "
            "restarted, or someone shut the kernel down)"
        )

    def _stop_reconnecting(self) -> None:
        for task in (self._reconnecting, self._checking):
            if task is not None:
                task.cancel()
        self._reconnecting = self._checking = None

    async def _relaunch(self) -> None:
        """Restart the kernel on the server; a new one when the server no longer has it."""
        began = time.perf_counter()
        self._stop_reconnecting()
        self._disconnect()
        self._socket = None
        if self._kernel_id is not None and self._gone is None:
            path = f"/api/kernels/{self._kernel_id}"
            try:
                await self._request("POST", f"{path}/restart", timeout=self.startup_timeout)
            except _Gone:
                await self._forget()
            except ExecutorUnavailable:
                try:  # a Jupyter Server answers 500 for a kernel it no longer has
                    await self._request("GET", path)
                except _Gone:
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
                with contextlib.suppress(_Gone, ExecutorUnavailable):
                    await self._request("DELETE", f"/api/kernels/{self._kernel_id}")
                await self._forget()
            if self._http is not None:
                await self._http.aclose()
                self._http = None
        finally:
            self._closing = False

    async def _stop_gracefully(self) -> None:
        """The server asks the kernel to shut down, and kills it if it does not."""
        if self._kernel_id is None:
            return
        self._closing = True
        with contextlib.suppress(_Gone):
            await self._request("DELETE", f"/api/kernels/{self._kernel_id}")
        await self._forget()

    async def _interrupt(self) -> None:
        if self._kernel_id is None:
            return
        try:
            await self._request("POST", f"/api/kernels/{self._kernel_id}/interrupt")
        except _Gone:
            self._gone = self._gone_note()
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
            await self._request("GET", f"/api/kernels/{kernel_id}", timeout=CHECK_TIMEOUT)
        except _Gone:
            if kernel_id == self._kernel_id:
                self._gone = self._gone_note()
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
            "shutdown": self._gone_note(),
        }
        return causes.get(said) if said is not None else None

    async def round_trip(self) -> float:
        """Seconds for one empty execute through the kernel's WebSocket (`runfix doctor`)."""
        await self.start()
        assert self._socket is not None
        began = time.perf_counter()
        await self._socket.execute_interactive("", silent=True, store_history=False, timeout=30)
        return time.perf_counter() - began

    # -- installing --------------------------------------------------------------------

    def install_blocked(self) -> str | None:
        return None

    async def install(
        self,
        distributions: list[str],
        *,
        on_line: Callable[[str], None] | None = None,
        cancel: asyncio.Event | None = None,
        timeout: float = 600.0,
    ) -> InstallResult:
        """pip in the remote kernel's own interpreter, run by the kernel (the server gives no
        other way in); its lines are passed on as pip prints them."""
        if (refusal := refused(distributions)) is not None:
            return refusal
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
        outcome = await self.execute(request, cancel=cancel, on_stream=take)
        if pending[0]:
            take_line(pending[0].encode(), lines, on_line)
        if outcome.status == RunStatus.CANCELLED:
            return InstallResult(False, "\n".join([*lines, "cancelled"]), command, cancelled=True)
        if outcome.status == RunStatus.TIMEOUT:
            lines.append(f"timed out after {timeout:g}s")
        return InstallResult(outcome.status == RunStatus.OK, "\n".join(lines), command)


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


def _reason(response: httpx.Response) -> str:
    """What the server said about an error (Jupyter answers JSON with `message`/`reason`)."""
    try:
        body = response.json()
    except ValueError:
        return response.reason_phrase or ""
    if isinstance(body, dict):
        return str(body.get("message") or body.get("reason") or response.reason_phrase or "")[:300]
    return response.reason_phrase or ""
