"""Completion and signature help from the folder's running kernel (`lsp_server/live.py`);
hover's kernel part is in `hover`.

Items are marked as the kernel's (`labelDetails`) and sorted after a static server's
names; nothing is offered where no kernel runs (never started, the folder untrusted,
`completion` off)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from executor.jupyter import Kernel
from lsp_server.live import (
    BUDGET,
    LiveCompletion,
    before_cursor,
    bound_names,
    completion,
    hover_text,
)
from lsp_server.lsp.prepared import Prepared
from lsp_server.lsp.server import RunfixServer
from lsp_server.text.languages import is_python

TRIGGERS = [".", "[", '"', "'"]
_KINDS = {
    "key": lsp.CompletionItemKind.Field,
    "column": lsp.CompletionItemKind.Field,
    "attribute": lsp.CompletionItemKind.Property,
    "name": lsp.CompletionItemKind.Variable,
}


def running_kernel(ls: RunfixServer, uri: str) -> Kernel | None:
    """The folder's kernel if it runs and `completion` is on; never starts one. Only for a
    Python document: what is asked (`_kernel_live`) is Python, and another language's
    kernel is not asked."""
    folder = ls.editor.folder_for(uri)
    language = ls.editor.language_of(uri)
    if not is_python(language):
        return None
    if not ls.flow.display_settings(folder).completion:
        return None
    kernel = ls.flow.kernel_of(folder)
    return kernel if kernel is not None and kernel.launched else None


@dataclass(frozen=True)
class _Typing:
    """Where the user types: the folder's running kernel, the document's lines, the cursor's
    column in code points and the line's text before it."""

    kernel: Kernel
    lines: Sequence[str]
    column: int
    before: str


def _typing(ls: RunfixServer, uri: str, position: lsp.Position) -> _Typing | None:
    """None: no kernel runs for the document, or the position is not in it."""
    kernel = running_kernel(ls, uri)
    if kernel is None or uri not in ls.workspace.text_documents:
        return None
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    if not 0 <= position.line < len(lines):
        return None
    column = doc.position_codec.position_from_client_units(lines, position).character
    return _Typing(kernel, lines, column, before_cursor(lines, position.line, column))


def _items(
    ls: RunfixServer,
    uri: str,
    line: int,
    lines: Sequence[str],
    done: LiveCompletion,
    column: int,
) -> list[dict[str, Any]]:
    """The completion items, as the JSON they go out as (a `Prepared` answer: fifty items
    built as lsprotocol's types and converted by cattrs took ~0.1 ms of every keystroke)."""
    doc = ls.workspace.get_text_document(uri)
    where = doc.position_codec.range_to_client_units(
        lines,
        lsp.Range(lsp.Position(line, done.start), lsp.Position(line, column)),
    )
    edited = {
        "start": {"line": where.start.line, "character": where.start.character},
        "end": {"line": where.end.line, "character": where.end.character},
    }
    # Names compete with a static server's: after them. Keys and columns are the kernel's own.
    rank = "~" if done.what == "name" else ""
    items = []
    for number, item in enumerate(done.items):
        said: dict[str, Any] = {
            "label": item.label,
            "kind": _KINDS.get(item.kind, lsp.CompletionItemKind.Value).value,
            "labelDetails": {"description": f"kernel · {item.detail}" if item.detail else "kernel"},
            "sortText": f"{rank}{number:04d}",
            "filterText": item.label,
            "textEdit": {"range": edited, "newText": item.label},
            "data": {"uri": uri, "expression": item.label, "what": done.what, "line": line},
        }
        if item.detail:
            said["detail"] = item.detail
        items.append(said)
    return items


def register(server: RunfixServer) -> None:
    options = lsp.CompletionOptions(trigger_characters=TRIGGERS, resolve_provider=True)

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION, options)
    async def on_completion(ls: RunfixServer, params: lsp.CompletionParams) -> Prepared | None:
        uri = params.text_document.uri
        if (at := _typing(ls, uri, params.position)) is None:
            return None
        data = {"before": at.before, "bound": []}
        answer = await at.kernel.ask_live("complete", data, BUDGET)
        if answer is None:
            return None
        done = completion(answer, at.before, bound_names(at.lines))
        if done is None:
            return Prepared.of({"isIncomplete": not answer.fresh, "items": []})
        items = _items(ls, uri, params.position.line, at.lines, done, at.column)
        return Prepared.of({"isIncomplete": done.incomplete, "items": items})

    @server.feature(lsp.COMPLETION_ITEM_RESOLVE)
    async def on_resolve(ls: RunfixServer, item: lsp.CompletionItem) -> lsp.CompletionItem:
        """Docs for a name: what `describe` tells of it (keys and attributes need none)."""
        data = item.data if isinstance(item.data, dict) else {}
        uri = data.get("uri")
        if data.get("what") != "name" or not isinstance(uri, str):
            return item
        kernel = running_kernel(ls, uri)
        if kernel is None:
            return item
        answer = await kernel.ask_live("describe", {"expression": item.label}, BUDGET)
        text = hover_text(answer.answer, "") if answer is not None else None
        if text:
            item.documentation = lsp.MarkupContent(lsp.MarkupKind.Markdown, text)
        return item

    help_options = lsp.SignatureHelpOptions(trigger_characters=["(", ","])

    @server.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP, help_options)
    async def on_signature_help(
        ls: RunfixServer, params: lsp.SignatureHelpParams
    ) -> lsp.SignatureHelp | None:
        if (at := _typing(ls, params.text_document.uri, params.position)) is None:
            return None
        answer = await at.kernel.ask_live("signature", {"before": at.before}, BUDGET)
        said = answer.answer if answer is not None else None
        if not isinstance(said, dict) or not said.get("label"):
            return None
        doc = str(said.get("doc") or "")
        signature = lsp.SignatureInformation(
            label=str(said["label"]),
            documentation=lsp.MarkupContent(lsp.MarkupKind.PlainText, doc) if doc else None,
            parameters=[lsp.ParameterInformation(label=str(p)) for p in said.get("parameters", [])],
        )
        return lsp.SignatureHelp(
            signatures=[signature], active_signature=0, active_parameter=int(said.get("active", 0))
        )
