"""Documents whose lines are LSP's lines, computed once per text.

pygls splits a document with `str.splitlines`, which also breaks at form feed,
U+2028 and the like: every position after one would be off by a line, and
incremental edits would land on the wrong text. It also splits the whole text
again on every access to `lines`, and applies an incremental change by walking
every line; here a change re-splits only the lines it touched. A document the editor
has not opened is read from disk as pygls does, but only a regular file, bounded, never
waiting on a FIFO; one missing or unreadable is empty (a request about it answers
nothing rather than an internal error).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol.types import TextDocumentContentChangePartial
from pygls.workspace import TextDocument, Workspace

from executor.text import split_lines
from lsp_server.folder_files import read_regular

UNOPENED_LIMIT = 8 * 1024 * 1024
"""Bytes read of a document the editor has not opened."""


class Document(TextDocument):
    """A pygls document whose lines end only where Python's and LSP's do."""

    _lines_of: str | None = None
    _lines: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        if self._source is None and self.path is not None:  # not opened: the file on disk
            try:
                data = read_regular(Path(os.path.realpath(self.path)), UNOPENED_LIMIT)
                return data.decode("utf-8", errors="replace")
            except (OSError, ValueError):
                return ""
        return self._source or ""

    @property
    def lines(self) -> Sequence[str]:
        source = self.source
        if source is not self._lines_of:
            self._lines = tuple(split_lines(source))
            self._lines_of = source
        return self._lines

    def _apply_incremental_change(self, change: TextDocumentContentChangePartial) -> None:
        """Replace the range's text, re-splitting only the lines it touched: from the start
        of the first to the end of the last, line ending included."""
        lines = self.lines
        where = self._position_codec.range_from_client_units(lines, change.range)
        first = min(where.start.line, len(lines))
        last = min(where.end.line, len(lines) - 1)
        head = lines[first][: where.start.character] if first < len(lines) else ""
        tail = lines[last][where.end.character :] if where.end.line < len(lines) else ""
        piece = head + change.text + tail
        new = (*lines[:first], *split_lines(piece), *lines[last + 1 :])
        above = lines[first - 1] if 0 < first <= len(lines) else ""
        below = lines[last + 1] if last + 1 < len(lines) else ""
        if (above.endswith("\r") and piece.startswith("\n")) or (
            piece.endswith("\r") and below.startswith("\n")
        ):
            new = tuple(split_lines("".join(new)))  # a lone CR and an LF meet: one line break
        source = "".join(new)
        self._source = source
        self._lines, self._lines_of = new, source


class DocumentWorkspace(Workspace):
    """pygls's workspace, making `Document`s, keyed by their URIs as runfix has them (the
    canonical form, `uris`; pygls keys them decoded, which no client sends)."""

    def put_text_document(self, text_document: Any, notebook_uri: str | None = None) -> None:
        self._text_documents[text_document.uri] = self._create_text_document(
            text_document.uri,
            source=text_document.text,
            version=text_document.version,
            language_id=text_document.language_id,
        )

    def remove_text_document(self, doc_uri: str) -> None:
        self._text_documents.pop(doc_uri, None)

    def update_text_document(self, text_doc: Any, change: Any) -> None:
        document = self._text_documents[text_doc.uri]
        document.apply_change(change)
        document.version = text_doc.version

    def get_text_document(self, doc_uri: str) -> TextDocument:
        return self._text_documents.get(doc_uri) or self._create_text_document(doc_uri)

    def _create_text_document(
        self,
        doc_uri: str,
        source: str | None = None,
        version: int | None = None,
        language_id: str | None = None,
    ) -> TextDocument:
        return Document(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self.position_codec,
        )

    @classmethod
    def like(cls, workspace: Any) -> DocumentWorkspace:
        """A workspace with the same root, folders and encoding (made at `initialize`)."""
        return cls(
            workspace.root_uri,
            workspace._sync_kind,
            list(workspace.folders.values()),
            workspace.position_encoding,
        )
