"""Shared test helpers: a workspace folder, a real `runfix serve`, real client capabilities."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVER = [sys.executable, "-m", "lsp_server", "serve", "--log-level", "INFO"]
CLIENTS = ["visual_studio_code", "neovim@v0.7.0", "neovim@v0.11.0"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    return ws


def init_params(
    folder: Path, client: str = "neovim@v0.11.0", options: dict[str, Any] | None = None
) -> lsp.InitializeParams:
    return lsp.InitializeParams(
        capabilities=client_capabilities(client),
        root_uri=folder.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
        initialization_options={"python": sys.executable, **(options or {})},
    )


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient) -> Any:
    """A real `runfix serve`, connected but not initialized: each test says as which client."""
    lsp_client.inlay_refreshes = 0  # type: ignore[attr-defined]

    @lsp_client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(params: None) -> None:
        lsp_client.inlay_refreshes += 1  # type: ignore[attr-defined]

    yield
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )
    return uri


def change(
    client: LanguageClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text
                )
            ],
        )
    )


def run_args(uri: str, first: int | None = None, last: int | None = None) -> list[Any]:
    arg: dict[str, Any] = {"uri": uri}
    if first is not None:
        end = last if last is not None else first
        arg["range"] = {
            "start": {"line": first, "character": 0},
            "end": {"line": end + 1, "character": 0},
        }
    return [arg]


async def run(
    client: LanguageClient, uri: str, first: int | None = None, last: int | None = None
) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.run", arguments=run_args(uri, first, last))
    )


def errors(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    return [
        d for d in client.diagnostics.get(uri, []) if d.severity == lsp.DiagnosticSeverity.Error
    ]


def infos(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    return [
        d
        for d in client.diagnostics.get(uri, [])
        if d.severity == lsp.DiagnosticSeverity.Information
    ]


async def hints(client: LanguageClient, uri: str, lines: int = 200) -> list[lsp.InlayHint]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(lines, 0)),
        )
    )
    return list(result or [])


async def hover_text(client: LanguageClient, uri: str, line: int, character: int = 0) -> str:
    result = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri=uri), lsp.Position(line, character))
    )
    if result is None:
        return ""
    contents = result.contents
    assert isinstance(contents, lsp.MarkupContent)
    return contents.value
