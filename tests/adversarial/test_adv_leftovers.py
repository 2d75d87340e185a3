"""Issue 36, S3 14: the earlier rounds' leftovers, each as a user meets it."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from tests.conftest import SERVER_ENV, hints, init_params, open_doc, run


def runfix(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "lsp_server", *args]
    return subprocess.run(
        command, env=SERVER_ENV, capture_output=True, text=True, timeout=120, cwd=cwd
    )


@pytest.mark.parametrize("command", ["export", "import"])
def test_export_or_import_of_a_folder_says_it_is_a_folder(command: str, tmp_path: Path) -> None:
    said = runfix(command, str(tmp_path))
    assert said.returncode == 2
    assert "is a folder" in said.stderr and "does not exist" not in said.stderr


async def test_code_lens_of_a_file_never_opened_and_missing_is_empty(
    initialized: Any, folder: Path
) -> None:
    missing = lsp.TextDocumentIdentifier((folder / "gone.py").as_uri())
    assert not await initialized.text_document_code_lens_async(lsp.CodeLensParams(missing))
    fifo = folder / "pipe.py"
    import os

    os.mkfifo(fifo)  # and one that would block a read: read as nothing, at once
    piped = lsp.TextDocumentIdentifier(fifo.as_uri())
    assert not await initialized.text_document_code_lens_async(lsp.CodeLensParams(piped))
    hovered = initialized.text_document_hover_async(lsp.HoverParams(piped, lsp.Position(0, 0)))
    assert await asyncio.wait_for(hovered, 10) is None
    start = lsp.Position(0, 0)
    # these read the document's text: a FIFO read from disk would block the server's loop
    for asked in (
        initialized.text_document_completion_async(lsp.CompletionParams(piped, start)),
        initialized.text_document_signature_help_async(lsp.SignatureHelpParams(piped, start)),
        initialized.text_document_code_action_async(
            lsp.CodeActionParams(piped, lsp.Range(start, start), lsp.CodeActionContext([]))
        ),
    ):
        await asyncio.wait_for(asked, 10)


async def test_a_position_past_the_end_is_refused_not_the_last_cell_run(
    initialized: Any, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "a.py", "# %%\nx = 1\n# %%\nopen('ran', 'w')\n")
    with pytest.raises(JsonRpcInvalidParams, match="past the end"):
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                "runfix.run", [{"uri": uri, "position": {"line": 400, "character": 0}}]
            )
        )
    assert not (folder / "ran").exists()


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("runfix.run", {"position": {"line": 1, "character": 0}}),
        ("runfix.runAndFix", {}),
        ("runfix.runBelow", {"position": {"line": 0, "character": 0}}),
        ("runfix.install", {"packages": ["six"]}),
        ("runfix.fixWithModel", {"piece": [1, 1], "message": "NameError: name 'y' is not defined"}),
    ],
)
async def test_a_command_on_a_file_the_editor_has_not_opened_says_so(
    initialized: Any, folder: Path, command: str, extra: dict[str, Any]
) -> None:
    """Commands act on the editor's text: one naming a file the editor has not opened (a
    client may still send it) is refused with a message naming the file, nothing of the
    file runs, and the server goes on."""
    path = folder / "closed.py"
    path.write_text("# %%\nopen('ran', 'w')\n")
    with pytest.raises(JsonRpcInvalidParams, match="is not open in the editor"):
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command, [{"uri": path.as_uri(), **extra}])
        )
    assert not (folder / "ran").exists()
    uri = open_doc(initialized, folder / "open.py", "x = 6 * 7\nx\n")
    assert (await run(initialized, uri))["status"] == "ok"


async def test_the_editor_and_runfix_run_keep_one_record_for_a_file(
    initialized: Any, folder: Path
) -> None:
    """The editor is opened on a folder with no project file; the file is in a folder
    below it; `runfix run` of it from a terminal records in the editor's record."""
    sub = folder / "analysis"
    sub.mkdir()
    script = sub / "report.py"
    script.write_text("print('from both')\n")
    uri = open_doc(initialized, script, script.read_text())
    assert (await run(initialized, uri))["status"] == "ok"
    said = runfix("run", str(script))
    assert said.returncode == 0, said.stderr
    assert not (sub / ".runfix").exists()
    with sqlite3.connect(folder / ".runfix" / "runs.db") as db:
        origins = [row[0] for row in db.execute("SELECT origin FROM runs ORDER BY id")]
    assert len(origins) == 2, origins


async def test_a_project_file_problem_is_said_once(client: Any, folder: Path) -> None:
    (folder / "pyproject.toml").write_text('[tool.runfix]\ntimeout = "soon"\nbogus = 1\n')
    await client.initialize_session(init_params(folder))
    for name in ("a.py", "b.py"):
        uri = open_doc(client, folder / name, "6 * 7\n")
        assert (await run(client, uri))["status"] == "ok"
    said = [m.message for m in client.messages] + [m.message for m in client.log_messages]
    for problem in ("timeout = 'soon'", "unknown setting 'bogus'"):
        assert sum(problem in m for m in said) == 1, said
    assert [h.label for h in await hints(client, uri)] == ["→ 42"]


async def test_a_carriage_return_bomb_shows_its_last_frame_in_the_editor(
    initialized: Any, folder: Path
) -> None:
    """The same through a real kernel and LSP: 200,000 frames of a progress line, far past
    `outputLimit`; the hint shows the last one, not the frame the head stopped at."""
    code = "for i in range(200000):\n    print(f'\\r{i}', end='')\n"
    uri = open_doc(initialized, folder / "bomb.py", code)
    assert (await run(initialized, uri))["status"] == "ok"
    [hint] = await hints(initialized, uri)
    assert hint.label.startswith("→ 199999"), hint.label
