"""Documents whose paths need percent-encoding (spaces, `#`, `%`, non-ASCII, a Windows drive)
are found whatever form the client writes their URIs in, and answered in that form."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from lsprotocol import types as lsp

from lsp_server.lsp.uris import ClientUris, canonical
from tests.conftest import hints, init_params

TEXT = "x = 6 * 7\nx\nundefined_name\n"


def vscode_uri(path: Path) -> str:
    """A file URI as VS Code writes it: every character but `/` and the unreserved ones
    percent-encoded (a drive letter's colon too)."""
    return "file://" + quote(str(path), safe="/")


@pytest.mark.parametrize("name", ["plain.py", "my notes.py", "a#b.py", "100%.py", "café ☕.py"])
async def test_a_document_with_an_encoded_uri_runs_and_gets_its_results(
    client: Any, folder: Path, name: str
) -> None:
    project = folder / "my project"
    project.mkdir()
    await client.initialize_session(init_params(project))
    path = project / name
    path.write_text(TEXT)
    uri = vscode_uri(path)
    item = lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=TEXT)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(item))

    answer = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.run", [{"uri": uri}])
    )

    assert answer["status"] == "error", answer
    [diagnostic] = [d for d in client.diagnostics.get(uri, []) if d.severity == 1]
    assert "undefined_name" in diagnostic.message
    assert set(client.diagnostics) == {uri}  # only under the client's own form
    assert [h.label for h in await hints(client, uri)] == ["→ 42"]


def test_a_windows_drive_letter_round_trips() -> None:
    uris = ClientUris()
    message = {"textDocument": {"uri": "file:///c%3A/Users/ada/my%20notes.py"}}
    inner = uris.incoming(message["textDocument"])
    assert inner["uri"] == canonical("file:///c%3A/Users/ada/my%20notes.py")
    assert uris.outgoing({"uri": inner["uri"], "changes": {inner["uri"]: []}}) == {
        "uri": "file:///c%3A/Users/ada/my%20notes.py",
        "changes": {"file:///c%3A/Users/ada/my%20notes.py": []},
    }
    assert canonical("untitled:Untitled-1") == "untitled:Untitled-1"
