"""What the client says of a notebook's cell, said of the notebook's document, and back.

A request about a cell (a hint, a lens, a code action, a hover, a completion, a command
on a cell's range) is asked of the notebook's document at the cell's place in it
(`to_notebook`); its answer is said on the cell again, keeping only what is on that cell
(`to_cell`). Edits of the notebook's document become edits of the cells they change
(`cell_edit`); its diagnostics are published on the cells that hold them
(`cell_diagnostics`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types as lsp

from lsp_server.lsp.notebooks import Notebooks
from lsp_server.lsp.prepared import Prepared
from lsp_server.text.notebooks import Notebook
from lsp_server.text.positions import strip_eol

Width = Callable[[str], int]

ASKED_OF_A_CELL = (
    lsp.TEXT_DOCUMENT_INLAY_HINT,
    lsp.TEXT_DOCUMENT_CODE_LENS,
    lsp.TEXT_DOCUMENT_CODE_ACTION,
    lsp.TEXT_DOCUMENT_HOVER,
    lsp.TEXT_DOCUMENT_COMPLETION,
    lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
)
"""The requests about a document that a cell's URI may name."""


@dataclass(frozen=True)
class Asked:
    """A request about a cell, asked of its notebook's document: how to say its answer on
    the cell."""

    method: str
    notebook: Notebook
    cell: str
    start: int
    """The document's line of the cell's first line."""

    @property
    def size(self) -> int:
        return self.notebook.size(self.cell) if self.cell in self.notebook else 0


def _down(position: lsp.Position, start: int) -> lsp.Position:
    return lsp.Position(position.line + start, position.character)


def _range_down(r: lsp.Range, start: int) -> lsp.Range:
    return lsp.Range(_down(r.start, start), _down(r.end, start))


def to_notebook(notebooks: Notebooks, method: str, params: Any) -> Asked | None:
    """Rewrite, in place, the params of a request that names a code cell so that they name
    its notebook's document at the cell's lines; how to say the answer on the cell (None:
    not about a cell)."""
    if method == lsp.WORKSPACE_EXECUTE_COMMAND:
        return _command_to_notebook(notebooks, params)
    if method not in ASKED_OF_A_CELL:
        return None
    document = getattr(params, "text_document", None)
    cell = getattr(document, "uri", None)
    if document is None or not isinstance(cell, str):
        return None
    notebook = notebooks.of_cell(cell)
    if notebook is None or cell not in notebook:
        return None
    start = notebook.start(cell)
    document.uri = notebook.uri
    if (position := getattr(params, "position", None)) is not None:
        params.position = _down(position, start)
    if (r := getattr(params, "range", None)) is not None:
        params.range = _range_down(r, start)
    context = getattr(params, "context", None)
    for diagnostic in getattr(context, "diagnostics", None) or ():
        diagnostic.range = _range_down(diagnostic.range, start)
    return Asked(method, notebook, cell, start)


def _command_to_notebook(notebooks: Notebooks, params: Any) -> Asked | None:
    """A command's argument that names a cell (`{"uri", "range"|"position"}`): the
    notebook's document and its lines."""
    arguments = getattr(params, "arguments", None) or ()
    arg = arguments[0] if arguments else None
    if not isinstance(arg, dict) or not isinstance(arg.get("uri"), str):
        return None
    cell = arg["uri"]
    notebook = notebooks.of_cell(cell)
    if notebook is None or cell not in notebook:
        return None
    start = notebook.start(cell)
    arg["uri"] = notebook.uri
    for key in ("range",):
        r = arg.get(key)
        if isinstance(r, dict):
            for end in ("start", "end"):
                if isinstance(r.get(end), dict) and isinstance(r[end].get("line"), int):
                    r[end]["line"] += start
    position = arg.get("position")
    if isinstance(position, dict) and isinstance(position.get("line"), int):
        position["line"] += start
    return Asked(lsp.WORKSPACE_EXECUTE_COMMAND, notebook, cell, start)


# -- answers ---------------------------------------------------------------------------------


def _up(asked: Asked, position: lsp.Position) -> lsp.Position | None:
    """The cell's position of a document's position on the cell (None: elsewhere)."""
    line = position.line - asked.start
    if line < 0 or line >= asked.size:
        return None
    return lsp.Position(line, position.character)


def _range_up(asked: Asked, r: lsp.Range) -> lsp.Range | None:
    """The cell's range of a document's range that starts on the cell (its marker line
    counts as its first line), its end kept within the cell."""
    start = _up(asked, r.start) or (lsp.Position(0, 0) if r.start.line == asked.start - 1 else None)
    if start is None:
        return None
    end = _up(asked, r.end) or lsp.Position(max(asked.size - 1, start.line), 1 << 16)
    return lsp.Range(start, end)


