"""Notebooks open, change and close (`notebookDocument/*`): each is one runfix document of its
code cells in order (`lsp.notebooks`), kept in step with the cells' edits and the
notebook's structure (cells inserted, deleted, moved), so results stay on their cells."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from lsprotocol import types as lsp

from lsp_server.lsp.features.documents import opened
from lsp_server.lsp.notebooks import Carry
from lsp_server.lsp.server import RunfixServer
from lsp_server.outputs.results import DocumentResults, Problem, StatementResult, source_lines
from lsp_server.outputs.store import LineChange, line_change, line_through
from lsp_server.text.notebooks import Notebook, cell_lines

log = logging.getLogger(__name__)


def _is_code(cell: lsp.NotebookCell) -> bool:
    return cell.kind == lsp.NotebookCellKind.Code


def _replace(
    ls: RunfixServer, uri: str, version: int, begin: int, end: int, text: str,
    moves: tuple[tuple[int, int, int], ...] = (),
) -> LineChange:  # fmt: skip
    """Replace lines begin..end-1 of the notebook's document with `text` (whole lines);
    `moves`: blocks of those lines that stand elsewhere in `text` (cells moved)."""
    edit = lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(begin, 0), lsp.Position(end, 0)), text=text
    )
    identifier = lsp.VersionedTextDocumentIdentifier(version=version, uri=uri)
    ls.workspace.update_text_document(identifier, edit)
    return line_change(begin, end, text, end > begin, 0, moves)


def _took(ls: RunfixServer, uri: str, first: int, last: int, carry: Carry) -> None:
    """Lines first..last are about to go: what they show is kept in `carry`."""
    shown = ls.flow.shown_on(uri, first, last)
    if shown.statements or shown.problems:
        carry.taken.append(shown)


def _placed(
    taken: DocumentResults, put: tuple[int, int], lines: Sequence[str]
) -> DocumentResults | None:
    """`taken` where its text stands, exactly, within the lines `put` (first, last)."""
    items: list[StatementResult | Problem] = [*taken.statements, *taken.problems]
    height = max(item.last for item in items)
    for to in range(put[0], put[1] - height + 1):
        if all(source_lines(lines, to + i.first, to + i.last) == i.source for i in items):
            return taken.lines(0, height, to)
    return None


def _carry(
    ls: RunfixServer, uri: str, version: int, carry: Carry, changes: list[LineChange]
) -> None:
    """What the last change and this one took away shows again where the other put its text."""
    doc = ls.workspace.text_documents.get(uri)
    before = ls.editor.notebooks.last.get(uri)
    ls.editor.notebooks.last[uri] = carry
    if before is None or doc is None:
        return
    earlier = [(line_through(a, changes), line_through(b, changes)) for a, b in before.put]
    pairs = [(t, p) for t in before.taken for p in carry.put]
    pairs += [(t, p) for t in carry.taken for p in earlier]
    for taken, put in pairs:
        placed = _placed(taken, put, doc.lines)
        if placed is not None:
            ls.flow.carried(uri, version, placed)


def _structure(
    ls: RunfixServer, notebook: Notebook, version: int, change: lsp.NotebookCellArrayChange,
    opened_now: Sequence[lsp.TextDocumentItem], carry: Carry,
) -> LineChange | None:  # fmt: skip
    """Cells inserted, deleted or moved: the lines of the code cells that went are replaced by
    those of the code cells that came (a moved cell's text is its document's). A cell among
    both (moved, or in the span a move sends) is said to have moved, so what it shows
    (and what a run still under way will show on it) follows it."""
    texts = {item.uri: item.text for item in opened_now}
    came, was = [], {}
    for cell in change.cells or ():
        if cell.document not in texts:
            doc = ls.workspace.text_documents.get(cell.document)
            texts[cell.document] = doc.source if doc is not None else ""
            if cell.document in notebook:  # a cell that was there: it moved
                first = notebook.start(cell.document)
                was[cell.document] = (first, first + notebook.size(cell.document) - 1)
        came.append((cell.document, _is_code(cell), texts[cell.document]))
    staying = {cell for cell, _, _ in came}
    for old, code in notebook.all[change.start : change.start + change.delete_count]:
        if code and old not in staying:  # deleted
            first = notebook.start(old)
            _took(ls, notebook.uri, first, first + notebook.size(old) - 1, carry)
    (begin, end), text = notebook.restructure(change.start, change.delete_count, came)
    ls.editor.notebooks.reindex(notebook)
    for item in opened_now:
        if item.uri in notebook:
            first = notebook.start(item.uri)
            carry.put.append((first, first + notebook.size(item.uri) - 1))
    if begin == end and not text:
        return None
    moves = tuple((a, b, notebook.start(cell)) for cell, (a, b) in was.items() if cell in notebook)
    return _replace(ls, notebook.uri, version, begin, end, text, moves)


def _text(
    ls: RunfixServer, notebook: Notebook, version: int, cell: str,
    change: lsp.TextDocumentContentChangeEvent, carry: Carry,
) -> LineChange | None:  # fmt: skip
    """A cell's text changed: the same change of the notebook's document, at the cell's place."""
    if cell not in notebook:
        return None  # a markdown cell: not in the document
    start, size = notebook.start(cell), notebook.size(cell)
    doc_uri = notebook.uri
    if isinstance(change, lsp.TextDocumentContentChangePartial):
        r = change.range
        moved = lsp.Range(
            lsp.Position(r.start.line + start, r.start.character),
            lsp.Position(r.end.line + start, r.end.character),
        )
        deleted = (r.start.line, r.start.character) != (r.end.line, r.end.character)
        if deleted:
            _took(ls, doc_uri, moved.start.line, moved.end.line, carry)
        edit = lsp.TextDocumentContentChangePartial(range=moved, text=change.text)
        identifier = lsp.VersionedTextDocumentIdentifier(version=version, uri=doc_uri)
        ls.workspace.update_text_document(identifier, edit)
        notebook.resized(cell, size + change.text.count("\n") - (r.end.line - r.start.line))
        if change.text:
            carry.put.append((moved.start.line, moved.start.line + change.text.count("\n")))
        column = r.start.character if r.start.line == r.end.line else -1
        return line_change(moved.start.line, moved.end.line, change.text, deleted, column)
    _took(ls, doc_uri, start, start + size - 1, carry)
    notebook.resized(cell, cell_lines(change.text))
    carry.put.append((start, start + cell_lines(change.text) - 1))
    return _replace(ls, doc_uri, version, start, start + size, change.text + "\n")


