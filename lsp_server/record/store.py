"""The run record: every run of a folder, kept in `<folder>/.runfix/runs.db` (SQLite).

A run is one piece of a document run once: where (file, lines), the code as it
ran, who wrote it (user or model), how it ended, its outputs (their one line and
the stored file, never the data again), wall time, the kernel's CPU time and
memory, and the run it was an attempt to fix. `runfix history` and the editors'
history read it; nothing in it is needed to run code.

One writer per server (and `runfix run`), in WAL mode with `synchronous=NORMAL`:
each run is committed as it ends, before it is answered (`Session.recorded`): the
commit is a write to the WAL file, no fsync (~20 µs), so a server killed at any moment
(`kill -9`) has lost no run it answered. A power loss may lose the runs since SQLite's
last checkpoint, which syncs: it checkpoints every 1,000 pages of WAL, and a trivial
run adds two (4 KB) — up to about 500 runs.
Readers (`runfix history`) never block it. The oldest runs are
pruned past `history.maxRuns`. A file that is not a record (corrupt, or another
program's schema) is moved aside with a message, never fatal; any later error
turns recording off for the session with a message, and runs go on.

A repository can ship a `.runfix/runs.db` that says anything (results nobody got,
outputs naming `/proc/self/environ`, triggers that run inside runfix's writes).
So a record is runfix's only if it carries this machine's mark for this folder
(`executor.trust.owner_mark`) and holds nothing runfix did not make (no trigger,
view or other table); anything else is foreign and moved aside. Its stored
outputs are read only through `folder_files.stored_output`, and `.runfix/` is
never a link.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.trust import owner_mark
from lsp_server.folder_files import RUNFIX, LinkRefused, opened_folder, stored_output

if TYPE_CHECKING:  # `runfix history` reads the record without loading the rest of runfix
    from executor.events import RunOutcome
    from lsp_server.outputs.results import DocumentResults

log = logging.getLogger(__name__)

FILE = Path(RUNFIX) / "runs.db"
SCHEMA = "runfix-record"
VERSION = 4
"""2 added `error_line`; 3 the owner mark. A record without the mark is moved aside: runfix
cannot tell one it wrote before the mark from one a repository shipped. 4 added `model` (a
fix attempt's time with the model), added to a version 3 record in place."""
PRUNE_EVERY = 100
TEXT_KEPT = 2_000
"""Characters of a statement's text output kept in the record."""
KEEP_IDS = 1_000
"""Tickets whose ids a record remembers (a fix attempt names the run it fixes by id)."""
BUSY_SECONDS = 0.5
"""How long one SQLite call waits for another writer before runfix tries again later (the
server's loop must not wait long)."""
BUSY_RETRY = 0.05
CLOSE_WAIT = 30.0
"""Seconds `close` waits for other writers to let the last runs in."""
RESTORE_RUNS = 500
"""Recorded runs of a file looked at when it is opened again."""
"""Runs recorded between two prunings of the oldest."""

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    started REAL NOT NULL,
    path TEXT NOT NULL,
    first INTEGER NOT NULL,
    last INTEGER NOT NULL,
    code TEXT NOT NULL,
    origin TEXT NOT NULL,
    status TEXT NOT NULL,
    duration REAL NOT NULL,
    cpu REAL,
    peak INTEGER,
    rss_before INTEGER,
    rss_after INTEGER,
    outputs TEXT NOT NULL,
    error TEXT,
    fix_of INTEGER,
    error_line INTEGER,
    model TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_path ON runs (path, id);
"""
_OURS = {
    ("table", "meta"),
    ("table", "runs"),
    ("index", "runs_by_path"),
    ("index", "sqlite_autoindex_meta_1"),
}
"""What a runfix record's schema holds: anything else (a trigger, a view) was not made by
runfix."""
_COLUMNS = (
    "started, path, first, last, code, origin, status, duration, cpu, peak, rss_before, "
    "rss_after, outputs, error, fix_of, error_line, model"
)


REPLY_KEPT = 4000
"""The characters of a model's answer the record keeps (and the output panel shows)."""
REQUEST_KEPT = 24_000
"""The characters of a request, as it was sent, the record keeps (`runfix history --show`)."""


@dataclass(frozen=True)
class Asked:
    """One exchange with the model (a Generate, a fix attempt): the wait for its answer
    (reading the prompt, writing the answer), its tokens and why it ended where the endpoint
    said, the request's size and bound, and the answer as it came (`REPLY_KEPT` at most) —
    what the model said is seen, not only what runfix made of it — and the request as it
    was sent (`REQUEST_KEPT` at most), with what the secret rule hid from it said."""

    seconds: float
    prompt_tokens: int | None = None
    answer_tokens: int | None = None
    model: str | None = None
    asked_chars: int | None = None
    bound: int | None = None
    finish: str | None = None
    reply: str | None = None
    request: str | None = None
    """The request's messages as sent: secrets already hidden (`executor.redact`)."""
    hidden: tuple[str, ...] = ()
    """Whose secrets were hidden from it (`STRIPE_KEY's value`, `a key`), never the values."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(self.seconds, 3)}
        named = (
            ("promptTokens", self.prompt_tokens),
            ("answerTokens", self.answer_tokens),
            ("model", self.model),
            ("askedChars", self.asked_chars),
            ("bound", self.bound),
            ("finish", self.finish),
            ("reply", self.reply),
            ("request", self.request),
        )
        out.update((k, v) for k, v in named if v is not None)
        if self.hidden:
            out["hidden"] = list(self.hidden)
        return out

    @classmethod
    def from_json(cls, text: str | None) -> Asked | None:
        try:
            raw = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(raw, dict) or not isinstance(raw.get("seconds"), (int, float)):
            return None

        def of(key: str, kind: type) -> Any:
            value = raw.get(key)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        return cls(
            float(raw["seconds"]),
            of("promptTokens", int),
            of("answerTokens", int),
            of("model", str),
            of("askedChars", int),
            of("bound", int),
            of("finish", str),
            of("reply", str),
            of("request", str),
            tuple(str(h) for h in raw.get("hidden") or () if isinstance(h, str)),
        )

    @property
    def text(self) -> str:
        tokens = (
            f" ({self.prompt_tokens} + {self.answer_tokens} tokens)"
            if self.prompt_tokens is not None and self.answer_tokens is not None
            else ""
        )
        return f"model {self.seconds:.2f} s{tokens}"

    @property
    def said(self) -> str:
        """The exchange in full, as the output panel and `runfix history --show` print it:
        the request's size and bound, the time, why the answer ended, the tokens, the answer."""
        tokens = (
            f", {self.prompt_tokens} prompt + {self.answer_tokens} answer tokens"
            if self.prompt_tokens is not None and self.answer_tokens is not None
            else ""
        )
        asked = f"{self.asked_chars:,}" if self.asked_chars is not None else "?"
        reply = self.reply or ""
        return (
            f"model {self.model or '?'}: asked {asked} characters (answer bound {self.bound} "
            f"tokens){self.hid}, answered in {self.seconds:.2f} s (finish: "
            f"{self.finish or 'not said'}{tokens})"
            + (f":\n{reply}" if reply.strip() else ": an empty answer")
        )

    @property
    def hid(self) -> str:
        """What the secret rule hid from the request, in a clause ("" when nothing)."""
        if not self.hidden:
            return ""
        kinds = ", ".join(dict.fromkeys(self.hidden))
        return f", {len(self.hidden)} secret(s) hidden ({kinds})"


@dataclass(frozen=True)
class RecordedOutput:
    line: int
    """The statement's first line (0-based)."""
    text: str
    """What it showed as text (`DataFrame 1,000×12`, what it printed: `TEXT_KEPT` at most)."""
    kind: str = "text"
    """text (what it printed), value (a value's text), or the rich output's kind."""
    file: str | None = None
    """The stored richest form (under `.runfix/outputs/`), if any."""
    last: int | None = None
    """The statement's last line (None: its first)."""

    @property
    def summary(self) -> str:
        return next((line for line in self.text.splitlines() if line.strip()), "")


@dataclass(frozen=True)
class RecordedRun:
    """One run as the record keeps it: where, what code, who asked, how it ended, what it showed."""

    path: str
    first: int
    last: int
    """The lines that ran (0-based, inclusive)."""
    code: str
    origin: str
    """user | model (generated, or a fix attempt)."""
    status: str
    started: float
    """Unix time."""
    duration: float
    """Wall seconds."""
    cpu: float | None = None
    peak: int | None = None
    rss_before: int | None = None
    rss_after: int | None = None
    outputs: tuple[RecordedOutput, ...] = ()
    error: str | None = None
    """The error's one line, or why the run stopped."""
    fix_of: int | None = None
    """The run this one was an attempt to fix."""
    error_line: int | None = None
    """The line (0-based) the error is on, in the document as it ran."""
    model: Asked | None = None
    """For a fix's attempt: what asking the model for it took."""
    id: int | None = field(default=None, compare=False)

    @property
    def memory_change(self) -> int | None:
        if self.rss_before is None or self.rss_after is None:
            return None
        return self.rss_after - self.rss_before

    @property
    def memory_growth(self) -> int | None:
        """How far above its start the run's memory went."""
        if self.peak is None or self.rss_before is None:
            return None
        return self.peak - self.rss_before

    @property
    def figures(self) -> str:
        """`1.20 s · CPU 0.90 s · peak +200.0 MB · kept +0.1 MB`: what the run took."""
        return figures_text(self.duration, self.cpu, self.memory_growth, self.memory_change)

    @property
    def said(self) -> str:
        """Its error, else its first output's line (`→ DataFrame 2×2`)."""
        return self.error or next((f"→ {o.summary}" for o in self.outputs if o.summary), "")

    def to_json(self) -> dict[str, Any]:
        """For `runfix history --json` and `runfix.history`: camelCase, unset fields left out."""
        out: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "first": self.first,
            "last": self.last,
            "code": self.code,
            "origin": self.origin,
            "status": self.status,
            "started": self.started,
            "durationMs": round(self.duration * 1000, 3),
            "outputs": [{k: v for k, v in vars(o).items() if v is not None} for o in self.outputs],
        }
        optional = {
            "cpuMs": None if self.cpu is None else round(self.cpu * 1000, 3),
            "peakBytes": self.peak,
            "memoryGrowthBytes": self.memory_growth,
            "memoryChangeBytes": self.memory_change,
            "error": self.error,
            "fixOf": self.fix_of,
            "model": self.model.to_json() if self.model is not None else None,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        out["figures"] = self.figures
        if self.said:
            out["said"] = self.said
        return out


def one_based(run: RecordedRun) -> dict[str, object]:
    """A run as JSON for a terminal: lines counted from 1, as in `runfix history`'s text and
    `runfix run --format json` (the editors' `runfix.history` keeps LSP's 0-based lines)."""
    out = run.to_json()
    out["first"], out["last"] = run.first + 1, run.last + 1
    for output in out["outputs"]:
        output["line"] += 1
        if "last" in output:
            output["last"] += 1
    return out


class NotARecord(Exception):
    """The file is not a runfix record (or not SQLite at all)."""


class Busy(Exception):
    """Another writer (a second server, `runfix run`) holds the record: try again soon."""


def _busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in ("locked", "busy")
    )


