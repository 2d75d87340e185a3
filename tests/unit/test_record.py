"""The run record: what each run leaves in `.runfix/runs.db`, how it is bounded, and what
becomes of a file that is not a record; the server killed mid-run; `runfix history`."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import HISTORY
from lsp_server.record.store import FILE, PRUNE_EVERY, RecordedOutput, RecordedRun, RunRecord
from tests.conftest import HandDriven, errors, hints, hover_text, init_params, open_doc, run

RUNFIX = [sys.executable, "-m", "lsp_server"]


def a_run(n: int, path: str = "/p/a.py", **more: object) -> RecordedRun:
    fields: dict[str, object] = {
        "path": path,
        "first": n,
        "last": n,
        "code": f"x = {n}\n",
        "origin": "user",
        "status": "ok",
        "started": 1_700_000_000.0 + n,
        "duration": 0.01,
    }
    fields.update(more)
    return RecordedRun(**fields)  # type: ignore[arg-type]


def test_runs_are_recorded_and_read_back_newest_first(tmp_path: Path) -> None:
    record = RunRecord(tmp_path)
    shown = (RecordedOutput(3, "DataFrame 2×2", "table", "/p/.runfix/outputs/ab.html"),)
    first = record.add(a_run(1, outputs=shown, cpu=0.5, peak=300, rss_before=100, rss_after=150))
    record.add(a_run(2, path="/p/b.py", status="error", error="ZeroDivisionError: x"))
    record.add(a_run(3, origin="model", fix_of=record.id_for(first)))
    assert [r.first for r in record.recent()] == [3, 2, 1]
    newest, _, oldest = record.recent()
    assert newest.origin == "model" and newest.fix_of == oldest_id(record)
    assert oldest.outputs == shown and (oldest.memory_growth, oldest.memory_change) == (200, 50)
    assert [r.first for r in record.recent("/p/b.py")] == [2]
    assert record.recent(limit=1)[0].first == 3
    record.close()
    # Another reader sees it all (WAL: committed as each run ended).
    again = RunRecord(tmp_path)
    assert len(again.recent()) == 3


def oldest_id(record: RunRecord) -> int | None:
    return record.recent(limit=1000)[-1].id


def test_two_writers_on_one_folder_interleave_their_runs(tmp_path: Path) -> None:
    """The editor's server and `runfix run` in a terminal, on one folder at once."""
    editor, terminal = RunRecord(tmp_path), RunRecord(tmp_path)
    for n in range(6):
        (editor if n % 2 else terminal).add(a_run(n))
        editor.flush() if n % 3 else terminal.flush()
    editor.close()
    terminal.close()
    runs = RunRecord(tmp_path).recent(limit=100)
    assert sorted(r.first for r in runs) == list(range(6))
    assert len({r.id for r in runs}) == 6
    assert editor.told_once() == [] and terminal.told_once() == []


def test_the_oldest_runs_are_pruned_past_the_limit(tmp_path: Path) -> None:
    record = RunRecord(tmp_path, max_runs=10)
    for n in range(PRUNE_EVERY * 2 + 5):
        record.add(a_run(n))
    kept = [r.first for r in record.recent(limit=10_000)]
    assert len(kept) <= 10 + PRUNE_EVERY  # pruned every PRUNE_EVERY runs
    assert kept[0] == PRUNE_EVERY * 2 + 4 and min(kept) >= PRUNE_EVERY * 2 - 10
    off = RunRecord(tmp_path / "off", max_runs=0)
    assert off.add(a_run(1)) is None and not (tmp_path / "off" / FILE).exists()


@pytest.mark.parametrize("content", ["garbage", "foreign"])
def test_a_file_that_is_not_a_record_is_moved_aside(tmp_path: Path, content: str) -> None:
    path = tmp_path / FILE
    path.parent.mkdir(parents=True)
    if content == "garbage":
        path.write_bytes(b"this is not SQLite at all" * 100)
    else:
        with sqlite3.connect(path) as other:
            other.execute("CREATE TABLE notes (text TEXT)")
    record = RunRecord(tmp_path)
    assert record.add(a_run(1)) is not None
    [told] = record.told_once()
    [aside] = path.parent.glob("runs.db.bad-*")
    assert "moved to " + aside.name in told
    assert [r.first for r in record.recent()] == [1]
    assert record.told_once() == []


def test_runs_are_not_recorded_when_the_folder_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / ".runfix").write_text("a file where the folder would be")
    record = RunRecord(tmp_path)
    assert record.add(a_run(1)) is None
    [told] = record.told_once()
    assert "not recorded this session" in told
    assert record.add(a_run(2)) is None and record.told_once() == []


