"""The runfix language server: pygls's server and protocol, and the wiring of its parts.

What the server holds: the `Session` (results, kernels, settings, models,
locks), the `LspEditor` (the editor interface over LSP, with the client's
features read at `initialize`) and the `Flow` that runs and fixes. Handlers in
`lsp_server/lsp/features/` call those; `app.create_server()` registers them.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from executor.pool import KernelPool
from lsp_server import __version__
from lsp_server.agents import AgentDoor
from lsp_server.editor import Level
from lsp_server.flow import Flow
from lsp_server.lsp.editor import LspEditor
from lsp_server.lsp.first_answer import First, remember
from lsp_server.lsp.notebook_wire import Asked, to_cell, to_notebook
from lsp_server.lsp.prepared import Prepared
from lsp_server.lsp.transport import send_error, send_prepared
from lsp_server.lsp.uris import ClientUris
from lsp_server.outputs.page import OutputPage
from lsp_server.session import Session
from lsp_server.settings import Settings, folder_settings
from lsp_server.text.languages import LANGUAGES

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

CONFIGURATION_TIMEOUT = 5.0  # seconds to wait for the client's workspace/configuration
SHUTDOWN_GRACE = 10.0  # seconds `shutdown` waits for the runs it cancelled to answer


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
    - A `Prepared` result (JSON text, see `prepared`) is written as it is.
    - URIs come in in one canonical form and go out in the client's own (`uris`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_cancels: dict[int | str, asyncio.Event] = {}
        self.initialize_seen = False
        self.uris = ClientUris()
        self.first: First | None = None
        """The client's `initialize`, answered at start-up or to be remembered (`first_answer`)."""
        self.asked_of_cells: dict[Any, Asked] = {}
        """Requests about a notebook's cell, asked of its document: how to answer on the cell."""

    def _send_data(self, data: Any) -> None:
        """As pygls sends it, each document URI in the form the client used (`uris`)."""
        if data and self.uris.theirs:
            plain = json.loads(json.dumps(data, default=self._serialize_message))
            data = self.uris.outgoing(plain)
        super()._send_data(data)

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
            notebooks = getattr(getattr(self._server, "editor", None), "notebooks", None)
            if notebooks is not None and notebooks.open and msg_id is not None:
                asked = to_notebook(notebooks, method, getattr(message, "params", None))
                if asked is not None:
                    self.asked_of_cells[msg_id] = asked
            if getattr(message, "jsonrpc", None) == JsonRPCProtocol.VERSION:
                # pygls tells a request from a notification by `isinstance` against runtime-
                # checkable Protocols: ~10 µs a request, ~21 µs a notification (each
                # keystroke's didChange) on Python 3.11 (docs/upstream.md). An id says it.
                params = getattr(message, "params", None)
                context = contextvars.copy_context()  # (each handler in its own, as pygls)
                if msg_id is not None:
                    context.run(self._handle_request, msg_id, method, params)
                else:
                    context.run(self._handle_notification, method, params)
                return
        super().handle_message(message)  # (a response to runfix's request; a wrong version)

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        first = self.first
        if first is not None and msg_id == first.msg_id:
            self.first = None
            if error is None:
                plain = json.loads(json.dumps(result, default=self._serialize_message))
                remember(first.key, plain, first.known)
            if first.known is not None:  # answered at start-up (`first_answer`)
                self._result_types.pop(msg_id, None)
                if error is not None:
                    log.error("initialize failed after it was answered: %s", error)
                return
        asked = self.asked_of_cells.pop(msg_id, None)
        if asked is not None and error is None:
            editor: LspEditor = getattr(self._server, "editor")  # noqa: B009  (ours)
            result = to_cell(asked, result, editor.cell_edit)
        if error is None and isinstance(result, Prepared):
            self._result_types.pop(msg_id, None)
            send_prepared(self, msg_id, result.text)
            return
        super()._send_response(msg_id, result, error)

    def _execute_handler(
        self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    @lsp_method(lsp.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls's `shutdown`, cancelling the requests in flight from a copy of its table: a
        future cancelled runs its callbacks at once, and those take it out of the table (pygls
        iterated the table itself: "dictionary changed size during iteration", -32603)."""
        if (user_handler := self.fm.features.get(lsp.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(  # type: ignore[override]  # pyright: ignore[reportIncompatibleMethodOverride]
        self, params: lsp.ExecuteCommandParams
    ) -> Any:
        """runfix's commands, called in the request's own task. pygls runs a command from a
        generator: a future, an inner task and a callback from each, two more turns of the
        loop and a signature read per run. Every command runfix registers takes its
        arguments as `*args` (`RunfixServer.command` checks), so none of that is needed."""
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams(f"Command name {params.command!r} is not defined")
        answer = handler(*(params.arguments or ()))
        return await answer if inspect.isawaitable(answer) else answer

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]


NOTEBOOK_SYNC = lsp.NotebookDocumentSyncOptions(
    notebook_selector=[
        lsp.NotebookDocumentFilterWithCells(
            notebook=lsp.NotebookDocumentFilterNotebookType(notebook_type="jupyter-notebook"),
            cells=[
                lsp.NotebookCellLanguage(name)
                for language in LANGUAGES
                for name in (language.id, *language.aliases)
            ],
        )
    ]
)
"""Jupyter notebooks whose code cells are in a language runfix runs: each is one document."""


class RunfixServer(LanguageServer):
    """pygls's server holding runfix's `Session`, `Flow` and `LspEditor`, wired together."""

    # pygls makes it from `protocol_cls`: ours, so the attribute is typed as ours.
    protocol: RunfixProtocol  # pyright: ignore[reportIncompatibleVariableOverride]

    def __init__(self, kernels: KernelPool | None = None) -> None:
        super().__init__(
            "runfix",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
            protocol_cls=RunfixProtocol,
        )
        self.init_options: Any = None
        self.page: OutputPage | None = None
        self.shutting_down = False
        """`shutdown` came: a run cancelled now says so."""
        """The local output page (`outputs/page.py`), once asked for."""
        self.editor = LspEditor(self)
        self.session = Session(self._read_settings, self.editor.kernel_state, kernels)
        self.flow = Flow(self.session, self.editor)
        self.agents = AgentDoor(self.editor, self.flow)

    def command(self, command_name: str) -> Callable[[F], F]:
        """pygls's `command`, for the shape `RunfixProtocol` calls commands with: a function
        or coroutine taking the server, then the command's arguments as `*args`."""
        register = super().command(command_name)

        def decorate(handler: F) -> F:
            parameters = list(inspect.signature(handler).parameters.values())
            if len(parameters) != 2 or parameters[1].kind != inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"{command_name}: a command is `[async] def f(ls, *args)`")
            return register(handler)

        return decorate

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log, never pop up: one broken request must not become a storm of popups."""
        log.error("server error (%s): %s", getattr(source, "__name__", source), error)

    async def _read_settings(self, folder: Path) -> Settings:
        """The project file, then `initializationOptions`, then `workspace/configuration`."""
        client = None
        if self.editor.features.configuration:
            item = lsp.ConfigurationItem(scope_uri=folder.as_uri(), section="runfix")
            try:
                answer = await asyncio.wait_for(
                    self.workspace_configuration_async(lsp.ConfigurationParams(items=[item])),
                    CONFIGURATION_TIMEOUT,
                )
                client = answer[0] if answer else None
            except Exception as exc:  # a client that cannot answer is no reason to stop
                log.warning("workspace/configuration failed: %s", exc)
        settings, problem = folder_settings(folder, self.init_options, client)
        for message in ([problem] if problem else []) + list(settings.problems):
            self.editor.tell_once(f"runfix settings: {message}", Level.WARNING)
        return settings

    async def shut_down(self) -> None:
        """`shutdown`: every run in flight is cancelled and answered first (`cancelled`, "the
        server is shutting down"), then the kernels stop."""
        self.shutting_down = True
        self.agents.cancel_all()
        for event in list(self.protocol.run_cancels.values()):
            event.set()
        loop = asyncio.get_running_loop()
        until = loop.time() + SHUTDOWN_GRACE
        while (self.protocol.run_cancels or self.agents.running) and loop.time() < until:  # noqa: ASYNC110
            await asyncio.sleep(0.02)  # each run unregisters once it has answered
        await self.close()

    async def close(self) -> None:
        """Stop every kernel and the output page; called on shutdown, exit and when the
        client goes away."""
        await self.agents.close()
        if self.page is not None:
            await asyncio.to_thread(self.page.close)
        await self.flow.close()
