"""The model's side of runfix over LSP: generate, run and fix, fix with model, install.

Each entry point reads the document, asks the model (streamed into progress,
cancellable), checks what came back, and changes the document only through
`workspace/applyEdit` — one edit, one undo step. Model-written code is shown
before it runs; what the scan flags becomes Warning diagnostics and needs a
confirmation before it runs in the local kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp

from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import RunOutcome, RunRequest, RunStatus, Variable
from executor.safety import Finding, describe, scan
from lsp_server.cells import code_of
from lsp_server.context import ReplyError, error_text, extract_code, generate_messages
from lsp_server.edits import replace_lines
from lsp_server.fixing import Fixer
from lsp_server.model import ModelCancelled, ModelError
from lsp_server.positions import strip_eol
from lsp_server.prompts import Prompt, prompt_at, prompt_lines
from lsp_server.results import DocumentResults, Problem, build
from lsp_server.runs import PieceRun, Progress, acquire, keep, run_document, run_request
from lsp_server.server import RunfixServer
from lsp_server.settings import Settings

log = logging.getLogger(__name__)

SHOWN_TEXT = 80  # characters of streamed text shown in progress
EDIT_ARRIVAL = 5.0  # seconds to wait for the editor's didChange after an applied edit


class ModelProgress(Progress):
    """Progress that shows the model's text as it streams in (the tail of its last line)."""

    _last = 0.0

    def stream(self, prefix: str) -> Any:
        def on_text(text: str) -> None:
            now = time.monotonic()
            if now - self._last < 0.1:
                return
            self._last = now
            tail = text.rstrip().rsplit("\n", 1)[-1][-SHOWN_TEXT:]
            self.report(f"{prefix}: {tail}" if tail else prefix)

        return on_text


async def _variables(server: RunfixServer, uri: str) -> list[Variable]:
    """The kernel's variables if it is up; none rather than waiting on a start or a long run."""
    kernel = server.kernels.find(server.folder_for(uri))
    if kernel is None or kernel.state not in (ExecutorState.IDLE, ExecutorState.BUSY):
        return []
    try:
        return await asyncio.wait_for(kernel.variables(), 10)
    except Exception as exc:
        log.warning("could not read the kernel's variables: %s", exc)
        return []


def _fail(server: RunfixServer, message: str, **extra: Any) -> dict[str, Any]:
    server.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))
    log.warning("%s", message)
    return {"status": "error", "message": message, **extra}


def workspace_edit(
    server: RunfixServer, uri: str, version: int | None, edits: Sequence[lsp.TextEdit]
) -> lsp.WorkspaceEdit:
    """Edits of one document as it was at `version`, versioned where the client can check it."""
    if server.supports_document_changes:
        return lsp.WorkspaceEdit(
            document_changes=[
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri, version),
                    edits=list(edits),
                )
            ]
        )
    return lsp.WorkspaceEdit(changes={uri: list(edits)})


async def apply_edit(
    server: RunfixServer, uri: str, version: int | None, edits: Sequence[lsp.TextEdit], label: str
) -> bool:
    """One `workspace/applyEdit` for the document as it was at `version` (one undo step)."""
    edit = workspace_edit(server, uri, version, edits)
    try:
        result = await server.workspace_apply_edit_async(
            lsp.ApplyWorkspaceEditParams(edit=edit, label=label)
        )
    except Exception as exc:
        log.warning("workspace/applyEdit failed: %s", exc)
        return False
    if not result.applied:
        log.warning("the editor did not apply the edit: %s", result.failure_reason)
    return bool(result.applied)


async def _shown(server: RunfixServer, uri: str, first: int, code: str) -> int | None:
    """Wait until the document holds `code` at line `first`; its version then, else None."""
    want = [strip_eol(line) for line in code.rstrip("\n").split("\n")]
    deadline = time.monotonic() + EDIT_ARRIVAL
    while time.monotonic() < deadline:
        doc = server.workspace.text_documents.get(uri)
        if doc is None:
            return None
        lines = doc.lines
        if [strip_eol(line) for line in lines[first : first + len(want)]] == want:
            return doc.version or 0
        await asyncio.sleep(0.01)
    return None


def _safety_problems(findings: Sequence[Finding], lines: Sequence[str]) -> list[Problem]:
    out = []
    for f in findings:
        first, last = f.line - 1, f.end_line - 1
        message = f"runfix safety: model-written code {f.message}"
        source = tuple(strip_eol(line) for line in lines[first : last + 1])
        out.append(Problem(first, last, message, "warning", message, kind="safety", source=source))
    return out


def mark_findings(server: RunfixServer, uri: str, version: int, findings: list[Finding]) -> None:
    doc = server.workspace.text_documents.get(uri)
    if doc is None or not findings:
        return
    problems = _safety_problems(findings, doc.lines)
    server.store.add(uri, version, DocumentResults(problems=problems), doc.lines)
    server.publish(uri)


