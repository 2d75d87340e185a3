"""What the benchmarks share: a real `runfix serve` over stdio, driven by pygls's client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

INLAY_HINTS = lsp.ClientCapabilities(
    text_document=lsp.TextDocumentClientCapabilities(inlay_hint=lsp.InlayHintClientCapabilities())
)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench_client() -> Any:
    """A client that takes diagnostics and status silently (they are not what is measured)."""
    client = LanguageClient("bench", "1")

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        pass

    @client.feature("runfix/status")
    def status(params: Any) -> None:
        pass

    return client


async def start_server(
    client: LanguageClient,
    folder: Path,
    options: dict[str, Any],
    capabilities: lsp.ClientCapabilities = INLAY_HINTS,
) -> None:
    """Start `runfix serve` and initialize it on `folder` with these settings, as a client
    whose user trusts the folder (as VS Code says for a trusted workspace)."""
    await client.start_io(sys.executable, "-m", "lsp_server", "serve", "--log-level", "WARNING")
    options = {"workspaceTrust": "trusted", **options}
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=capabilities, root_uri=folder.as_uri(), initialization_options=options
        )
    )
    client.initialized(lsp.InitializedParams())


async def stop_server(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
