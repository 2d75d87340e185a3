"""Open, change, close: kernels start ahead of the first run; results follow edits.

Only in a folder whose code may run: opening a file of an undecided folder starts
nothing (its first run asks)."""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from executor.base import ExecutorUnavailable
from lsp_server.lsp.server import RunfixServer
from lsp_server.outputs.store import line_change
from lsp_server.text.languages import is_python

log = logging.getLogger(__name__)


async def _start_kernel(ls: RunfixServer, uri: str) -> None:
    """The document's kernel starts as it opens (its language's: a document runfix does not
    know starts none, nor one of an untrusted folder). Python's that cannot start says why
    on the first line at once; another language's says so when the user runs it (a folder
    of Python with a few scripts in another language is not told about them on every open)."""
    where = await ls.flow.where(uri)
    language = where.language
    if language is None:
        return
    try:
        kernel = await ls.flow.open_kernel(where)
        if kernel is None:
            log.info("%s is not trusted: no kernel starts until a run asks", where.folder)
            return
        await kernel.start()
    except ExecutorUnavailable as exc:
        if not language.python:
            log.info("no kernel for %s starts at open: %s", uri, exc)
            return
        ls.flow.explain_unavailable(uri, str(exc))


async def _restore(ls: RunfixServer, uri: str) -> None:
    await ls.flow.restore(await ls.flow.where(uri))


def opened(ls: RunfixServer, uri: str) -> None:
    """A document (or a notebook's) opened: its kernel starts, its results come back."""
    if not is_python(ls.editor.language_of(uri)):
        ls.flow.not_python(uri)
    ls.editor.spawn(_start_kernel(ls, uri), "starting the kernel")
    ls.editor.spawn(_restore(ls, uri), "restoring results")


def register(server: RunfixServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: RunfixServer, params: lsp.DidOpenTextDocumentParams) -> None:
        opened(ls, params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RunfixServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.workspace.get_text_document(uri)
        changes = []
        for change in params.content_changes:
            if not isinstance(change, lsp.TextDocumentContentChangePartial):
                ls.flow.replaced(uri, doc.version or 0)  # a whole new text: nothing can stay
                return
            start, end = change.range.start, change.range.end
            deleted = (start.line, start.character) != (end.line, end.character)
            column = start.character if start.line == end.line else -1
            changes.append(line_change(start.line, end.line, change.text, deleted, column))
        ls.flow.edited(uri, doc.version or 0, changes, doc.lines)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RunfixServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.flow.closed(uri)
        ls.editor.closed(uri)