class RunRecord:
    """A folder's record; opened on first use. `told` holds what the user should hear once
    (a file moved aside, recording turned off)."""

    def __init__(self, folder: Path, max_runs: int = 10_000) -> None:
        self.folder = folder
        self.path = folder / FILE
        self.max_runs = max_runs
        self._db: sqlite3.Connection | None = None
        self._off = False
        """Turned off after an error, for the session."""
        self._tickets = itertools.count(1)
        self._ids: dict[int, int] = {}
        """Ticket → the run's id, once written (the latest `KEEP_IDS`)."""
        self._since_prune = 0
        self.pending: list[tuple[int, RecordedRun]] = []
        """Runs given a ticket and not written yet (`flush` writes them)."""
        self.told: list[str] = []

    # -- opening ------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection | None:
        """The writer's connection (None: runs are not recorded); `Busy` while another
        writer holds the file (the runs wait, nothing is moved aside)."""
        if self._db is not None or self._off or self.max_runs <= 0:
            return self._db if self.max_runs > 0 else None
        try:
            _unlinked(self.folder, create=True)
            try:
                self._db = _connect(self.path, owner_mark(self.folder))
            except (NotARecord, sqlite3.DatabaseError) as exc:
                if _busy(exc):
                    raise Busy(str(exc)) from exc
                aside = self.path.with_name(
                    f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}"
                )
                self.path.replace(aside)
                for suffix in ("-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self.told.append(
                    f"the run record {self.path} is not one runfix wrote here ({exc}); it "
                    f"was moved to {aside.name} and a new one started"
                )
                self._db = _connect(self.path, owner_mark(self.folder))
        except Busy:
            raise
        except (OSError, sqlite3.Error, NotARecord) as exc:
            if isinstance(exc, sqlite3.Error) and _busy(exc):
                raise Busy(str(exc)) from exc
            self._turn_off(exc)
        return self._db

    def _turn_off(self, exc: BaseException) -> None:
        self._off = True
        self.told.append(f"runs are not recorded this session: {self.path}: {exc}")
        log.warning("run record %s: %s", self.path, exc)
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def close(self) -> None:
        """Write what is pending (waiting for another writer as long as `CLOSE_WAIT`), then
        close."""
        until = time.monotonic() + CLOSE_WAIT
        while not self.flush() and time.monotonic() < until:
            time.sleep(BUSY_RETRY)
        if self.pending:
            self.told.append(f"{len(self.pending)} run(s) could not be written to {self.path}")
            log.warning("run record %s: %d run(s) not written", self.path, len(self.pending))
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    # -- writing ------------------------------------------------------------------------

    def told_once(self) -> list[str]:
        """What the user should hear (each said once)."""
        told, self.told = self.told, []
        return told

    def add(self, run: RecordedRun) -> int | None:
        """Queue a run; its ticket (None when runs are not recorded), `id_for` gives its id.
        The server flushes it at once, before the run is answered (`Session.recorded`);
        runs another writer keeps out wait in `pending` for the next flush. SQLite
        gives the ids: another writer on the same folder (`runfix run` in a terminal while
        the editor's server runs) interleaves its runs without a clash."""
        try:
            if self._open() is None:
                return None
        except Busy:
            pass  # written once the other writer lets go
        ticket = next(self._tickets)
        self.pending.append((ticket, run))
        return ticket

    def id_for(self, ticket: int | None) -> int | None:
        """The record's id of a queued run (written now if it was not yet)."""
        if ticket is None:
            return None
        if ticket not in self._ids:
            self.flush()
        return self._ids.get(ticket)

    def amend(self, ticket: int | None, run: RecordedRun) -> None:
        """The outputs of the run `ticket` names, as `run` has them now (its kernel published
        more for it after it was answered); a run another writer keeps out is amended where
        it waits. Best effort: a record that cannot be written now keeps what it had."""
        for at, (waiting, _) in enumerate(self.pending):
            if waiting == ticket:
                self.pending[at] = (waiting, run)
                return
        row_id = self._ids.get(ticket) if ticket is not None else None
        if row_id is None:
            return
        try:
            db = self._open()
        except Busy:
            return
        if db is None:
            return
        try:
            with db:
                db.execute("UPDATE runs SET outputs = ? WHERE id = ?", (_outputs(run), row_id))
        except sqlite3.Error as exc:
            if not _busy(exc):
                self._turn_off(exc)

    def flush(self) -> bool:
        """Write the pending runs, in one transaction; False when another writer holds the
        file and they wait for the next flush (nothing recorded is dropped for that)."""
        pending, self.pending = self.pending, []
        if not pending:
            return True
        try:
            db = self._open()
        except Busy:
            self.pending = pending + self.pending
            return False
        if db is None:
            return True
        try:
            with db:
                insert = f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * 17)})"
                written = [(t, db.execute(insert, _row(run)).lastrowid) for t, run in pending]
                self._since_prune += len(pending)
                if self._since_prune >= PRUNE_EVERY:
                    db.execute(
                        "DELETE FROM runs WHERE id <= (SELECT max(id) FROM runs) - ?",
                        (self.max_runs,),
                    )
        except sqlite3.Error as exc:
            if _busy(exc):  # rolled back: all of them wait for the next flush
                self.pending = pending + self.pending
                return False
            self._turn_off(exc)
            return True
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
        self._ids.update((t, row_id) for t, row_id in written if row_id is not None)
        if len(self._ids) > KEEP_IDS:
            for ticket in list(self._ids)[: len(self._ids) - KEEP_IDS]:
                del self._ids[ticket]
        return True

    # -- reading ------------------------------------------------------------------------

    def recent(self, path: str | None = None, limit: int = 50) -> list[RecordedRun]:
        """The latest runs (of one file), newest first (the pending ones written first,
        unless another writer holds the file)."""
        self.flush()
        try:
            db = self._open()
        except Busy:
            return []
        return recent(db, path, limit) if db is not None else []


