"""LSP text edits that replace whole lines, correct at the end of a file without a newline.

`editor.apply_to_lines` is the same edit on a list of lines (no LSP)."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types as lsp

from lsp_server.text.positions import Width, strip_eol, utf16_len


def replace_lines(
    lines: Sequence[str], first: int, last: int, code: str, width: Width = utf16_len
) -> lsp.TextEdit:
    """Replace lines first..last (inclusive; last < first inserts before `first`) with `code`."""
    text = code if code.endswith("\n") else code + "\n"
    if first < len(lines):
        end = last + 1
        if end < len(lines):
            return lsp.TextEdit(lsp.Range(lsp.Position(first, 0), lsp.Position(end, 0)), text)
        tail = strip_eol(lines[-1])
        if lines[-1].endswith("\n"):
            end_pos = lsp.Position(len(lines), 0)
        else:  # the file ends without a newline: keep it that way
            end_pos = lsp.Position(len(lines) - 1, width(tail))
            text = text[:-1]
        return lsp.TextEdit(lsp.Range(lsp.Position(first, 0), end_pos), text)
    # inserting after the last line
    if lines and not lines[-1].endswith("\n"):
        at = lsp.Position(len(lines) - 1, width(strip_eol(lines[-1])))
        return lsp.TextEdit(lsp.Range(at, at), "\n" + text[:-1])
    at = lsp.Position(len(lines), 0)
    return lsp.TextEdit(lsp.Range(at, at), text)


def one_edit(
    uri: str, version: int | None, change: lsp.TextEdit, versioned: bool
) -> lsp.WorkspaceEdit:
    """A workspace edit of one document: versioned (`version`, None: the file itself) where
    the client checks versions, else by URI."""
    if versioned:
        identifier = lsp.OptionalVersionedTextDocumentIdentifier(uri, version)
        return lsp.WorkspaceEdit(
            document_changes=[lsp.TextDocumentEdit(text_document=identifier, edits=[change])]
        )
    return lsp.WorkspaceEdit(changes={uri: [change]})
