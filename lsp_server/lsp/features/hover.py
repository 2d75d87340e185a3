"""Hover on a statement: its full output (and images); on an error: the traceback. On a name
the running kernel holds: its type, shape, columns, a preview, the run it comes from
(`lsp_server/live.py`), whether that line ran or not."""

from __future__ import annotations

import functools

from lsprotocol import types as lsp

from lsp_server.live import BUDGET, expression_at, hover_text, origin
from lsp_server.lsp.convert import hover
from lsp_server.lsp.features.live import running_kernel
from lsp_server.lsp.server import RunfixServer


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: RunfixServer, params: lsp.HoverParams) -> lsp.Hover | None:
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        line = params.position.line
        ran = (
            hover(doc.lines, ls.flow.results(uri), line, ls.editor.features.width)
            if ls.flow.shows(uri)
            else None
        )
        kernel = running_kernel(ls, uri)
        if kernel is None or not 0 <= line < len(doc.lines):
            return ran
        column = doc.position_codec.position_from_client_units(doc.lines, params.position)
        expression = expression_at(doc.lines[line], column.character)
        if expression is None:
            return ran
        answer = await kernel.ask_live("describe", {"expression": expression}, BUDGET)
        text = (
            hover_text(
                answer.answer,
                origin(functools.partial(ls.flow.edited_above, uri), doc.lines, line, expression),
            )
            if answer is not None
            else None
        )
        if text is None:
            return ran
        if ran is not None and isinstance(ran.contents, lsp.MarkupContent):
            # The line's own output first (what it showed), then what the name holds now.
            text = f"{ran.contents.value}\n\n---\n\n{text}"
        return lsp.Hover(
            contents=lsp.MarkupContent(lsp.MarkupKind.Markdown, text),
            range=ran.range if ran is not None else None,
        )