MB = 1024 * 1024


def figures_text(duration: float, cpu: float | None, growth: int | None, change: int | None) -> str:
    """`0.26 s · CPU 0.24 s · peak +58.1 MB · kept +58.1 MB`: what a run took (wall time;
    the kernel's CPU time; how far its memory rose above the start, and what it kept)."""

    def seconds(value: float) -> str:
        return f"{value:.2f} s" if value >= 0.1 else f"{value * 1000:.0f} ms"

    parts = [seconds(duration)]
    if cpu is not None:
        parts.append(f"CPU {seconds(cpu)}")
    if growth is not None:
        parts.append(f"peak {growth / MB:+,.1f} MB")
    if change is not None:
        parts.append(f"kept {change / MB:+,.1f} MB")
    return " · ".join(parts)


def ran_text(outcome: RunOutcome, when: float | None = None) -> str:
    """`14:32:11 · 0.26 s · CPU 0.24 s · peak +58.1 MB · kept +0.0 MB` for a hover."""
    usage = outcome.usage
    at = time.strftime("%H:%M:%S", time.localtime(when if when is not None else time.time()))
    taken = figures_text(
        outcome.duration,
        usage.cpu if usage else None,
        usage.growth if usage else None,
        usage.change if usage else None,
    )
    return f"{at} · {taken}"


