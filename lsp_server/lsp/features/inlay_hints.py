"""Inlay hints: a one-line summary at the end of each statement that produced something.

The hints of a document are made once per text and results (`prepared.Memo`);
a request gets those in its range. A client that resolves tooltips lazily gets
each statement's whole output only for the hint it shows one for."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from lsp_server.lsp.convert import inlay_hints, tooltip_at
from lsp_server.lsp.prepared import ByLine, Memo, Prepared
from lsp_server.lsp.server import RunfixServer


def register(server: RunfixServer) -> None:
    made: Memo[ByLine] = Memo()

    @server.feature(lsp.TEXT_DOCUMENT_INLAY_HINT, lsp.InlayHintOptions(resolve_provider=True))
    def inlay_hint(ls: RunfixServer, params: lsp.InlayHintParams) -> list[Any] | Prepared:
        uri = params.text_document.uri
        features = ls.editor.features
        setting = ls.flow.display_settings(ls.editor.folder_for(uri)).results
        if features.results_mode(setting) == "diagnostics" or not ls.flow.shows(uri):
            return []
        lines = ls.workspace.get_text_document(uri).lines
        results = ls.flow.results(uri)
        lazy = uri if features.inlay_resolve_tooltip else None
        hints = made.get(
            uri,
            (lines, results.statements, results.fronts, features.width, lazy),
            lambda: ByLine.of(inlay_hints(lines, results, features.width, resolve_uri=lazy)),
        )
        return hints.between(params.range.start.line, params.range.end.line)

    @server.feature(lsp.INLAY_HINT_RESOLVE)
    def inlay_hint_resolve(ls: RunfixServer, hint: lsp.InlayHint) -> lsp.InlayHint:
        data = hint.data if isinstance(hint.data, dict) else {}
        uri, line = data.get("uri"), data.get("line")
        if hint.tooltip is None and isinstance(uri, str) and isinstance(line, int):
            tooltip = tooltip_at(ls.flow.results(uri), line)
            if tooltip is not None:
                hint.tooltip = lsp.MarkupContent(lsp.MarkupKind.Markdown, tooltip["value"])
        return hint