# -- generate ---------------------------------------------------------------------------


def _find_again(
    lines: Sequence[str], was: Prompt, text: str, markers: Sequence[str]
) -> Prompt | None:
    """The prompt in the document as it is now (it may have moved while the model wrote)."""
    if was.line < len(lines) and strip_eol(lines[was.line]) == text:
        return prompt_at(lines, was.line, markers)
    same = [i for i in prompt_lines(lines, markers) if strip_eol(lines[i]) == text]
    if not same:
        return None
    return prompt_at(lines, min(same, key=lambda i: abs(i - was.line)), markers)


async def generate(
    server: RunfixServer, uri: str, line: int, run: bool, cancel: asyncio.Event
) -> dict[str, Any]:
    doc = server.workspace.get_text_document(uri)
    settings = await server.settings_for(server.folder_for(uri))
    prompt = prompt_at(doc.lines, line, settings.prompt_markers)
    if prompt is None:
        return _fail(server, f"runfix: line {line + 1} is not a prompt (`# ai: …`).")
    prompt_line = strip_eol(doc.lines[prompt.line])
    variables = await _variables(server, uri)
    messages = generate_messages(
        prompt.text,
        doc.lines,
        prompt.line,
        (prompt.body_first, prompt.body_last),
        variables,
        settings.context_budget,
    )
    model = server.model_for(settings)
    progress = ModelProgress(server, cancel)
    async with progress:
        progress.report(f"Generating: {prompt.text[:60]}")
        try:
            reply = await model.complete(
                messages, on_text=progress.stream("Generating"), cancel=cancel
            )
        except ModelCancelled:
            return {"status": "cancelled"}
        except ModelError as exc:
            return _fail(server, f"runfix: {exc}")
    try:
        code = extract_code(reply, prompt_line=prompt_line)
    except ReplyError as exc:
        return _fail(server, f"runfix: nothing was inserted: {exc}.")
    doc = server.workspace.get_text_document(uri)
    now = _find_again(doc.lines, prompt, prompt_line, settings.prompt_markers)
    if now is None:
        return _fail(
            server, "runfix: the prompt changed while the model wrote; nothing was inserted."
        )
    edit = replace_lines(doc.lines, now.body_first, now.body_last, code, server.width)
    label = "runfix: regenerate" if now.has_body else "runfix: generate"
    if not await apply_edit(server, uri, doc.version, [edit], label):
        return _fail(server, "runfix: the editor did not apply the generated code.")
    first, last = now.body_first, now.body_first + code.rstrip("\n").count("\n")
    answer: dict[str, Any] = {"status": "ok", "range": _lines_range(first, last)}
    version = await _shown(server, uri, first, code)
    if version is None:
        log.warning("the generated code did not show up in %s; it will not be run", uri)
        return answer
    mark_findings(server, uri, version, scan(code, first + 1))
    if run or settings.auto_run:
        answer["run"] = await run_document(server, uri, _lsp_lines(first, last), cancel)
    return answer


def _lines_range(first: int, last: int) -> dict[str, Any]:
    return {"start": {"line": first, "character": 0}, "end": {"line": last + 1, "character": 0}}


def _lsp_lines(first: int, last: int) -> lsp.Range:
    return lsp.Range(lsp.Position(first, 0), lsp.Position(last + 1, 0))


# -- run and fix ------------------------------------------------------------------------


def _fixer(
    server: RunfixServer,
    uri: str,
    first: int,
    settings: Settings,
    progress: ModelProgress,
    cancel: asyncio.Event,
) -> Fixer:
    model = server.model_for(settings)
    folder = server.folder_for(uri)
    path = server.path_of(uri)

    async def ask(messages: list[dict[str, str]], what: str) -> str:
        return await model.complete(messages, on_text=progress.stream(what), cancel=cancel)

    async def confirm(code: str, findings: list[Finding]) -> bool:
        return await server.confirm_run(code, f"The model's fix {describe(findings)}.", settings)

    async def run(code: str) -> RunOutcome:
        """A candidate runs where the failing piece stands; its results are not kept."""
        kernel = await server.kernel_for(folder)
        lock = server.run_lock(folder)
        if not await acquire(lock, cancel):
            return RunOutcome(RunStatus.CANCELLED, (), 0.0, note="cancelled before it ran")
        try:
            return await kernel.execute(run_request(settings, path, code, first), cancel=cancel)
        finally:
            lock.release()

    return Fixer(
        ask=ask,
        run=run,
        variables=lambda: _variables(server, uri),
        confirm=confirm,
        report=progress.report,
        max_attempts=settings.fix_max_attempts,
        budget=settings.context_budget,
    )


def _outcome_error(outcome: RunOutcome) -> str:
    error = outcome.error
    return error_text(error.message, error.text) if error else outcome.note or "it failed"


