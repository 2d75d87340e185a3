"""Documents whose lines are LSP's lines, computed once per text.

pygls splits a document with `str.splitlines`, which also breaks at form feed,
U+2028 and the like: every position after one would be off by a line, and
incremental edits would land on the wrong text. It also splits the whole text
again on every access to `lines`; here that happens once per change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pygls.workspace import TextDocument, Workspace

from executor.text import split_lines


class Document(TextDocument):
    _lines_of: str | None = None
    _lines: tuple[str, ...] = ()

    @property
    def lines(self) -> Sequence[str]:
        source = self.source
        if source is not self._lines_of:
            self._lines = tuple(split_lines(source))
            self._lines_of = source
        return self._lines


class DocumentWorkspace(Workspace):
    """pygls's workspace, making `Document`s."""

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