async def test_each_run_is_recorded_with_its_memory_and_shown_in_the_hover(
    client: LanguageClient, folder: Path
) -> None:
    await client.initialize_session(init_params(folder))
    text = "big = b'x' * (200 * 2**20)\nlen(big)\n# %%\ndel big\n1 / 0\n"
    uri = open_doc(client, folder / "memory.py", text)
    assert (await run(client, uri))["status"] == "error"
    history = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(HISTORY, [{"uri": uri}])
    )
    failed, allocated = history
    assert allocated["uri"] == uri and (allocated["first"], allocated["last"]) == (0, 1)
    assert allocated["status"] == "ok" and allocated["origin"] == "user"
    assert allocated["memoryGrowthBytes"] >= 190 * 2**20, allocated  # measured in the kernel
    assert allocated["memoryChangeBytes"] >= 190 * 2**20
    assert allocated["outputs"] == [{"line": 1, "text": "209715200\n", "kind": "text"}]
    assert allocated["cpuMs"] > 0 and allocated["durationMs"] > 0
    assert failed["status"] == "error" and failed["error"].startswith("ZeroDivisionError")
    assert failed["memoryChangeBytes"] <= -190 * 2**20  # `del big` gave it back
    hover = await hover_text(client, uri, 1)
    assert "*ran " in hover and "peak +200.0 MB" in hover, hover


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
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(timeout=30)
    finally:
        server.kill()
    db = sqlite3.connect(folder / FILE)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    paths = [row[0] for row in db.execute("SELECT path FROM runs ORDER BY id")]
    assert paths == [str(folder / "one.py"), str(folder / "two.py")]


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
    client: LanguageClient, folder: Path
) -> None:
    await client.initialize_session(init_params(folder))
    uri = open_doc(client, folder / "quiet.py", "x = 1\n")
    history = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(HISTORY, [{"uri": uri}])
    )
    assert (
        history == []
        and await client.workspace_execute_command_async(lsp.ExecuteCommandParams(HISTORY, []))
        == []
    )
    await asyncio.sleep(0.5)  # the restore spawned by didOpen has looked
    assert not (folder / ".runfix").exists()


def test_a_record_without_this_machines_mark_is_moved_aside(tmp_path: Path) -> None:
    """A record of an older runfix (no owner mark) cannot be told from one a repository
    shipped: it is moved aside, never shown, and a new one started."""
    path = tmp_path / FILE
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as old:
        old.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "INSERT INTO meta VALUES ('schema', 'runfix-record'), ('version', '1');"
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, started REAL NOT NULL, path TEXT NOT NULL,"
            " first INTEGER NOT NULL, last INTEGER NOT NULL, code TEXT NOT NULL,"
            " origin TEXT NOT NULL, status TEXT NOT NULL, duration REAL NOT NULL, cpu REAL,"
            " peak INTEGER, rss_before INTEGER, rss_after INTEGER, outputs TEXT NOT NULL,"
            " error TEXT, fix_of INTEGER);"
            "INSERT INTO runs (started, path, first, last, code, origin, status, duration, outputs)"
            " VALUES (1.0, '/p/a.py', 0, 0, 'x = 1\n', 'user', 'ok', 0.1, '[]');"
        )
    record = RunRecord(tmp_path)
    record.add(a_run(5, status="error", error="E: e", error_line=5))
    kept = record.recent()
    assert [r.first for r in kept] == [5]  # the old run is not among them
    told = record.told_once()
    assert len(told) == 1 and "not one runfix wrote here" in told[0]
    record.close()
    assert list(path.parent.glob("runs.db.bad-*"))
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("3",)


def _write_runs(folder: str, tag: str, count: int) -> None:
    record = RunRecord(Path(folder))
    for i in range(count):
        record.add(a_run(i, path=f"/p/{tag}.py"))
        record.flush()  # as the server does, a moment after each run
    record.close()
    assert record.told_once() == [], tag


def test_three_writers_at_once_lose_no_run(tmp_path: Path) -> None:
    """Two editors' servers and `runfix run` write one folder's record at once: every run is
    there (SQLite's lock is waited out, never taken for a foreign file), round after round."""
    import multiprocessing

    for round_ in range(3):
        folder = tmp_path / f"round{round_}"
        folder.mkdir()
        writers = [
            multiprocessing.Process(target=_write_runs, args=(str(folder), tag, 200))
            for tag in ("editor", "other-editor", "cli")
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(120)
        assert [w.exitcode for w in writers] == [0, 0, 0]
        with sqlite3.connect(folder / FILE) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (600,)
        assert not list((folder / FILE).parent.glob("runs.db.bad-*"))