def _hover(asked: Asked, result: Any) -> Any:
    if result.range is not None:
        result.range = _range_up(asked, result.range)
    return result


def _json_range_up(asked: Asked, at: dict[str, Any]) -> dict[str, Any] | None:
    """`_range_up` of a range as JSON."""
    r = lsp.Range(
        lsp.Position(at["start"]["line"], at["start"]["character"]),
        lsp.Position(at["end"]["line"], at["end"]["character"]),
    )
    if (up := _range_up(asked, r)) is None:
        return None
    return {
        "start": {"line": up.start.line, "character": up.start.character},
        "end": {"line": up.end.line, "character": up.end.character},
    }


def _completion_json(asked: Asked, answer: dict[str, Any]) -> dict[str, Any]:
    """A completion list as JSON (a `Prepared` answer: the only form runfix answers it
    in), its edits on the cell's lines."""
    for item in answer.get("items", ()):
        edit = item.get("textEdit")
        if isinstance(edit, dict) and "range" in edit:
            edit["range"] = _json_range_up(asked, edit["range"]) or edit["range"]
    return answer


_ANSWERS: dict[str, Callable[[Asked, Any], Any]] = {lsp.TEXT_DOCUMENT_HOVER: _hover}


def _json_on_cell(asked: Asked, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hints or lenses as JSON (a `Prepared` answer: the only form runfix answers them in,
    besides an empty list): those on the cell, at its lines."""
    out = []
    for item in items:
        if "position" in item:
            line = item["position"]["line"] - asked.start
            if 0 <= line < asked.size:
                out.append({**item, "position": {**item["position"], "line": line}})
            continue
        if (up := _json_range_up(asked, item["range"])) is not None:
            out.append({**item, "range": up})
    return out


def to_cell(
    asked: Asked, result: Any, edit: Callable[[lsp.WorkspaceEdit], lsp.WorkspaceEdit | None]
) -> Any:
    """The answer to a request asked of the notebook's document, said on the cell: what is
    on other cells left out, positions the cell's, edits the cells'. A command's answer is
    the contract's, about the notebook: as it is."""
    if result is None or asked.method == lsp.WORKSPACE_EXECUTE_COMMAND:
        return result
    if isinstance(result, Prepared) and asked.method == lsp.TEXT_DOCUMENT_COMPLETION:
        return Prepared.of(_completion_json(asked, json.loads(result.text)))
    if isinstance(result, Prepared):  # hints and lenses, as JSON text
        return Prepared.of(_json_on_cell(asked, json.loads(result.text)))
    if asked.method == lsp.TEXT_DOCUMENT_CODE_ACTION:
        for action in result:
            if isinstance(action, lsp.CodeAction):
                on_cell = [d for d in action.diagnostics or () if _on_cell(asked, d)]
                action.diagnostics = on_cell or None
                if action.edit is not None:
                    action.edit = edit(action.edit)
        return result
    answer = _ANSWERS.get(asked.method)
    return answer(asked, result) if answer is not None else result


def _on_cell(asked: Asked, diagnostic: lsp.Diagnostic) -> bool:
    r = _range_up(asked, diagnostic.range)
    if r is None:
        return False
    diagnostic.range = r
    return True


# -- edits and diagnostics -----------------------------------------------------------------


def cell_text_edit(
    notebook: Notebook, cell_lines: Callable[[str], Sequence[str]], edit: lsp.TextEdit, width: Width
) -> tuple[str, lsp.TextEdit] | None:
    """An edit of the notebook's document as an edit of the cell it changes (None: it
    reaches across cells, or onto a marker line)."""
    start, end = edit.range.start, edit.range.end
    place = notebook.at(start.line)
    if place is None and start == end and start.character == 0:
        return _inserted_between(notebook, cell_lines, start.line, edit.new_text, width)
    if place is None:
        return None
    cell, first = place.cell, notebook.start(place.cell)
    size = notebook.size(cell)
    text = edit.new_text
    if end.line == first + size and end.character == 0:
        # to the end of the cell's last line (its newline is the document's, not the cell's)
        end_at = lsp.Position(size - 1, width(_last_line(cell_lines(cell))))
        if text.endswith("\n"):
            text = text[:-1]
        elif start.line - first < size - 1 or start.character < end_at.character:
            return None  # it would join the cell with the next one
    else:
        if not first <= end.line < first + size:
            return None
        end_at = lsp.Position(end.line - first, end.character)
    start_at = lsp.Position(start.line - first, start.character)
    return cell, lsp.TextEdit(lsp.Range(start_at, end_at), text)


def _inserted_between(
    notebook: Notebook,
    cell_lines: Callable[[str], Sequence[str]],
    line: int,
    text: str,
    width: Width,
) -> tuple[str, lsp.TextEdit] | None:
    """Lines inserted at a marker line or at the document's end: as the document's text has
    them, the end of the cell above (a one-line prompt cell's generated body, an import
    after a cell of imports); the top of the first cell when there is none above."""
    above = notebook.at(line - 1) if line > 0 else None
    if above is not None and not text.endswith("\n"):
        return None  # it would join the marker's line
    if above is None:
        below = notebook.below(line)
        if below is None or line != notebook.start(below.cell) - 1:
            return None
        return below.cell, lsp.TextEdit(lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), text)
    at = lsp.Position(above.line, width(_last_line(cell_lines(above.cell))))
    return above.cell, lsp.TextEdit(lsp.Range(at, at), "\n" + text[:-1])