def register(server: RunfixServer) -> None:
    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN)
    def did_open(ls: RunfixServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        notebook_doc = params.notebook_document
        documents = {item.uri: item for item in params.cell_text_documents}
        cells = [
            (c.document, _is_code(c), documents[c.document].text if c.document in documents else "")
            for c in notebook_doc.cells
        ]
        language = next(
            (documents[c].language_id for c, code, _ in cells if code and c in documents),
            "python",
        )
        notebook = Notebook(notebook_doc.uri, cells)
        ls.editor.notebooks.add(notebook)
        text = Notebook.text_of([text for _, code, text in cells if code])
        item = lsp.TextDocumentItem(notebook.uri, language, notebook_doc.version, text)
        ls.workspace.put_text_document(item)
        opened(ls, notebook.uri)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def did_change(ls: RunfixServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        uri, version = params.notebook_document.uri, params.notebook_document.version
        notebook = ls.editor.notebooks.open.get(uri)
        cells = params.change.cells
        if notebook is None or cells is None:
            return
        changes: list[LineChange] = []
        carry = Carry()
        if cells.structure is not None:
            opened_now = cells.structure.did_open or ()
            made = _structure(ls, notebook, version, cells.structure.array, opened_now, carry)
            changes += [made] if made is not None else []
        for text in cells.text_content or ():
            for change in text.changes:
                made = _text(ls, notebook, version, text.document.uri, change, carry)
                changes += [made] if made is not None else []
        doc = ls.workspace.text_documents.get(uri)
        if changes and doc is not None:
            doc.version = version
            ls.flow.edited(uri, version, changes, doc.lines)
            _carry(ls, uri, version, carry, changes)

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def did_close(ls: RunfixServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        ls.flow.closed(uri)
        ls.editor.closed(uri)
        ls.workspace.remove_text_document(uri)
