"""`runfix.history`: the latest runs from the folders' run records (`record.RunRecord`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from lsp_server.contract import HISTORY, BadArguments, HistoryArgs, optional_argument
from lsp_server.record import RecordedRun
from lsp_server.server import RunfixServer


def _history(ls: RunfixServer, arg: HistoryArgs) -> list[RecordedRun]:
    if arg.uri is not None:
        folder = ls.editor.folder_for(arg.uri)
        record = ls.session.record(folder, ls.session.cached_settings(folder))
        return record.recent(ls.editor.path_of(arg.uri), arg.limit)
    folders = {k.folder for k in ls.session.kernels.all()}
    folders |= {ls.editor.folder_for(f.uri) for f in ls.workspace.folders.values()}
    runs: list[RecordedRun] = []
    for folder in folders:
        record = ls.session.record(folder, ls.session.cached_settings(folder))
        runs += record.recent(None, arg.limit)
    runs.sort(key=lambda r: r.started, reverse=True)
    return runs[: arg.limit]


def register(server: RunfixServer) -> None:
    @server.command(HISTORY)
    def history(ls: RunfixServer, *args: Any) -> list[dict[str, Any]]:
        try:
            arg = optional_argument(args, HistoryArgs) or HistoryArgs()
        except BadArguments as exc:
            raise JsonRpcInvalidParams(f"{HISTORY}: {exc}") from None
        return [{**run.to_json(), "uri": Path(run.path).as_uri()} for run in _history(ls, arg)]
