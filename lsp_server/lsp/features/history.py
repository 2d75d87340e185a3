"""`runfix.history`: the latest runs from the folders' run records (`record.RunRecord`);
`runfix.export`: a document and its last outputs as a notebook."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from lsp_server.contract import (
    EXPORT,
    HISTORY,
    ExportAnswer,
    ExportArgs,
    HistoryArgs,
    to_json,
)
from lsp_server.lsp.features.commands import argument, optional
from lsp_server.lsp.server import RunfixServer
from lsp_server.record.store import RESTORE_RUNS, RecordedRun, RunRecord
from lsp_server.text.languages import PYTHON


def _record(ls: RunfixServer, folder: Path) -> RunRecord | None:
    """The folder's record, if it has one and its code may run (an undecided folder's
    record may have come with the repository: it is not read, nor moved aside)."""
    return ls.flow.record_of(folder)


def _history(ls: RunfixServer, arg: HistoryArgs) -> list[RecordedRun]:
    if arg.uri is not None:
        folder = ls.editor.folder_for(arg.uri)
        record = _record(ls, folder)
        return record.recent(ls.editor.path_of(arg.uri), arg.limit) if record else []
    folders = {k.folder for k in ls.flow.kernels()}
    folders |= {ls.editor.folder_for(f.uri) for f in ls.workspace.folders.values()}
    runs: list[RecordedRun] = []
    for folder in folders:
        record = _record(ls, folder)
        if record is not None:  # asking creates nothing
            runs += record.recent(None, arg.limit)
    runs.sort(key=lambda r: r.started, reverse=True)
    return runs[: arg.limit]


async def _export(ls: RunfixServer, uri: str) -> ExportAnswer:
    from lsp_server.record.notebooks import write_notebook

    folder = ls.editor.folder_for(uri)
    path = Path(ls.editor.path_of(uri))
    if not uri.startswith("file:"):
        raise JsonRpcInvalidParams(f"{EXPORT}: save the document to a file first")
    record = await ls.flow.record_for(folder)
    runs = record.recent(str(path), RESTORE_RUNS)
    text = "".join(ls.workspace.get_text_document(uri).lines)
    out = path.with_suffix(".ipynb")
    try:
        language = ls.editor.language_of(uri) or PYTHON
        cells, with_outputs = await asyncio.to_thread(
            write_notebook, text, runs, out, folder, language
        )
    except OSError as exc:
        raise JsonRpcInvalidParams(f"{EXPORT}: {exc}") from None
    return ExportAnswer(str(out), cells, with_outputs)


def register(server: RunfixServer) -> None:
    @server.command(EXPORT)
    async def export(ls: RunfixServer, *args: Any) -> Any:
        arg = argument(ls, EXPORT, args, ExportArgs)
        return to_json(await _export(ls, arg.uri))

    @server.command(HISTORY)
    def history(ls: RunfixServer, *args: Any) -> list[dict[str, Any]]:
        arg = optional(HISTORY, args, HistoryArgs) or HistoryArgs()
        return [{**run.to_json(), "uri": Path(run.path).as_uri()} for run in _history(ls, arg)]
