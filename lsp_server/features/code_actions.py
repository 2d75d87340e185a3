"""Code actions: Run cell, Run selection (with a selection), Run file — all `runfix.run`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp

from lsp_server.cells import cell_at, split_cells
from lsp_server.features.commands import RUN
from lsp_server.server import RunfixServer

KIND = "runfix.run"  # a kind of our own: not a quick fix, not a refactoring


def _wanted(only: Sequence[str] | None) -> bool:
    return not only or any(k == KIND or KIND.startswith(f"{k}.") for k in map(str, only))


def lines_argument(first: int, last: int) -> dict[str, Any]:
    """An LSP range over whole lines first..last, as `runfix.run` reads it."""
    return {
        "start": {"line": first, "character": 0},
        "end": {"line": last + 1, "character": 0},
    }


def run_command(title: str, uri: str, rng: dict[str, Any] | None = None) -> lsp.Command:
    arg: dict[str, Any] = {"uri": uri}
    if rng is not None:
        arg["range"] = rng
    return lsp.Command(title=title, command=RUN, arguments=[arg])


def actions_for(uri: str, lines: Sequence[str], rng: lsp.Range) -> list[lsp.CodeAction]:
    def action(title: str, arg: dict[str, Any] | None) -> lsp.CodeAction:
        return lsp.CodeAction(title=title, kind=KIND, command=run_command(title, uri, arg))

    out = []
    cell = cell_at(split_cells(lines), rng.start.line)
    if cell is not None and cell.code_first <= cell.last:
        out.append(action("Run cell", lines_argument(cell.code_first, cell.last)))
    if rng.start != rng.end:
        selection = {
            "start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character},
        }
        out.append(action("Run selection", selection))
    out.append(action("Run file", None))
    return out


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[KIND]))
    def code_action(ls: RunfixServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        if not _wanted(params.context.only):
            return []
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return actions_for(params.text_document.uri, doc.lines, params.range)
