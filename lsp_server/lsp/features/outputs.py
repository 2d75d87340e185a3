"""`runfix.outputs` (what an editor's output view shows: the VS Code panel, Neovim's
float) and `runfix.showOutput` (the same as a local page).

Any client can open it (`window/showDocument`, external): eglot, Helix and Zed
users see plots and tables this way; the answer carries the address for a
client that opens it itself. The page (`page.OutputPage`) serves from a thread
of its own; what it shows is read on the server's loop, never from that thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types as lsp

from lsp_server.contract import OUTPUTS, SHOW_OUTPUT, RunArgs, ShowOutputAnswer, to_json
from lsp_server.lsp.features.commands import argument
from lsp_server.lsp.server import RunfixServer
from lsp_server.outputs.bundles import Output
from lsp_server.outputs.page import OutputPage
from lsp_server.outputs.results import StatementResult
from lsp_server.outputs.view import answer, outputs_of, statements_at
from lsp_server.record.notebooks import latest_cell
from lsp_server.text.cells import cell_at, code_of, split_cells

log = logging.getLogger(__name__)

SHOW_TIMEOUT = 10.0
"""Seconds to wait for the client to say it opened the page."""


def _found(ls: RunfixServer, uri: str, line: int) -> tuple[int, int, list[StatementResult]] | None:
    doc = ls.workspace.text_documents.get(uri)
    lines = doc.lines if doc is not None else []
    return statements_at(ls.flow.results(uri), lines, line)


def _outputs_at(ls: RunfixServer, uri: str, line: int) -> tuple[Path, list[Output]] | None:
    found = _found(ls, uri, line)
    if found is None:
        return None
    return ls.editor.folder_for(uri), outputs_of(found[2])


def _folders(ls: RunfixServer) -> list[Path]:
    known = {k.folder for k in ls.flow.kernels()}
    known |= {ls.editor.folder_for(f.uri) for f in ls.workspace.folders.values()}
    return sorted(known)


def page_of(ls: RunfixServer) -> OutputPage:
    """The server's page, made on first use; it reads results on this loop."""
    if ls.page is None:
        loop = asyncio.get_running_loop()

        def on_loop(read: Any) -> Any:
            async def now() -> Any:
                return read()

            return asyncio.run_coroutine_threadsafe(now(), loop).result(timeout=5)

        def view(uri: str, line: int) -> tuple[Path, list[Output]] | None:
            return on_loop(lambda: _outputs_at(ls, uri, line))  # type: ignore[no-any-return]

        def folders() -> Sequence[Path]:
            return on_loop(lambda: _folders(ls))  # type: ignore[no-any-return]

        ls.page = OutputPage(view, folders)
    return ls.page


def register(server: RunfixServer) -> None:
    @server.command(OUTPUTS)
    async def outputs(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, OUTPUTS, args, RunArgs)
        where = arg.position or (arg.range.start if arg.range else None)
        line = where.line if where else 0
        folder = ls.editor.folder_for(arg.uri)
        said = answer(arg.uri, folder, _found(ls, arg.uri, line))
        if arg.uri in ls.editor.notebooks.open:  # what Jupyter saves in the cell, as is
            lines = ls.workspace.get_text_document(arg.uri).lines
            cell = cell_at(split_cells(lines), max(line, 0))
            code = code_of(lines, cell.code_first, cell.last) if cell is not None else None
            path = ls.editor.path_of(arg.uri)
            kept = await asyncio.to_thread(latest_cell, folder, path, code) if code else None
            said = attrs.evolve(said, cell=kept)
        return to_json(said)

    @server.command(SHOW_OUTPUT)
    async def show_output(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, SHOW_OUTPUT, args, RunArgs)
        where = arg.position or (arg.range.start if arg.range else None)
        url = page_of(ls).url_for(arg.uri, where.line if where else 0)
        shown = False
        if ls.editor.features.show_document:
            try:
                answer = await asyncio.wait_for(
                    ls.window_show_document_async(lsp.ShowDocumentParams(uri=url, external=True)),
                    SHOW_TIMEOUT,
                )
                shown = bool(answer and answer.success)
            except Exception as exc:  # the address is in the answer either way
                log.warning("the client did not open the output page: %s", exc)
        return to_json(ShowOutputAnswer(url, shown))
