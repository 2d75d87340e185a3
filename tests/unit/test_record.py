"""The run record: what each run leaves in `.runfix/runs.db`, how it is bounded, and what
becomes of a file that is not a record (the server's side: tests/e2e/test_e2e_record.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_server.record.store import (
    FILE,
    PRUNE_EVERY,
    Asked,
    RecordedOutput,
    RecordedRun,
    RunRecord,
)

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
        assert db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("4",)


def test_a_fix_attempts_time_with_the_model_is_kept_and_a_version_3_record_gains_it(
    tmp_path: Path,
) -> None:
    record = RunRecord(tmp_path)
    record.add(a_run(1, status="error", error="E: e"))
    record.close()
    with sqlite3.connect(tmp_path / FILE) as db:  # as the last release left it
        db.execute("ALTER TABLE runs DROP COLUMN model")
        db.execute("UPDATE meta SET value = '3' WHERE key = 'version'")
    record = RunRecord(tmp_path)
    asked = Asked(3.25, 412, 57)
    record.add(a_run(2, origin="model", model=asked))
    newest, oldest = record.recent()
    assert (newest.model, oldest.model, oldest.error) == (asked, None, "E: e")  # none lost
    assert newest.to_json()["model"] == {"seconds": 3.25, "promptTokens": 412, "answerTokens": 57}
    assert record.told_once() == []
    record.close()
    assert not list((tmp_path / FILE).parent.glob("runs.db.bad-*"))  # kept, not moved aside


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


def test_the_folder_runfix_makes_is_ignored_by_git_and_a_planted_link_is_not_followed(
    tmp_path: Path,
) -> None:
    """Issue 39: `.runfix/` was left untracked in the user's repository; it says `*` in its
    own .gitignore, as pytest, mypy and ruff do in their caches."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    record = RunRecord(tmp_path)
    record.add(a_run(1))
    record.close()
    assert (tmp_path / ".runfix" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert status == "", status
    # A repository that ships `.runfix/.gitignore` as a link: left as it is, never written.
    other = tmp_path / "other"
    other.mkdir()
    (other / ".runfix").mkdir()
    target = tmp_path / "elsewhere"
    (other / ".runfix" / ".gitignore").symlink_to(target)
    record = RunRecord(other)
    record.add(a_run(1))
    record.close()
    assert not target.exists()
