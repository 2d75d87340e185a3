"""Inlay hints: a one-line summary at the end of each statement that produced something."""

from __future__ import annotations

from lsprotocol import types as lsp

from lsp_server.convert import inlay_hints
from lsp_server.server import RunfixServer


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=False))
    def inlay_hint(ls: RunfixServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        uri = params.text_document.uri
        store, features = ls.session.store, ls.editor.features
        setting = ls.session.cached_settings(ls.editor.folder_for(uri)).results
        if features.results_mode(setting) == "diagnostics" or not store.has(uri):
            return []
        doc = ls.workspace.get_text_document(uri)
        return inlay_hints(doc.lines, store.get(uri), params.range, features.width)
