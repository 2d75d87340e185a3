"""The editor interface over LSP: what the flow asks, as requests and notifications to
the client (`publishDiagnostics`, `showMessage`, `showMessageRequest`,
`applyEdit`, work-done progress, `runfix/input`, `runfix/status`)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
import uuid
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from executor.cancel import stop
from executor.jupyter import Kernel
from executor.trust import Choice
from lsp_server.capabilities import ClientFeatures
from lsp_server.contract import (
    INPUT_REQUEST,
    OUTPUTS_NOTIFICATION,
    STATUS_NOTIFICATION,
    KernelStatus,
    OutputsChanged,
    to_json,
)
from lsp_server.editor import (
    Level,
    LineEdit,
    Place,
    Shown,
    Snapshot,
    TrustAnswer,
    TrustQuestion,
    lines_match,
)
from lsp_server.lsp.convert import diagnostics, result_diagnostics_json
from lsp_server.lsp.edits import one_edit, replace_lines
from lsp_server.lsp.notebook_wire import cell_diagnostics, cell_outputs, cell_workspace_edit
from lsp_server.lsp.notebooks import Notebooks
from lsp_server.lsp.transport import send_prepared_notification
from lsp_server.lsp.uris import ClientUris
from lsp_server.outputs.results import Front, StatementResult
from lsp_server.text.languages import Language, language_of

log = logging.getLogger(__name__)
SHOWN = {"shown": True}
"""A log record's `extra` for what the client was shown already (`window/showMessage`): not
sent again as a `window/logMessage`."""

RUN_ANYWAY = "Run"
NO_RUN = "Don't run"
CONFIRM_TIMEOUT = 300.0  # seconds; no answer by then means no
TRUST_ACTIONS = {
    "Trust folder": Choice.TRUST,
    "Run in the sandbox": Choice.SANDBOX,
    "Use runfix's own Python": Choice.OWN,
}
DONT_RUN = "Don't run"
METHOD_NOT_FOUND = -32601
PROGRESS_DELAY = 0.3  # seconds: quicker work shows no progress at all
STATE_SETTLE = 0.05  # seconds "busy" must last to be worth a status bar's update
TRANSIENT = ("new", "busy")
PUBLISH_EVERY = 0.1  # seconds between a document's diagnostics while work is under way
_MESSAGE_TYPES = {
    Level.ERROR: lsp.MessageType.Error,
    Level.WARNING: lsp.MessageType.Warning,
    Level.INFO: lsp.MessageType.Info,
}
_tokens = itertools.count(1)


def kernel_status(folder: Path, kernel: Kernel) -> KernelStatus:
    return KernelStatus(folder.as_uri(), kernel.state.value, kernel.label)


class LspProgress:
    """Work-done progress that appears only if the work lasts; cancelling it sets `cancel`."""

    def __init__(
        self, editor: LspEditor, server: LanguageServer, enabled: bool, cancel: asyncio.Event
    ) -> None:
        self.editor = editor
        self.server = server
        self.enabled = enabled
        self.cancel = cancel
        self.token: str | None = None
        self.message = "Running"
        self._before = self.message
        self._now = asyncio.Event()
        self._starter: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LspProgress:
        self.editor.working += 1
        self.editor.progresses.append(self)
        if self.enabled:
            self._starter = asyncio.ensure_future(self._begin())
        return self

    async def _begin(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):  # a question shows it at once
            await asyncio.wait_for(self._now.wait(), PROGRESS_DELAY)
        token = f"runfix-run-{next(_tokens)}"
        progress = self.server.work_done_progress
        await progress.create_async(token)
        future = progress.tokens.get(token)
        if future is not None:
            future.add_done_callback(lambda f: self.cancel.set() if f.cancelled() else None)
        progress.begin(
            token,
            lsp.WorkDoneProgressBegin(title="runfix", message=self.message, cancellable=True),
        )
        self.token = token

    def report(self, message: str, percentage: int | None = None) -> None:
        self.message = message
        if self.token is not None:
            self.server.work_done_progress.report(
                self.token, lsp.WorkDoneProgressReport(message=message, percentage=percentage)
            )

    async def waiting(self, question: str | None) -> None:
        """Said while a question waits for the user (None: it was answered), the progress
        shown at once for it: a spinner that only says "Running" hides a question in the
        notification centre (issue 70, 3)."""
        if question is None:
            self.report(self._before)
            return
        self._before = self.message
        shown = question if len(question) <= 80 else question[:79] + "…"
        self.message = f"waiting for your answer: {shown}"
        self._now.set()
        if self._starter is not None and not self._starter.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._starter), 1.0)
        self.report(self.message)

    async def __aexit__(self, *exc: object) -> None:
        self.editor.working -= 1
        if self in self.editor.progresses:
            self.editor.progresses.remove(self)
        if not self.editor.working:
            self.editor.flush()
        if self._starter is not None and not self._starter.done():
            await stop(self._starter)
        if self.token is not None:
            self.server.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd())
            self.server.work_done_progress.tokens.pop(self.token, None)


def folder_among(uri: str, roots: list[str]) -> Path:
    """The innermost of the workspace folders `roots` holding the document, else its
    directory (a document with no file: the first folder's, else the home folder)."""
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


def _outputs_changed(
    notebooks: Notebooks,
    uri: str,
    before: tuple[StatementResult, ...],
    now: tuple[StatementResult, ...],
) -> list[OutputsChanged]:
    """`runfix/outputs` for a document that has results it did not have (an output view
    refreshes; a plot or table may open one): a notebook's, for each cell that got some."""
    known = {id(s) for s in before}
    new = [s for s in now if id(s) not in known]
    rich = [s.first for s in new if any(o.kind != "text" for o in s.outputs)]
    notebook = notebooks.open.get(uri)
    if not new or notebook is None:
        return [OutputsChanged(uri, rich)] if new else []
    cells = cell_outputs(notebook, [s.first for s in new], rich)
    return [OutputsChanged(cell, lines) for cell, lines in cells.items()]


class LspEditor:
    """The `Editor` interface over LSP: requests and notifications to the connected client."""

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        self.features = ClientFeatures()
        self._told: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.working = 0
        self.progresses: list[LspProgress] = []
        """The progress shown now (a question asked meanwhile is said in each)."""
        """Pieces of work under way (runs, fixes): their results are published at most
        every PUBLISH_EVERY per document, and all of them when the last one ends."""
        self._published_at: dict[str, float] = {}
        self._pending: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._sent: dict[str, tuple[int | None, list[Any]]] = {}
        """What each document's last publication said (JSON), and at which version (the
        same is not said twice)."""
        self._shown: dict[str, Shown] = {}
        """What each document shows, as the core last handed it (`show`)."""
        self.notebooks = Notebooks()
        """The open notebooks: each one document of its code cells (`notebooks`)."""
        self._folders: dict[str, tuple[list[str], Path]] = {}
        """Each document's folder, and the workspace folders it was found among."""
        self._kernels: dict[Path, Kernel] = {}
        self._touched: set[str] = set()
        self._hinted: dict[str, tuple[tuple[StatementResult, ...], tuple[Front, ...]]] = {}
        """Each document's results when the client was last asked to redraw its hints."""
        self.restricted: str | None = None
        """Why this client's workspace may run nothing (VS Code's Restricted Mode): said on
        the line instead of asking."""
        self._state_timers: dict[Path, asyncio.TimerHandle] = {}
        self._states_sent: dict[Path, KernelStatus] = {}

    # -- documents and folders ----------------------------------------------------------

    def text(self, uri: str) -> Snapshot | None:
        doc = self.server.workspace.text_documents.get(uri)
        return None if doc is None else Snapshot(doc.version or 0, tuple(doc.lines))

    def live(self, uri: str) -> None:  # (its results show a run's output: hints)
        return None

    def open_documents(self) -> list[str]:
        """The open documents (a notebook's, not its cells')."""
        return [u for u in self.server.workspace.text_documents if not self.notebooks.is_cell(u)]

    def path_of(self, uri: str) -> str:
        return (to_fs_path(uri) if uri.startswith("file:") else None) or uri

    def cell_start(self, uri: str) -> tuple[str, int] | None:
        notebook = self.notebooks.of_cell(uri)
        if notebook is None or uri not in notebook:
            return None
        return notebook.uri, notebook.start(uri)

    def cell_place(self, uri: str, line: int) -> tuple[str, int] | None:
        notebook = self.notebooks.open.get(uri)
        place = notebook.at(line) if notebook is not None else None
        return (place.cell, place.line) if place is not None else None

    def language_of(self, uri: str) -> Language | None:
        doc = self.server.workspace.text_documents.get(uri)
        return language_of(doc.language_id if doc is not None else None, self.path_of(uri))

    def workspace_folders(self) -> list[Path]:
        """The workspace's folders (its root when it names no folders)."""
        workspace = self.server.workspace
        roots = [f.uri for f in workspace.folders.values()] or [workspace.root_uri or ""]
        return [Path(p) for r in roots if r.startswith("file:") and (p := to_fs_path(r))]

    def folder_for(self, uri: str) -> Path:
        """The workspace folder holding the document (the innermost), else its directory.

        A document with no file (`untitled:`) belongs to the first workspace folder,
        else to the home folder: that is where its code runs."""
        workspace = self.server.workspace
        roots = [f.uri for f in workspace.folders.values()]
        if workspace.root_uri:
            roots.append(workspace.root_uri)
        known = self._folders.get(uri)
        if known is not None and known[0] == roots:
            return known[1]
        folder = folder_among(uri, roots)
        self._folders[uri] = (roots, folder)
        return folder

    # -- results ------------------------------------------------------------------------

    def _publish(self, uri: str) -> None:
        """Send the document's diagnostics as the core last handed them."""
        self._pending.discard(uri)
        self._touched.add(uri)
        doc = self.server.workspace.text_documents.get(uri)
        shown = self._shown.get(uri)
        if doc is None or shown is None:
            return
        with_results = self.features.results_mode(shown.setting) in ("diagnostics", "both")
        results, width = shown.results, self.features.width
        protocol = self.server.protocol
        # The problems (a few, with URIs: in the client's own form) through lsprotocol; the
        # statements' results (thousands, no URI) made as JSON and written as JSON text.
        problems = diagnostics(uri, doc.lines, results, width=width)
        uris = getattr(protocol, "uris", None) or ClientUris()
        items: list[Any] = [protocol._converter.unstructure(d) for d in problems]
        if with_results:
            items += result_diagnostics_json(doc.lines, results, width)
        self._published_at[uri] = time.monotonic()
        notebook = self.notebooks.open.get(uri)
        if notebook is None:
            self._send_diagnostics(uri, doc.version, uris.outgoing(items))
            return
        for cell, on_cell in cell_diagnostics(notebook, items).items():
            cell_doc = self.server.workspace.text_documents.get(cell)
            version = cell_doc.version if cell_doc is not None else None
            self._send_diagnostics(cell, version, uris.outgoing(on_cell))

    def _send_diagnostics(self, uri: str, version: int | None, items: list[Any]) -> None:
        """`textDocument/publishDiagnostics` (JSON text), unless the client has these."""
        if self._sent.get(uri) == (version, items):
            return  # the client has exactly these
        self._sent[uri] = (version, items)
        protocol = self.server.protocol
        uris = getattr(protocol, "uris", None) or ClientUris()
        params: dict[str, Any] = {"uri": uris.outgoing(uri), "diagnostics": items}
        if version is not None:
            params["version"] = version
        text = json.dumps(params, separators=(",", ":"), ensure_ascii=False)
        send_prepared_notification(protocol, lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, text)

    def closed(self, uri: str) -> None:
        """The document closed: its diagnostics go (a notebook's, from its cells), and what
        was known of it."""
        for known in (self._sent, self._shown, self._folders, self._hinted):
            known.pop(uri, None)
        self._pending.discard(uri)
        notebook = self.notebooks.remove(uri)
        for target in notebook.cells if notebook is not None else [uri]:
            self._sent.pop(target, None)
            empty = lsp.PublishDiagnosticsParams(uri=target, diagnostics=[])
            self.server.text_document_publish_diagnostics(empty)

    def show(self, change: Shown) -> None:
        """Publish the document's results now, unless they were published a moment ago
        while work is under way: then once the moment is over (a whole-file run of a
        thousand cells sends tens of publications, not a thousand)."""
        uri = change.uri
        self._shown[uri] = change
        since = time.monotonic() - self._published_at.get(uri, 0.0)
        if not self.working or since >= PUBLISH_EVERY:
            self._publish(uri)
            return
        self._pending.add(uri)
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(PUBLISH_EVERY - since, self.flush)

    def flush(self) -> None:
        """Publish what is waiting."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for uri in list(self._pending):
            self._publish(uri)

    def runs_done(self) -> None:
        """Ask the client to redraw its inlay hints, if a document's hints changed."""
        touched, self._touched = self._touched, set()
        changed = False
        for uri in touched:
            shown = self._shown.get(uri)
            if shown is None:
                continue
            results = shown.results
            now = tuple(results.statements)
            before, fronts = self._hinted.get(uri, ((), ()))
            if before != now or fronts != results.fronts:
                self._hinted[uri] = (now, results.fronts)
                changed = True
                if self.features.outputs and self.server.protocol.writer is not None:
                    for told in _outputs_changed(self.notebooks, uri, before, now):
                        self.server.protocol.notify(OUTPUTS_NOTIFICATION, to_json(told))
        if changed and self.features.inlay_refresh:
            self.spawn(self._refresh_inlay_hints(), "inlay hint refresh")

    async def _refresh_inlay_hints(self) -> None:
        try:
            await self.server.workspace_inlay_hint_refresh_async(None)
        except Exception as exc:  # the client said it could; it is only a hint to redraw
            log.warning("the client did not take workspace/inlayHint/refresh: %s", exc)

    # -- telling and asking -------------------------------------------------------------

    def tell(self, message: str, level: Level, place: Place | None = None) -> None:
        # logged for the server's own log, not sent again as a `window/logMessage`
        log.log(
            logging.INFO if level == Level.INFO else logging.WARNING, "%s", message, extra=SHOWN
        )
        params = lsp.ShowMessageParams(type=_MESSAGE_TYPES[level], message=message)
        self.server.window_show_message(params)

    def tell_once(self, message: str, level: Level) -> None:
        """Shown once per server life (repeats go to the server's log only)."""
        if message in self._told:
            level_of = logging.INFO if level == Level.INFO else logging.WARNING
            return log.log(level_of, "%s", message, extra=SHOWN)
        self._told.add(message)
        self.tell(message, level)

    def remark(self, place: Place, message: str) -> None:
        at = "" if place.line is None else f", {self.line_name(place.uri, place.line)}"
        log.info("%s%s: %s", place.uri, at, message)

    def line_name(self, uri: str, line: int) -> str:
        return nb.name(line) if (nb := self.notebooks.open.get(uri)) else f"line {line + 1}"

    async def _question(self, message: str, titles: Sequence[str]) -> tuple[str | None, str]:
        """`window/showMessageRequest`: the title chosen, else None and why there is none
        (no answer by `CONFIRM_TIMEOUT`, dismissed, an editor that cannot ask)."""
        params = lsp.ShowMessageRequestParams(
            type=lsp.MessageType.Warning,
            message=message,
            actions=[lsp.MessageActionItem(title=t) for t in titles],
        )
        waiting = list(self.progresses)
        for shown in waiting:
            await shown.waiting(message.removeprefix("runfix: "))
        try:
            return await _asked(self.server, params, titles)
        finally:
            for shown in waiting:
                await shown.waiting(None)

    async def confirm(self, reason: str, place: Place) -> bool:
        message = f"runfix: {reason} Run it in the local kernel?"
        title, why = await self._question(message, (RUN_ANYWAY, NO_RUN))
        if title is None:
            log.info("flagged code not run: %s", why)
        return title == RUN_ANYWAY

    async def choose(self, message: str, choices: Sequence[str]) -> str | None:
        return (await self._question(message, choices))[0]

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        """`window/showMessageRequest` naming the folder and the interpreter that would run."""
        if self.restricted is not None:
            return TrustAnswer(None, self.restricted)
        kept = {Choice.SANDBOX: question.sandbox, Choice.OWN: bool(question.own)}
        titles = [t for t, c in TRUST_ACTIONS.items() if kept.get(c, True)]
        title, why = await self._question(question.said(), [*titles, DONT_RUN])
        if title in TRUST_ACTIONS:
            return TrustAnswer(TRUST_ACTIONS[title])
        return TrustAnswer(None, "you chose Don't run" if title == DONT_RUN else why)

    async def ask_input(self, prompt: str, password: bool, timeout: float) -> str | None:
        """`runfix/input`: the client asks the user for a line (`input()`, `getpass()`),
        saying how long it waits (`timeout`: the folder's other runs wait behind this one)."""
        params = {"prompt": prompt, "password": password, "timeout": timeout}
        asked = f"runfix-input-{uuid.uuid4().hex}"
        pending = self.server.protocol.send_request_async(INPUT_REQUEST, params, msg_id=asked)
        try:  # shielded: an answer that comes after all is taken and dropped, not a traceback
            answer = await asyncio.wait_for(asyncio.shield(pending), timeout)
        except asyncio.TimeoutError:
            pending.add_done_callback(_dropped)
            self.server.protocol.notify(
                "$/cancelRequest", lsp.CancelParams(id=asked)
            )  # close its prompt
            self.tell(
                f"runfix: no answer to input() within {timeout:g} s: the run was cancelled "
                "(setting inputTimeout).",
                Level.WARNING,
            )
            return None
        # pygls hands an untyped result over as an object with attributes, or a dict.
        value = answer.get("value") if isinstance(answer, dict) else getattr(answer, "value", None)
        if answer is not None and not isinstance(value, str):
            log.warning('runfix/input: the answer is not {"value": <text>}: %r', answer)
            self.tell(
                "runfix: the editor answered input() with something that is not text: the "
                "run was cancelled.",
                Level.WARNING,
            )
        return value if isinstance(value, str) else None

    # -- edits --------------------------------------------------------------------------

    def workspace_edit(self, uri: str, version: int, edit: LineEdit) -> lsp.WorkspaceEdit | None:
        """The edit of the document as it is at `version`, versioned where the client can
        check it (a notebook's: of the cell it changes); None if the document is no longer
        at that version (or the edit would reach across a notebook's cells)."""
        doc = self.server.workspace.text_documents.get(uri)
        if doc is None or (doc.version or 0) != version:
            return None
        change = replace_lines(doc.lines, edit.first, edit.last, edit.code, self.features.width)
        if uri in self.notebooks.open:
            return self.cell_edit(lsp.WorkspaceEdit(changes={uri: [change]}))
        return one_edit(uri, doc.version, change, self.features.document_changes)

    def cell_edit(self, edit: lsp.WorkspaceEdit) -> lsp.WorkspaceEdit | None:
        """The edit with each edit of a notebook's document made one of the cell it changes
        (`notebook_wire.cell_workspace_edit`); None when one reaches across cells."""
        versioned = self.features.document_changes
        documents = self.server.workspace.text_documents
        made = cell_workspace_edit(self.notebooks, documents, edit, self.features.width, versioned)
        if made is None:
            log.warning("an edit of a notebook reaches across its cells: not applied")
        return made

    def file_edit(
        self, path: Path, lines: Sequence[str], edit: LineEdit
    ) -> lsp.WorkspaceEdit | None:
        """The edit of another file as `lines` had it: versioned where it is open (and still
        says that), else of the file itself; None if it changed since."""
        uri = path.as_uri()
        doc = self.server.workspace.text_documents.get(uri)
        if doc is not None:
            if not lines_match(doc.lines, lines):
                return None
            return self.workspace_edit(uri, doc.version or 0, edit)
        change = replace_lines(lines, edit.first, edit.last, edit.code, self.features.width)
        return one_edit(uri, None, change, self.features.document_changes)

    async def apply_file(
        self,
        path: Path,
        lines: Sequence[str],
        edit: LineEdit,
        label: str,
        file: tuple[int, int] | None = None,
    ) -> bool:
        return await self._send_edit(self.file_edit(path, lines, edit), str(path), label)

    async def apply(self, uri: str, version: int, edit: LineEdit, label: str) -> bool:
        """One `workspace/applyEdit` (one undo step)."""
        return await self._send_edit(self.workspace_edit(uri, version, edit), uri, label)

    async def _send_edit(self, change: lsp.WorkspaceEdit | None, what: str, label: str) -> bool:
        if change is None:
            log.warning("%s changed before the edit could be sent; not applied", what)
            return False
        try:
            result = await self.server.workspace_apply_edit_async(
                lsp.ApplyWorkspaceEditParams(edit=change, label=label)
            )
        except Exception as exc:
            log.warning("workspace/applyEdit failed: %s", exc)
            return False
        if not result.applied:
            log.warning("the editor did not apply the edit: %s", result.failure_reason)
        return bool(result.applied)

    def progress(self, cancel: asyncio.Event) -> LspProgress:
        return LspProgress(self, self.server, self.features.progress, cancel)

    # -- kernels and background work ----------------------------------------------------

    def kernel_state(self, folder: Path, kernel: Kernel) -> None:
        """`runfix/status`: the folder's kernel state and executor, for status bars.

        "busy" is told once it has lasted STATE_SETTLE, every other state at once: a run
        of a few milliseconds tells nothing (it told "busy" and "idle", a third of the
        server's work for a trivial run), a long one is "busy" until it ends."""
        self._kernels[folder] = kernel
        if kernel.state.value in TRANSIENT:
            if folder not in self._state_timers:
                loop = asyncio.get_running_loop()
                self._state_timers[folder] = loop.call_later(STATE_SETTLE, self._tell_state, folder)
            return
        self._tell_state(folder)

    def _tell_state(self, folder: Path) -> None:
        if (timer := self._state_timers.pop(folder, None)) is not None:
            timer.cancel()
        status = kernel_status(folder, self._kernels[folder])
        if self.server.protocol.writer is None or self._states_sent.get(folder) == status:
            return
        self._states_sent[folder] = status
        self.server.protocol.notify(STATUS_NOTIFICATION, to_json(status))

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and (exc := t.exception()) is not None:
                log.error("%s failed: %s", what, exc, exc_info=exc)

        task.add_done_callback(done)


def _dropped(late: asyncio.Future[Any]) -> None:
    """An answer to a request given up on: read (so that no error is left unretrieved)."""
    if not late.cancelled() and late.exception() is not None:
        log.info("a late answer to a request given up on: %s", late.exception())


async def _asked(
    server: LanguageServer, params: lsp.ShowMessageRequestParams, titles: Sequence[str]
) -> tuple[str | None, str]:
    """The question asked: the title chosen, else None and why there is none."""
    try:
        answer = await asyncio.wait_for(
            server.window_show_message_request_async(params), CONFIRM_TIMEOUT
        )
    except asyncio.TimeoutError:
        return None, "no answer to runfix's question"
    except JsonRpcException as exc:
        if exc.code == METHOD_NOT_FOUND:
            return None, "this editor cannot show runfix's question"
        log.warning("runfix's question failed: %s", exc)
        return None, f"the editor answered runfix's question with an error: {exc}"
    except Exception as exc:
        log.warning("runfix's question failed: %s", exc)
        return None, "no answer to runfix's question"
    title = getattr(answer, "title", None)
    return (title, "") if title in titles else (None, "dismissed")
