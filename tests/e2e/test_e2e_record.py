"""The run record through the server and the CLI: each run recorded and shown in the hover,
the server killed mid-run, results restored on unchanged code, `runfix history`."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import EXPORT, HISTORY
from lsp_server.record.store import FILE
from tests.conftest import HandDriven, change, errors, hints, hover_text, init_params, open_doc, run

RUNFIX = [sys.executable, "-m", "lsp_server"]


async def test_each_run_is_recorded_with_its_memory_and_shown_in_the_hover(
    initialized: LanguageClient, folder: Path
) -> None:
    text = "big = b'x' * (200 * 2**20)\nlen(big)\n# %%\ndel big\n1 / 0\n"
    uri = open_doc(initialized, folder / "memory.py", text)
    assert (await run(initialized, uri))["status"] == "error"
    history = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(HISTORY, [{"uri": uri}])
    )
    failed, allocated = history or []
    assert allocated["uri"] == uri and (allocated["first"], allocated["last"]) == (0, 1)
    assert allocated["status"] == "ok" and allocated["origin"] == "user"
    assert allocated["memoryGrowthBytes"] >= 190 * 2**20, allocated  # measured in the kernel
    assert allocated["memoryChangeBytes"] >= 190 * 2**20
    assert allocated["outputs"] == [{"line": 1, "text": "209715200\n", "kind": "value"}]
    assert allocated["cpuMs"] > 0 and allocated["durationMs"] > 0
    assert failed["status"] == "error" and failed["error"].startswith("ZeroDivisionError")
    assert failed["memoryChangeBytes"] <= -190 * 2**20  # `del big` gave it back
    hover = await hover_text(initialized, uri, 1)
    assert "*ran " in hover and re.search(r"peak \+200\.\d MB", hover), hover


def test_a_killed_server_loses_at_most_the_run_in_progress(folder: Path) -> None:
    server = HandDriven()
    try:
        server.initialize(folder, {"python": sys.executable})
        assert server.run(folder / "one.py", "x = 1\nx\n")["status"] == "ok"
        assert server.run(folder / "two.py", "y = 2\n")["status"] == "ok"
        uri = (folder / "slow.py").as_uri()
        slow = "import time\ntime.sleep(60)\n"
        document = {"uri": uri, "languageId": "python", "version": 1, "text": slow}
        server.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
        server.send({"id": 99, "method": "workspace/executeCommand",
                     "params": {"command": "runfix.run", "arguments": [{"uri": uri}]}})  # fmt: skip
        time.sleep(1.0)
    finally:
        recorded = _killed(server, folder)
    assert recorded == [str(folder / "one.py"), str(folder / "two.py")]


def _killed(server: HandDriven, folder: Path) -> list[str]:
    """`kill -9` of the server; the paths of the runs its record holds, in order (the
    record intact)."""
    try:
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=30)
    finally:
        server.kill()
    db = sqlite3.connect(folder / FILE)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return [row[0] for row in db.execute("SELECT path FROM runs ORDER BY id")]


def test_a_server_killed_the_moment_a_run_was_answered_has_recorded_it(folder: Path) -> None:
    """`kill -9` as soon as the answer is read: each run answered is in the record (it is
    committed before it is answered), the last one too."""
    server = HandDriven()
    try:
        server.initialize(folder, {"python": sys.executable})
        for i in range(6):
            assert server.run(folder / f"r{i}.py", f"x = {i}\n")["status"] == "ok"
    finally:
        recorded = _killed(server, folder)
    assert recorded == [str(folder / f"r{i}.py") for i in range(6)]


def test_runfix_history_lists_the_runs_of_runfix_run(folder: Path) -> None:
    script = folder / "steps.py"
    script.write_text("# %%\nprint('hello')\n# %%\n1 / 0\n")
    env_run = subprocess.run([*RUNFIX, "run", str(script)], cwd=folder, capture_output=True)
    assert env_run.returncode == 1, env_run.stderr
    shown = subprocess.run([*RUNFIX, "history"], cwd=folder, capture_output=True, text=True)
    newest, oldest = shown.stdout.splitlines()
    assert "steps.py:4 user error" in newest and "ZeroDivisionError" in newest
    assert "steps.py:2 user ok" in oldest and "→ hello" in oldest and "CPU" in oldest
    as_json = subprocess.run(
        [*RUNFIX, "history", str(script), "--json", "--limit", "1"],
        cwd=folder, capture_output=True, text=True, check=True,
    )  # fmt: skip
    [latest] = json.loads(as_json.stdout)
    assert latest["status"] == "error" and latest["path"] == str(script)
    nothing = subprocess.run(
        [*RUNFIX, "history"], cwd=folder.parent, capture_output=True, text=True
    )
    assert nothing.returncode == 1 and "no run record" in nothing.stdout


async def _hint_labels(client: LanguageClient, uri: str, want: int) -> list[str]:
    labels: list[str] = []
    for _ in range(100):
        labels = [h.label for h in await hints(client, uri)]  # type: ignore[misc]
        if len(labels) >= want:
            break
        await asyncio.sleep(0.1)
    return labels


async def test_results_come_back_after_a_restart_only_on_unchanged_code(
    client: LanguageClient, folder: Path
) -> None:
    """A first server runs the file and stops; the next one (the editor reopened) shows the
    results of the cells whose code is unchanged, marked as earlier, and none where the
    code changed; close and reopen does the same."""
    text = "# %% one\nx = 6 * 7\nx\n# %% two\nprint('two', x)\n# %% three\nx / 0\n"
    first = HandDriven()
    try:
        first.initialize(folder, {"python": sys.executable})
        assert first.run(folder / "again.py", text)["status"] == "error"
        first.end("shutdown and exit")
    finally:
        first.kill()

    await client.initialize_session(init_params(folder))
    changed = text.replace("print('two', x)", "print('three', x)")
    uri = open_doc(client, folder / "again.py", changed)
    assert await _hint_labels(client, uri, 1) == ["→ 42 (earlier session)"]
    [raised] = errors(client, uri)  # the error comes back on its line too
    assert (raised.range.start.line, raised.message) == (6, "ZeroDivisionError: division by zero")
    hover = await hover_text(client, uri, 2)
    assert "before the file was opened" in hover and "CPU" in hover, hover

    client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    uri = open_doc(client, folder / "again.py", text, version=7)
    assert await _hint_labels(client, uri, 2) == [
        "→ 42 (earlier session)",
        "→ two 42 (earlier session)",
    ]
    # Run again: fresh results, no longer marked.
    assert (await run(client, uri))["status"] == "error"
    assert await _hint_labels(client, uri, 2) == ["→ 42", "→ two 42"]


async def test_opening_and_asking_create_nothing_in_the_folder(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "quiet.py", "x = 1\n")
    history = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(HISTORY, [{"uri": uri}])
    )
    assert (
        history == []
        and await initialized.workspace_execute_command_async(lsp.ExecuteCommandParams(HISTORY, []))
        == []
    )
    await asyncio.sleep(0.5)  # the restore spawned by didOpen has looked
    assert not (folder / ".runfix").exists()


async def test_the_export_command_writes_the_editors_text_and_its_outputs(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "unsaved.py", "# %%\nx = 6 * 7\nx\n# %%\nprint(x + 1)\n")
    assert (await run(initialized, uri))["status"] == "ok"
    change(initialized, uri, 2, (4, 10), (4, 11), "2")  # unsaved: print(x + 2), not run
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(EXPORT, [{"uri": uri}])
    )
    assert answer == {"path": str(folder / "unsaved.ipynb"), "cells": 2, "withOutputs": 1}
    notebook = nbformat.read(folder / "unsaved.ipynb", as_version=4)
    nbformat.validate(notebook)
    first, second = notebook.cells
    assert [(o.output_type, o.data["text/plain"]) for o in first.outputs] == [
        ("execute_result", "42")  # a value, as Jupyter keeps it (not printed text)
    ]
    assert second.source == "print(x + 2)" and second.outputs == []  # the editor's text