def _last_line(lines: Sequence[str]) -> str:
    """A cell's last line as its editor shows it (empty after a final newline)."""
    if not lines or lines[-1] != strip_eol(lines[-1]):
        return ""
    return lines[-1]


def cell_diagnostics(
    notebook: Notebook, items: Sequence[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """Diagnostics of the notebook's document (JSON), by the cell that holds each, at the
    cell's lines; every code cell has its list (empty ones clear what the cell showed)."""
    out: dict[str, list[dict[str, Any]]] = {cell: [] for cell in notebook.cells}
    for item in items:
        r = item["range"]
        place = notebook.below(r["start"]["line"])
        if place is None:
            continue
        first = notebook.start(place.cell)
        size = notebook.size(place.cell)
        end_line = r["end"]["line"] - first
        end = (
            {"line": end_line, "character": r["end"]["character"]}
            if place.line <= end_line < size
            else {"line": max(size - 1, place.line), "character": 1 << 16}
        )
        start = {"line": place.line, "character": r["start"]["character"]}
        if notebook.at(r["start"]["line"]) is None:
            start = {"line": place.line, "character": 0}  # from the marker: the cell's first line
        on_cell = {**item, "range": {"start": start, "end": end}}
        if item.get("relatedInformation"):
            on_cell["relatedInformation"] = [
                _related(notebook, r) for r in item["relatedInformation"]
            ]
        out[place.cell].append(on_cell)
    return out


def cell_outputs(
    notebook: Notebook, firsts: Sequence[int], rich: Sequence[int]
) -> dict[str, list[int]]:
    """New results at the notebook document's lines `firsts` (`rich`: those that showed more
    than text), by the cell that holds each: its rich ones at the cell's own lines."""
    out: dict[str, list[int]] = {}
    for line in firsts:
        place = notebook.at(line)
        if place is not None:
            out.setdefault(place.cell, []).extend([place.line] if line in rich else [])
    return out


def _related(notebook: Notebook, related: dict[str, Any]) -> dict[str, Any]:
    """A diagnostic's related place: on its cell where it is in the notebook's document."""
    location = related.get("location") or {}
    if location.get("uri") != notebook.uri:
        return related
    place = notebook.below(location["range"]["start"]["line"])
    if place is None:
        return related
    line = {"line": place.line, "character": 0}
    moved = {"uri": place.cell, "range": {"start": line, "end": {**line, "character": 1 << 16}}}
    return {**related, "location": moved}


def cell_workspace_edit(
    notebooks: Notebooks,
    documents: Mapping[str, Any],
    edit: lsp.WorkspaceEdit,
    width: Width,
    versioned: bool,
) -> lsp.WorkspaceEdit | None:
    """A workspace edit with each edit of a notebook's document made an edit of the cell it
    changes (`versioned`: with the cell's version, where the client checks it); None when
    one reaches across cells (the notebook's file itself is never edited as text)."""
    if edit.document_changes or not any(u in notebooks.open for u in edit.changes or {}):
        return edit

    def lines_of(uri: str) -> Sequence[str]:
        doc = documents.get(uri)
        return doc.lines if doc is not None else ()

    changes: dict[str, list[lsp.TextEdit]] = {}
    for uri, edits in (edit.changes or {}).items():
        notebook = notebooks.open.get(uri)
        if notebook is None:
            changes.setdefault(uri, []).extend(edits)
            continue
        for text_edit in edits:
            on_cell = cell_text_edit(notebook, lines_of, text_edit, width)
            if on_cell is None:
                return None
            changes.setdefault(on_cell[0], []).append(on_cell[1])
    if not versioned:
        return lsp.WorkspaceEdit(changes=changes)
    made: list[Any] = []
    for uri, edits in changes.items():
        doc = documents.get(uri)
        identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri, doc.version if doc else None)
        made.append(lsp.TextDocumentEdit(text_document=identifier, edits=edits))
    return lsp.WorkspaceEdit(document_changes=made)