def entry(
    path: str,
    piece: tuple[int, int],
    code: str,
    origin: str,
    outcome: RunOutcome,
    results: DocumentResults,
    fix_of: int | None = None,
    model: Asked | None = None,
) -> RecordedRun:
    """What is recorded of one piece's run."""
    usage = outcome.usage
    problem = next((p for p in results.problems if p.kind == "run"), None)
    outputs = []
    for statement in results.statements:
        rich = next((o for o in statement.outputs if o.kind != "text"), None)
        stored = rich.file if rich is not None else None
        shown = rich.text if rich is not None else statement.text
        value = not any(o.printed for o in statement.outputs)  # (a notebook's execute_result)
        outputs.append(
            RecordedOutput(
                statement.first,
                shown[:TEXT_KEPT],
                rich.kind if rich is not None else "value" if value else "text",
                str(stored) if stored is not None else None,
                statement.last if statement.last != statement.first else None,
            )
        )
    return RecordedRun(
        path=path,
        first=piece[0],
        last=piece[1],
        code=code,
        origin=origin,
        status=outcome.status.value,
        started=time.time() - outcome.duration,
        duration=outcome.duration,
        cpu=usage.cpu if usage else None,
        peak=usage.peak if usage else None,
        rss_before=usage.rss_before if usage else None,
        rss_after=usage.rss_after if usage else None,
        outputs=tuple(outputs),
        error=problem.message if problem is not None else (outcome.note or None),
        fix_of=fix_of,
        error_line=problem.first if problem is not None else None,
        model=model,
    )


