"""One module per LSP feature, each with `register(server)`."""

from __future__ import annotations

from lsp_server.lsp.features import (
    code_actions,
    code_lens,
    commands,
    documents,
    history,
    hover,
    inlay_hints,
    lifecycle,
    live,
    notebooks,
    outputs,
    trust,
)
from lsp_server.lsp.server import RunfixServer

_FEATURES = (
    lifecycle,
    documents,
    commands,
    code_actions,
    code_lens,
    inlay_hints,
    history,
    hover,
    live,
    outputs,
    trust,
    notebooks,
)


def register_all(server: RunfixServer) -> None:
    for feature in _FEATURES:
        feature.register(server)
