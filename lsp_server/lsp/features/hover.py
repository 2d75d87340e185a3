"""Hover on a statement: its full output (and images); on an error: the traceback."""

from __future__ import annotations

from lsprotocol import types as lsp

from lsp_server.lsp.convert import hover
from lsp_server.lsp.server import RunfixServer


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: RunfixServer, params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        store = ls.session.store
        if not store.has(uri):
            return None
        doc = ls.workspace.get_text_document(uri)
        return hover(doc.lines, store.get(uri), params.position.line, ls.editor.features.width)
