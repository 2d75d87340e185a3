"""Code lens "▶ Run cell" over each `# %%` marker (line 0 of a file without markers)."""

from __future__ import annotations

from lsprotocol import types as lsp

from lsp_server.cells import split_cells
from lsp_server.contract import Range
from lsp_server.features.code_actions import run_command
from lsp_server.server import RunfixServer

TITLE = "▶ Run cell"


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: RunfixServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        uri = params.text_document.uri
        lines = ls.workspace.get_text_document(uri).lines
        lenses = []
        markers = ls.session.cached_settings(ls.editor.folder_for(uri)).prompt_markers
        for cell in split_cells(lines, markers):
            if cell.code_first > cell.last and cell.has_marker:
                continue
            at = lsp.Range(lsp.Position(cell.first, 0), lsp.Position(cell.first, 0))
            command = run_command(TITLE, uri, Range.lines(cell.code_first, cell.last))
            lenses.append(lsp.CodeLens(range=at, command=command))
        return lenses
