"""The runfix language server: state shared by the features, and how it starts and stops.

Features live in `lsp_server/features/`, one module per LSP feature, each with
a `register(server)`; handlers there stay thin and call into this class and
the plain modules (`cells`, `results`, `convert`, `runs`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from executor.jupyter import JupyterKernel
from executor.pool import KernelPool
from lsp_server import __version__
from lsp_server.context import error_text
from lsp_server.convert import diagnostics
from lsp_server.executors import kernel_config, sandboxed
from lsp_server.model import ModelClient, ModelConfig
from lsp_server.positions import Width, strip_eol, width_for
from lsp_server.results import DocumentResults, Problem, ResultStore
from lsp_server.settings import PROJECT, Settings, read_pyproject, resolve, section
from lsp_server.transport import MAX_BODY, LineReader, run_frames, send_error, stdin_reader

log = logging.getLogger(__name__)

STATUS = "runfix/status"
INPUT = "runfix/input"
RUN_ANYWAY = "Run"
NO_RUN = "Don't run"
CONFIRM_TIMEOUT = 300.0  # seconds; no answer by then means no


class RunfixProtocol(LanguageServerProtocol):
    """pygls's protocol, with what LSP asks of a server that pygls leaves out.

    - `$/cancelRequest` reaches a running command. pygls runs
      `workspace/executeCommand` handlers behind a wrapper future, and cancelling
      the request only cancels that wrapper: the command would go on and the
      kernel would keep running. Runs register an event here instead; the run
      interrupts the kernel and answers `cancelled` itself.
    - A request before `initialize` is answered -32002, one after `shutdown`
      -32600 (pygls answers neither, so the client waits for ever).
    - The inner futures of pygls's generator handlers (`executeCommand`) are
      forgotten once done (pygls keeps one per request for the server's life).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_cancels: dict[int | str, asyncio.Event] = {}
        self.initialize_seen = False

    def _handle_cancel_notification(self, msg_id: int | str) -> None:
        if (event := self.run_cancels.get(msg_id)) is not None:
            event.set()
            return
        super()._handle_cancel_notification(msg_id)

    def refusal(self, method: str) -> JsonRpcException | None:
        """Why a message must not be handled now (None: handle it); for a notification
        the message is dropped, for a request this is the error it is answered with."""
        if method == lsp.EXIT:
            return None
        if not self.initialize_seen and method != lsp.INITIALIZE:
            return JsonRpcServerNotInitialized(f"{method}: the server is not initialized yet")
        if self._shutdown:
            return JsonRpcInvalidRequest(f"{method}: the server is shut down")
        return None

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        if isinstance(method, str):
            refused = self.refusal(method)
            if refused is not None:
                if msg_id is not None:
                    send_error(self, msg_id, refused)
                return
            if method == lsp.INITIALIZE:
                self.initialize_seen = True
        super().handle_message(message)

    def _execute_handler(
        self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]


class RunfixServer(LanguageServer):
    protocol: RunfixProtocol

    def __init__(self) -> None:
        super().__init__(
            "runfix",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=RunfixProtocol,
        )
        self.store = ResultStore()
        self.kernels = KernelPool()
        self.init_options: Any = None
        self._settings: dict[Path, Settings] = {}
        self._run_locks: dict[Path, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._told: set[str] = set()
        self._models: dict[ModelConfig, ModelClient] = {}
        self._confirmed: set[str] = set()

    # -- errors and background work --------------------------------------------------

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log, never pop up: one broken request must not become a storm of popups."""
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)

    def spawn(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run in the background, keeping a reference and logging a failure."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and (exc := t.exception()) is not None:
                log.error("%s failed: %s", what, exc, exc_info=exc)

        task.add_done_callback(done)
        return task

    def tell(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        """Show a message once per server life (repeats go to the log only)."""
        log.log(logging.WARNING if kind <= lsp.MessageType.Warning else logging.INFO, message)
        if message not in self._told:
            self._told.add(message)
            self.window_show_message(lsp.ShowMessageParams(type=kind, message=message))

    # -- client capabilities ----------------------------------------------------------

    @property
    def width(self) -> Width:
        return width_for(str(self.workspace.position_encoding or "utf-16"))

    def _capability(self, *path: str) -> Any:
        value: Any = self.client_capabilities
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return None
        return value

    @property
    def supports_inlay_hints(self) -> bool:
        return self._capability("text_document", "inlay_hint") is not None

    @property
    def supports_inlay_refresh(self) -> bool:
        return bool(self._capability("workspace", "inlay_hint", "refresh_support"))

    @property
    def supports_configuration(self) -> bool:
        return bool(self._capability("workspace", "configuration"))

    @property
    def supports_document_changes(self) -> bool:
        return bool(self._capability("workspace", "workspace_edit", "document_changes"))

    @property
    def supports_code_action_resolve(self) -> bool:
        support = self._capability("text_document", "code_action", "resolve_support")
        return support is not None and "edit" in (support.properties or [])

    @property
    def supports_disabled_code_actions(self) -> bool:
        return bool(self._capability("text_document", "code_action", "disabled_support"))

    @property
    def supports_progress(self) -> bool:
        return bool(self._capability("window", "work_done_progress"))

    @property
    def supports_input(self) -> bool:
        """The client answers `runfix/input` (it says so in `experimental.runfixInput`)."""
        experimental = self._capability("experimental")
        return isinstance(experimental, dict) and experimental.get("runfixInput") is True

    async def ask_input(self, prompt: str, password: bool) -> str | None:
        """`runfix/input`: the client asks the user for a line (`input()`, `getpass()`)."""
        answer = await self.protocol.send_request_async(
            INPUT, {"prompt": prompt, "password": password}
        )
        # pygls hands an untyped result over as an object with attributes, or a dict.
        value = answer.get("value") if isinstance(answer, dict) else getattr(answer, "value", None)
        return value if isinstance(value, str) else None

    # -- folders and settings ---------------------------------------------------------

    def path_of(self, uri: str) -> str:
        """What tracebacks call the document: its path, or its URI when it has no file."""
        return (to_fs_path(uri) if uri.startswith("file:") else None) or uri

    def folder_for(self, uri: str) -> Path:
        """The workspace folder holding the document (the innermost), else its directory.

        A document with no file (`untitled:`) belongs to the first workspace folder,
        else to the home folder: that is where its code runs."""
        roots = [f.uri for f in self.workspace.folders.values()]
        if self.workspace.root_uri:
            roots.append(self.workspace.root_uri)
        if not uri.startswith("file:"):
            first = next((to_fs_path(r) for r in roots if r.startswith("file:")), None)
            return Path(first) if first else Path.home()
        path = Path(to_fs_path(uri) or unquote(urlparse(uri).path))
        best: Path | None = None
        for root in roots:
            folder = Path(to_fs_path(root) or "")
            inside = folder != Path() and path.is_relative_to(folder)
            if inside and (best is None or len(folder.parts) > len(best.parts)):
                best = folder
        return best or path.parent

    async def settings_for(self, folder: Path) -> Settings:
        if (cached := self._settings.get(folder)) is not None:
            return cached
        pyproject, problem = read_pyproject(folder)
        client = None
        if self.supports_configuration:
            item = lsp.ConfigurationItem(scope_uri=folder.as_uri(), section="runfix")
            try:
                answer = await asyncio.wait_for(
                    self.workspace_configuration_async(lsp.ConfigurationParams(items=[item])), 5
                )
                client = answer[0] if answer else None
            except Exception as exc:  # a client that cannot answer is no reason to stop
                log.warning("workspace/configuration failed: %s", exc)
        settings = resolve(
            (PROJECT, pyproject),
            ("initializationOptions", section(self.init_options) or None),
            ("workspace/configuration", section(client) if client is not None else None),
        )
        for message in ([problem] if problem else []) + list(settings.problems):
            self.tell(f"runfix settings: {message}")
        self._settings[folder] = settings
        return settings

    def cached_settings(self, folder: Path) -> Settings:
        """The folder's settings if known, without asking the client (for fast handlers)."""
        return self._settings.get(folder) or Settings()

    def forget_settings(self) -> None:
        self._settings.clear()

    def results_mode(self, settings: Settings) -> str:
        if settings.results:
            return settings.results
        return "inlay" if self.supports_inlay_hints else "diagnostics"

    async def kernel_for(self, folder: Path) -> JupyterKernel:
        settings = await self.settings_for(folder)
        config = kernel_config(folder, settings)
        kernel = self.kernels.get(
            folder,
            config,
            grace=settings.interrupt_grace,
            startup_timeout=settings.kernel_start_timeout,
        )
        if kernel.on_state is None:
            kernel.on_state = lambda _: self.notify_status(folder, kernel)
            self.notify_status(folder, kernel)
        return kernel

    def notify_status(self, folder: Path, kernel: JupyterKernel) -> None:
        """`runfix/status`: the folder's kernel state and executor, for status bars."""
        if self.protocol.writer is None:
            return
        self.protocol.notify(STATUS, status_of(folder, kernel))

    def model_for(self, settings: Settings) -> ModelClient:
        """One client per model configuration (it keeps its HTTP connections)."""
        config = ModelConfig.from_settings(settings)
        if (client := self._models.get(config)) is None:
            client = self._models[config] = ModelClient(config)
        return client

    async def confirm_run(self, code: str, reason: str, settings: Settings) -> bool:
        """Ask before flagged model-written code runs in the local kernel.

        Only "Run" runs it; "Don't run", a dismissed question, no answer within
        CONFIRM_TIMEOUT or a client that cannot ask all mean no. A "Run" holds for
        this exact code for the rest of the session. In the sandbox (`executor:
        docker`) the container is the control, so nothing is asked."""
        if sandboxed(settings):
            log.info("flagged model-written code runs in the sandbox: %s", reason)
            return True
        digest = hashlib.sha256(code.encode()).hexdigest()
        if digest in self._confirmed:
            return True
        params = lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=f"runfix: {reason} Run it in the local kernel?",
            actions=[lsp.MessageActionItem(title=RUN_ANYWAY), lsp.MessageActionItem(title=NO_RUN)],
        )
        try:
            answer = await asyncio.wait_for(
                self.window_show_message_request_async(params), CONFIRM_TIMEOUT
            )
        except Exception as exc:  # no answer is a no
            log.warning("no answer to the run confirmation (%s): not running", exc or "timeout")
            return False
        if answer is not None and answer.title == RUN_ANYWAY:
            self._confirmed.add(digest)
            return True
        log.info("the user declined to run flagged model-written code")
        return False

    def run_lock(self, folder: Path) -> asyncio.Lock:
        return self._run_locks.setdefault(folder, asyncio.Lock())

    # -- publishing -------------------------------------------------------------------

    def publish(self, uri: str) -> None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        settings = self.cached_settings(self.folder_for(uri))
        with_results = self.results_mode(settings) in ("diagnostics", "both")
        items = diagnostics(
            uri, doc.lines, self.store.get(uri), with_results=with_results, width=self.width
        )
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=uri, diagnostics=items, version=doc.version)
        )

    def error_text_for(self, uri: str, piece: tuple[int, ...], message: str) -> str:
        """The traceback of the error a fix is for (from the stored results), else its message."""
        for problem in self.store.get(uri).problems:
            if problem.kind == "run" and problem.piece == piece and problem.message == message:
                return error_text(problem.message, problem.text)
        return message

    def explain_unavailable(self, uri: str, message: str) -> None:
        """A message, and an Error diagnostic on the document's first line, saying what to fix."""
        self.tell(message, lsp.MessageType.Error)
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return
        first = strip_eol(doc.lines[0]) if doc.lines else ""
        problem = Problem(0, 0, message, "error", message, source=(first,))
        self.store.add(uri, doc.version or 0, DocumentResults(problems=[problem]), doc.lines)
        self.publish(uri)

    def refresh_inlay_hints(self) -> None:
        if self.supports_inlay_refresh:
            self.spawn(self._refresh_inlay_hints(), "inlay hint refresh")

    async def _refresh_inlay_hints(self) -> None:
        try:
            await self.workspace_inlay_hint_refresh_async(None)
        except Exception as exc:  # the client said it could; it is only a hint to redraw
            log.warning("the client did not take workspace/inlayHint/refresh: %s", exc)

    async def close(self) -> None:
        """Stop every kernel; called on shutdown, exit and when the client goes away."""
        models, self._models = list(self._models.values()), {}
        await asyncio.gather(*(m.close() for m in models), return_exceptions=True)
        await self.kernels.shutdown()