def _unlinked(folder: Path, *, create: bool = False) -> None:
    """`.runfix/` (made, with `create`), the record and SQLite's files beside it must not be
    links: SQLite opens them by path and follows them."""
    with opened_folder(folder, RUNFIX, create=create):
        path = folder / FILE
        for name in (path, *(Path(f"{path}{s}") for s in ("-wal", "-shm", "-journal"))):
            if name.is_symlink():
                raise LinkRefused(0, f"{name} is a symbolic link; runfix does not follow it")


def _check_schema(db: sqlite3.Connection) -> set[str]:
    """The record's table names; NotARecord if its schema holds what runfix did not make
    (a trigger runs inside runfix's own writes; a view can stand in for a table)."""
    db.execute("PRAGMA trusted_schema=OFF")
    objects = {(kind, name) for kind, name in db.execute("SELECT type, name FROM sqlite_master")}
    tables = {name for kind, name in objects if kind == "table"}
    if tables and "meta" not in tables:
        raise NotARecord(f"another program's database (tables: {', '.join(sorted(tables))})")
    if extra := objects - _OURS:
        shown = ", ".join(f"{kind} {name}" for kind, name in sorted(extra))
        raise NotARecord(f"it holds what runfix did not make: {shown}")
    return tables


def _connect(path: Path, mark: str) -> sqlite3.Connection:
    """A writer's connection to the record at `path`, made if new; NotARecord if the file
    is something else, or a record runfix did not write here (its mark is not `mark`).
    The tables are made inside one immediate transaction, so that writers starting together
    (two servers, `runfix run`) make them once."""
    db = sqlite3.connect(path, timeout=BUSY_SECONDS, check_same_thread=False, isolation_level=None)
    try:
        _check_schema(db)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("BEGIN IMMEDIATE")
        try:
            if not _check_schema(db):
                for statement in _TABLES.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(
                    "INSERT OR IGNORE INTO meta VALUES ('schema', ?), ('version', ?), ('owner', ?)",
                    (SCHEMA, str(VERSION), mark),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.isolation_level = "DEFERRED"  # `with db:` commits each write again
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("owner") != mark:
            raise NotARecord("it was not written by runfix on this machine for this folder")
        if meta.get("schema") == SCHEMA and meta.get("version") == "3":
            _to_version_4(db)
            meta["version"] = str(VERSION)
        if meta.get("schema") != SCHEMA or meta.get("version") != str(VERSION):
            raise NotARecord(f"schema {meta.get('schema')!r} version {meta.get('version')!r}")
    except BaseException:
        db.close()
        raise
    return db


def _to_version_4(db: sqlite3.Connection) -> None:
    """A version 3 record gains the `model` column, in place (its runs are kept)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        if version is not None and version[0] == "3":  # (another writer may have done it)
            db.execute("ALTER TABLE runs ADD COLUMN model TEXT")
            db.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(VERSION),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def open_for_reading(folder: Path) -> sqlite3.Connection | None:
    """A read-only connection to a folder's record (None: there is none); NotARecord or
    sqlite3.DatabaseError if it is not one runfix wrote here."""
    path = folder / FILE
    if not path.is_file():
        return None
    _unlinked(folder)
    db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        _check_schema(db)
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("schema") != SCHEMA:
            raise NotARecord(f"{path} is not a runfix run record")
        if meta.get("owner") != owner_mark(folder):
            raise NotARecord(f"{path} was not written by runfix on this machine for this folder")
    except BaseException:
        db.close()
        raise
    return db


def recent(
    db: sqlite3.Connection, path: str | None, limit: int, only: int | None = None
) -> list[RecordedRun]:
    """The latest `limit` runs (of `path`), newest first; with `only`, that run alone."""
    where, args = ("WHERE path = ?", (path,)) if path else ("", ())
    if only is not None:
        where, args = "WHERE id = ?", (str(only),)
    columns = _COLUMNS
    if "model" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        columns = _COLUMNS.replace(", model", ", NULL")  # a version 3 record, read only
    rows = db.execute(
        f"SELECT id, {columns} FROM runs {where} ORDER BY id DESC LIMIT ?", (*args, limit)
    ).fetchall()
    return [_run(row) for row in rows]


def _outputs(run: RecordedRun) -> str:
    return json.dumps([_compact(o) for o in run.outputs], ensure_ascii=False)


def _row(run: RecordedRun) -> tuple[Any, ...]:
    return (
        run.started, run.path, run.first, run.last, run.code, run.origin, run.status,
        run.duration, run.cpu, run.peak, run.rss_before, run.rss_after, _outputs(run), run.error,
        run.fix_of, run.error_line, json.dumps(run.model.to_json()) if run.model else None,
    )  # fmt: skip


def _compact(output: RecordedOutput) -> dict[str, Any]:
    item: dict[str, Any] = {"line": output.line, "text": output.text}
    if output.kind != "text":
        item["kind"] = output.kind
    if output.file:
        item["file"] = output.file
    if output.last is not None:
        item["last"] = output.last
    return item


def _run(row: Sequence[Any]) -> RecordedRun:
    (
        id_, started, path, first, last, code, origin, status, duration, cpu, peak,
        rss_before, rss_after, outputs, error, fix_of, error_line, model,
    ) = row  # fmt: skip
    try:
        items = json.loads(outputs)
    except ValueError:
        items = []
    return RecordedRun(
        path=path,
        first=first,
        last=last,
        code=code,
        origin=origin,
        status=status,
        started=started,
        duration=duration,
        cpu=cpu,
        peak=peak,
        rss_before=rss_before,
        rss_after=rss_after,
        outputs=tuple(
            RecordedOutput(
                i["line"], i["text"], i.get("kind", "text"), i.get("file"), i.get("last")
            )
            for i in items
            if isinstance(i, dict) and "line" in i and "text" in i
        ),
        error=error,
        fix_of=fix_of,
        error_line=error_line,
        model=Asked.from_json(model),
        id=id_,
    )


def standing(
    runs: Sequence[RecordedRun], lines: Sequence[str], first: int, last: int
) -> list[RecordedRun]:
    """Of `runs` (newest first), those within lines first..last whose code still stands
    there as it ran, a newer run hiding older ones it overlaps; in document order."""
    from lsp_server.text.cells import code_of

    taken: list[RecordedRun] = []
    for run in runs:
        if not (first <= run.first and run.last <= last):
            continue
        if any(t.first <= run.last and run.first <= t.last for t in taken):
            continue
        if code_of(lines, run.first, run.last) == run.code:
            taken.append(run)
    return sorted(taken, key=lambda r: r.first)


def restored(runs: Sequence[RecordedRun], lines: Sequence[str], folder: Path) -> DocumentResults:
    """The results a reopened document shows: of each recorded run (newest first) whose
    code still stands, as it ran, on the same lines, its statements' outputs — marked as
    from an earlier session, with their time; nothing on lines whose text changed."""
    from lsp_server.outputs.bundles import Output
    from lsp_server.outputs.results import DocumentResults, Problem, StatementResult
    from lsp_server.text.positions import strip_eol

    results = DocumentResults()
    for run in standing(runs, lines, 0, len(lines) - 1):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
        ran = f"{when}, before the file was opened · {run.figures}"
        for output in run.outputs:
            last = output.last if output.last is not None else output.line
            if not (run.first <= output.line <= last <= run.last) or output.kind == "notebook":
                continue  # (a notebook cell's outputs as Jupyter saves them: not a statement's)
            stored = stored_output(folder, output.file)
            image = stored if output.kind in ("image", "figure", "svg") else None
            shown = Output(
                output.text if output.text.endswith("\n") else output.text + "\n",
                image=image,
                file=stored,
                kind="text" if output.kind == "value" else output.kind,
            )
            source = tuple(strip_eol(line) for line in lines[output.line : last + 1])
            results.statements.append(
                StatementResult(output.line, last, (shown,), source, ran=ran, earlier=True)
            )
        line = run.error_line
        placed = line is not None and run.first <= line <= run.last
        if run.error and run.status == "error" and line is not None and placed:
            results.problems.append(
                Problem(
                    first=line,
                    last=line,
                    message=run.error,
                    severity="error",
                    text=run.error,
                    source=(strip_eol(lines[line]),),
                    piece=(run.first, run.last),
                    ran=ran,
                )
            )
    results.statements.sort(key=lambda s: s.first)
    return results


def record_folder(start: Path) -> Path | None:
    """The nearest folder at or above `start` that has a run record."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if (candidate / FILE).is_file():
            return candidate
    return None