async def run_and_fix(
    server: RunfixServer, uri: str, line_range: lsp.Range | None, cancel: asyncio.Event
) -> dict[str, Any]:
    runs: list[PieceRun] = []
    answer = await run_document(server, uri, line_range, cancel, runs=runs)
    if answer["status"] in ("ok", "cancelled"):
        return {"status": answer["status"], "attempts": 0}
    if not runs or runs[-1].outcome.status != RunStatus.ERROR:
        message = answer.get("message") or (runs[-1].outcome.note if runs else "it did not run")
        return {"status": "failed", "attempts": 0, "message": message}
    failed = runs[-1]
    first, last = failed.piece.first, failed.piece.last
    return await fix_piece(
        server, uri, failed.lines, first, last, _outcome_error(failed.outcome), cancel, apply=True
    )


async def fix_piece(
    server: RunfixServer,
    uri: str,
    lines: Sequence[str],
    first: int,
    last: int,
    error: str,
    cancel: asyncio.Event,
    *,
    apply: bool,
) -> dict[str, Any]:
    """Fix lines first..last (as `lines` had them) that raised `error`.

    With `apply`, the passing version is applied with `workspace/applyEdit`;
    else the answer carries the edit (for `codeAction/resolve`)."""
    settings = await server.settings_for(server.folder_for(uri))
    code = code_of(lines, first, last)
    progress = ModelProgress(server, cancel)
    async with progress:
        fixer = _fixer(server, uri, first, settings, progress, cancel)
        result = await fixer.fix(lines, first, last, code, error)
    answer: dict[str, Any] = {"status": result.status, "attempts": result.attempts}
    if result.status == "cancelled":
        return answer
    if result.status != "fixed" or result.code is None or result.outcome is None:
        answer["message"] = result.message
        server.window_show_message(
            lsp.ShowMessageParams(
                type=lsp.MessageType.Warning, message=f"runfix: not fixed: {result.message}"
            )
        )
        return answer
    doc = server.workspace.get_text_document(uri)
    if [strip_eol(x) for x in doc.lines[first : last + 1]] != [
        strip_eol(x) for x in lines[first : last + 1]
    ]:
        return _fail(
            server,
            "runfix: the code changed while it was being fixed; the fix was not applied.",
            attempts=result.attempts,
        )
    edit = replace_lines(doc.lines, first, last, result.code, server.width)
    if apply:
        if not await apply_edit(server, uri, doc.version, [edit], "runfix: fix"):
            return _fail(
                server, "runfix: the editor did not apply the fix.", attempts=result.attempts
            )
        await keep_candidate(server, uri, first, result.code, result.outcome)
    else:
        answer["edit"] = edit
        server.spawn(keep_candidate(server, uri, first, result.code, result.outcome), "results")
    return answer


async def keep_candidate(
    server: RunfixServer, uri: str, first: int, code: str, outcome: RunOutcome
) -> None:
    """Once the fix shows in the document, show what its run printed on its lines."""
    version = await _shown(server, uri, first, code)
    doc = server.workspace.text_documents.get(uri)
    if version is None or doc is None:
        return
    last = first + code.rstrip("\n").count("\n")
    path = server.path_of(uri)
    results = build(
        outcome,
        path=path,
        lines=doc.lines,
        fallback_line=first,
        folder=server.folder_for(uri),
        piece=(first, last),
    )
    server.store.clear(uri, first, last)
    keep(server, uri, version, results)
    mark_findings(server, uri, version, scan(code, first + 1))
    server.refresh_inlay_hints()


# -- install ----------------------------------------------------------------------------


async def install(
    server: RunfixServer,
    uri: str,
    packages: list[str],
    rerun: lsp.Range | None,
    cancel: asyncio.Event,
) -> dict[str, Any]:
    kernel = await server.kernel_for(server.folder_for(uri))
    shown = " ".join(packages)
    if (why := kernel.install_blocked()) is not None:
        return _fail(server, f"runfix: cannot install {shown}. {why}")
    try:
        async with Progress(server, cancel) as progress:
            progress.report(f"Installing {shown}")
            result = await kernel.install(
                packages,
                on_line=lambda line: progress.report(f"Installing {shown}: {line[-SHOWN_TEXT:]}"),
                cancel=cancel,
            )
    except ExecutorUnavailable as exc:
        return _fail(server, f"runfix: cannot install {shown}: {exc}")
    if result.cancelled:
        return {"status": "cancelled"}
    if not result.ok:
        tail = "\n".join(result.output.strip().splitlines()[-5:])
        return _fail(server, f"runfix: installing {shown} failed:\n{tail}", output=result.output)
    server.window_show_message(
        lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"runfix: installed {shown}.")
    )
    answer: dict[str, Any] = {"status": "ok"}
    if rerun is not None:
        with contextlib.suppress(Exception):
            await kernel.execute(
                RunRequest("import importlib\nimportlib.invalidate_caches()\n", "<runfix>", 1, 30)
            )
        answer["run"] = await run_document(server, uri, rerun, cancel)
    return answer