def status_of(folder: Path, kernel: JupyterKernel) -> dict[str, str]:
    return {"folder": folder.as_uri(), "state": kernel.state.value, "executor": kernel.executor}


def create_server() -> RunfixServer:
    from lsp_server.features import register_all

    server = RunfixServer()
    register_all(server)
    return server


class _ClientLogHandler(logging.Handler):
    """Python logging → `window/logMessage`, once the client is there."""

    _TYPES = (
        (logging.ERROR, lsp.MessageType.Error),
        (logging.WARNING, lsp.MessageType.Warning),
        (logging.INFO, lsp.MessageType.Info),
    )

    def __init__(self, server: RunfixServer) -> None:
        super().__init__(logging.INFO)
        self.server = server
        self._inside = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._inside, "busy", False) or self.server.protocol.writer is None:
            return
        self._inside.busy = True
        try:
            kind = next((t for level, t in self._TYPES if record.levelno >= level), None)
            if kind is not None:
                message = self.format(record)
                self.server.window_log_message(lsp.LogMessageParams(type=kind, message=message))
        except Exception:
            pass
        finally:
            self._inside.busy = False


def setup_logging(server: RunfixServer, level: int) -> None:
    logging.basicConfig(
        stream=sys.stderr, level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("pygls", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    handler = _ClientLogHandler(server)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    for name in ("lsp_server", "executor"):
        logging.getLogger(name).addHandler(handler)


async def _serve(server: RunfixServer, reader: LineReader | None, writer: Any) -> None:
    """Handle the client's messages until `exit` or the end of input; then stop every kernel."""
    server.protocol.set_writer(writer)
    try:
        await run_frames(reader or await stdin_reader(), server.protocol)
    finally:
        await server.close()


def _exit_code(run: Callable[[], None]) -> int:
    """0 after `shutdown` then `exit` (or the end of input), 1 for `exit` without `shutdown`."""
    try:
        run()
    except SystemExit as exc:  # pygls's exit handler: its code is LSP's
        return exc.code if isinstance(exc.code, int) else 1
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


def serve_stdio(server: RunfixServer) -> int:
    """LSP over stdin/stdout; kernels stop when the client says exit or stdin closes."""
    writer = StdoutWriter(sys.stdout.buffer)
    return _exit_code(lambda: asyncio.run(_serve(server, None, writer)))


def serve_tcp(server: RunfixServer, host: str, port: int) -> int:
    """LSP over one TCP connection; the server ends when that client disconnects."""

    async def main() -> None:
        done = asyncio.Event()

        async def connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                await _serve(server, r, w)
            finally:
                done.set()

        listener = await asyncio.start_server(connection, host, port, limit=MAX_BODY)
        log.info("listening on %s:%s", host, port)
        async with listener:
            await done.wait()

    return _exit_code(lambda: asyncio.run(main()))
