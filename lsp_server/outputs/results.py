"""What a run left on a document: results per statement and problems per line.

Plain data, no LSP types, so that the CLI and the conversions share it. Lines
are 0-based. Every item remembers the text of its lines when it was made:
after an edit it is kept only where that text still stands, so a result is
moved with its statement or dropped, never shown on the wrong line.
"""

from __future__ import annotations

import bisect
import itertools
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TypeVar

from executor.events import Display, Error, Frame, RunOutcome, RunStatus, Span, Stream, Value
from lsp_server.outputs.bundles import Output, OutputFiles, colored_html, render
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.positions import strip_eol

SUMMARY_WIDTH = 60


STAMPS = itertools.count(1)
"""The order things happen in: results made, code changed or run again."""


@dataclass(frozen=True)
class StatementResult:
    """What one statement (lines `first`..`last`) showed when it last ran."""

    first: int
    last: int
    outputs: tuple[Output, ...]
    source: tuple[str, ...]
    truncated: int = 0
    ran: str = ""
    """When its run was and what it took (`14:32:11 · 0.26 s · CPU 0.24 s · peak +58.1 MB`)."""
    earlier: bool = False
    """Restored from the run record when the document was opened (not run since)."""
    made: int = field(default_factory=lambda: next(STAMPS), compare=False)
    """When it was made, in the order of `STAMPS` (what staleness is judged by)."""

    # Computed once per result: every publication of a document's diagnostics reads them.
    @cached_property
    def text(self) -> str:
        return "".join(o.text for o in self.outputs)

    @cached_property
    def summary(self) -> str:
        """The first line of its output, or of its first rich output (a plot, a table):
        `plt.plot(…)` is summarised by its figure, not by the list of lines it returned."""
        rich = next((o for o in self.outputs if o.kind != "text"), None)
        line = summarize(rich.text if rich is not None else self.text)
        marks = (" … (truncated)" if self.truncated else "") + (
            " (earlier session)" if self.earlier else ""
        )
        return line + marks


@dataclass(frozen=True)
class Related:
    line: int
    name: str
    path: str | None = None
    """None: this document; else another file."""


@dataclass(frozen=True)
class Problem:
    """An error or a warning on lines of a document, with its full text for hover."""

    first: int
    last: int
    message: str
    severity: str  # "error" | "warning"
    text: str = ""
    """The full traceback (or note), for hover."""
    column: int | None = None
    end_column: int | None = None
    """Code-point columns on `first`/`last` (SyntaxError), else the whole line."""
    related: tuple[Related, ...] = ()
    source: tuple[str, ...] = ()
    kind: str = "run"
    """run: from a run (cleared when its lines run again) | safety: a scan finding |
    trust: nothing ran, the folder is not trusted (dropped once it is decided)."""
    piece: tuple[int, int] | None = None
    """The lines that ran (0-based, inclusive), for fixes that re-run or rewrite them."""
    ran: str = ""
    """When its run was and what it took."""
    made: int = field(default_factory=lambda: next(STAMPS), compare=False)


@dataclass(frozen=True)
class Front:
    """Code at `line` changed (edited, or run again) at `stamp`: a result further down
    that was made before it is stale."""

    line: int
    stamp: int
    reason: str
    """`the cell at line 3 ran again at 14:32:10`, `line 5 was edited at 14:33:02`."""
    names: frozenset[str] | None = None
    """The names the changed cell defined before the change (what it defines now is read
    from the document's map): results in other cells are stale only if they depend on one.
    None: not known (no map): every result below is stale."""


_Placed = TypeVar("_Placed", "StatementResult", "Problem")


class DocumentResults:
    """All that runs left on one document: statement results, problems, edit fronts.

    The statements are sorted and never overlap. An edit that adds or removes lines moves
    every statement below it: rather than a new object for each (a hundred milliseconds
    above ten thousand results), those from `_pivot` on are `_offset` lines further down
    than their objects say until something reads them all (`statements`). A next edit near
    the last moves the pivot only that far: typing and pressing Enter cost O(log n) plus the
    results between one edit and the next."""

    def __init__(
        self,
        statements: list[StatementResult] | None = None,
        problems: list[Problem] | None = None,
        fronts: tuple[Front, ...] = (),
    ) -> None:
        self._items: list[StatementResult] = list(statements or [])
        self._pivot = len(self._items)
        self._offset = 0
        self.problems: list[Problem] = list(problems or [])
        self.fronts = fronts
        """Where the code last changed, lines ascending: each new change drops those at or
        below its line in its cell (all below it, without a map), which it supersedes.
        Replaced, never changed in place."""
        self.map: DocumentMap | None = None
        """The document's cells and their dataflow (`ResultStore` keeps it): with it, a
        change makes stale only the results that depend on it."""

    @property
    def statements(self) -> list[StatementResult]:
        """Every statement where it is now, sorted. The list is the store's own: an edit makes
        a new one, so a list read before keeps its meaning (`prepared.Memo` relies on it)."""
        self._move_pivot(len(self._items))
        return self._items

    @statements.setter
    def statements(self, items: list[StatementResult]) -> None:
        self._items, self._pivot, self._offset = items, len(items), 0

    def count(self) -> int:
        return len(self._items)

    def item(self, index: int) -> StatementResult:
        """The statement at `index`, where it is now (without settling the others)."""
        item = self._items[index]
        return _shifted(item, self._offset) if index >= self._pivot and self._offset else item

    def placed(self) -> Iterator[tuple[int, int, StatementResult]]:
        """Each statement with its lines now (first, last), without settling the others:
        what a publication of every result reads after an edit."""
        items, pivot, offset = self._items, self._pivot, self._offset
        for item in items[:pivot]:
            yield item.first, item.last, item
        for item in items[pivot:]:
            yield item.first + offset, item.last + offset, item

    def stale_at(self, first: int, made: int) -> Front | None:
        """`stale` for a result made at `made` that starts at line `first` now: a change
        above it, made after it, in its own cell or in a cell it reads from (transitively)."""
        fronts = self.fronts
        at = bisect.bisect_left(fronts, first, key=lambda f: f.line)
        flow = self.map
        cell = flow.index(first) if flow is not None else 0
        for front in reversed(fronts[:at]):  # the nearest first
            if front.stamp <= made:
                continue
            if flow is None or front.names is None:
                return front
            where = flow.index(front.line)
            if where == cell:
                return front
            name = flow.depends(cell, front.names, where)
            if name == "?":
                return front
            if name == "*":
                why = (
                    f"{front.reason}; this cell may depend on it (`exec`, `import *`, "
                    "`globals()`: what is read or bound cannot be known)"
                )
                return replace(front, reason=why)
            if name is not None:
                line = flow.bounds(where)[0] + 1
                why = f"{front.reason}; this cell depends on `{name}` from the cell at line {line}"
                return replace(front, reason=why)
        return None

    def _first(self, index: int) -> int:
        return self._items[index].first + (self._offset if index >= self._pivot else 0)

    def _last(self, index: int) -> int:
        return self._items[index].last + (self._offset if index >= self._pivot else 0)

    def after(self, line: int) -> int:
        """The index of the first statement that starts below `line`."""
        lo, hi = 0, len(self._items)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._first(mid) <= line:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def reaching(self, line: int) -> int:
        """The index of the first statement that ends at or below `line`."""
        lo, hi = 0, len(self._items)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._last(mid) < line:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _move_pivot(self, to: int) -> None:
        """Statements before `to` where they are; those from `to` on `_offset` lines off."""
        items, offset, pivot = self._items, self._offset, self._pivot
        if offset and to > pivot:
            items[pivot:to] = [_shifted(s, offset) for s in items[pivot:to]]
        elif offset and to < pivot:
            items[to:pivot] = [_shifted(s, -offset) for s in items[to:pivot]]
        self._pivot = to
        if to == len(items):
            self._offset = 0

    def splice(self, lo: int, hi: int, kept: list[StatementResult], delta: int) -> None:
        """Statements `lo`..`hi` (exclusive) become `kept` (where they are now), and every
        one after them moves `delta` lines."""
        self._move_pivot(hi)
        # A new list, never one changed in place: a list read before (a memo's input) keeps
        # meaning what it meant (one pointer copy per statement, no object made).
        self._items = [*self._items[:lo], *kept, *self._items[hi:]]
        self._pivot = lo + len(kept)
        self._offset += delta
        if self._pivot == len(self._items):
            self._offset = 0

    def stale(self, item: StatementResult | Problem) -> Front | None:
        """The change above `item` made after it, if any: then its result is stale."""
        return self.stale_at(item.first, item.made)

    def changed(self, line: int, reason: str, names: frozenset[str] | None = None) -> None:
        """Code at `line` changed now: results below it made before now are stale (with
        `names`, those of its cell and of the cells that depend on it); the fronts it
        supersedes (below it, in its cell) are dropped, their names kept in the new one."""
        fronts, flow = self.fronts, self.map
        at = bisect.bisect_left(fronts, line, key=lambda f: f.line)
        if flow is None or names is None:
            self.fronts = (*fronts[:at], Front(line, next(STAMPS), reason, None))
            return
        cell = flow.index(line)
        end = at
        known: frozenset[str] | None = names
        while end < len(fronts) and flow.index(fronts[end].line) == cell:
            below = fronts[end].names
            known = None if known is None or below is None else known | below
            end += 1
        if known is None:  # a front below it knew no names: neither does this one
            self.fronts = (*fronts[:at], Front(line, next(STAMPS), reason, None))
            return
        self.fronts = (*fronts[:at], Front(line, next(STAMPS), reason, known), *fronts[end:])

    def statement_at(self, line: int) -> StatementResult | None:
        at = self.after(line) - 1
        return self.item(at) if at >= 0 and self._last(at) >= line else None

    def problem_at(self, line: int) -> Problem | None:
        return next(
            (p for p in self.problems if p.first <= line <= p.last and p.kind == "run"), None
        )

    def safety_in(self, first: int, last: int) -> list[Problem]:
        return [p for p in self.problems if p.kind == "safety" and first <= p.first <= last]


def _shifted(item: _Placed, lines: int) -> _Placed:
    """`item` `lines` further down: a copy that keeps what it computed (its text, summary)."""
    moved = object.__new__(type(item))
    moved.__dict__.update(item.__dict__, first=item.first + lines, last=item.last + lines)
    return moved


# -- building results from a run ------------------------------------------------------


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def terminal_text(text: str) -> str:
    """What a terminal would show: each `\r` rewrites its line (a progress bar ends at its last
    frame), colour and cursor codes are dropped, other control characters too."""
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    if "\r" in text:
        lines = []
        for line in text.split("\n"):
            shown = ""
            for part in line.split("\r"):
                shown = part + shown[len(part) :]
            lines.append(shown)
        text = "\n".join(lines)
    return _CONTROL.sub("", text)


def summarize(text: str, width: int = SUMMARY_WIDTH) -> str:
    """One line for an inlay hint: the first line of output, shortened."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = lines[0]
    if re.fullmatch(r"-?\d+\.\d{6,}(e[-+]?\d+)?", first):
        first = first[: first.index(".") + 5] + "…"
    more = len(lines) > 1
    if len(first) > width:
        return first[: width - 1] + "…"
    return first + (" …" if more else "")


def _lines(source: Sequence[str], first: int, last: int) -> tuple[str, ...]:
    return tuple(strip_eol(line) for line in source[first : last + 1])


def build(
    outcome: RunOutcome,
    *,
    path: str,
    lines: Sequence[str],
    fallback_line: int,
    folder: Path | None,
    piece: tuple[int, int] | None = None,
    files: OutputFiles | None = None,
    ran: str = "",
) -> DocumentResults:
    """Attribute a run's events to statements and problems of the document `path`; rich
    outputs are stored in `files` (by default the folder's, with the default limits)."""
    if files is None and folder is not None:
        files = OutputFiles(folder)
    by_span: dict[Span | None, list[Output]] = {}
    error: Error | None = None
    for event in outcome.events:
        if isinstance(event, Stream):
            text = Output(terminal_text(event.text), colored=colored_html(event.text))
            by_span.setdefault(event.span, []).append(text)
        elif isinstance(event, (Value, Display)):
            about = event.about if isinstance(event, Value) else None
            by_span.setdefault(event.span, []).append(render(event.data, about, files))
        elif isinstance(event, Error) and error is None:
            error = event
    results = DocumentResults()
    last_line = max(len(lines) - 1, 0)
    for span, outputs in by_span.items():
        first = min(span.first - 1 if span else fallback_line, last_line)
        last = min(span.last - 1 if span else fallback_line, last_line)
        results.statements.append(
            StatementResult(first, last, tuple(outputs), _lines(lines, first, last), ran=ran)
        )
    results.statements.sort(key=lambda s: s.first)
    if outcome.truncated and results.statements:
        results.statements[-1] = replace(results.statements[-1], truncated=outcome.truncated)
    if error is not None:
        problem = _problem_for_error(error, path, lines, fallback_line)
        results.problems.append(replace(problem, piece=piece, ran=ran))
    elif outcome.status in (RunStatus.TIMEOUT, RunStatus.DIED):
        line = min(outcome.span.first - 1 if outcome.span else fallback_line, last_line)
        severity = "error" if outcome.state_lost else "warning"
        results.problems.append(_note(line, outcome.note, severity, lines))
    elif outcome.state_lost and outcome.note:
        line = min(outcome.span.first - 1 if outcome.span else fallback_line, last_line)
        results.problems.append(_note(line, outcome.note, "warning", lines))
    return results


def _note(line: int, note: str, severity: str, lines: Sequence[str]) -> Problem:
    return Problem(line, line, note, severity, note, source=_lines(lines, line, line))


RELATED_LIMIT = 20
"""Call sites kept in a diagnostic's related information (the first and last halves)."""


def _call_site(frame: Frame) -> str:
    where = "called from here" if frame.name == "<module>" else f"called from {frame.name}"
    return f"{where} (and {frame.repeats:,} more times)" if frame.repeats else where


def _call_sites(frames: Sequence[Frame]) -> list[Related]:
    related = [Related(f.line - 1, _call_site(f)) for f in frames]
    if len(related) <= RELATED_LIMIT:
        return related
    half = RELATED_LIMIT // 2
    return related[:half] + related[-half:]


def _problem_for_error(error: Error, path: str, lines: Sequence[str], fallback: int) -> Problem:
    last_line = max(len(lines) - 1, 0)
    ours = [f for f in error.frames if f.filename == path]
    related: list[Related] = []
    column = end_column = None
    if ours:
        line = ours[-1].line - 1
        end = line
        related = _call_sites(ours[:-1])
        if ours[-1].repeats:  # deep recursion: the raising line called itself over and over
            related.append(Related(line, _call_site(ours[-1])))
        below = error.frames[error.frames.index(ours[-1]) + 1 :]
        deeper = [f for f in below if Path(f.filename).is_file()]
        if deeper:
            inner = deeper[-1]
            related.append(Related(inner.line - 1, f"raised in {inner.name}", inner.filename))
    elif error.span is not None:
        line, end = error.span.first - 1, error.span.last - 1
        if error.column is not None:
            column = max(error.column - 1, 0)
            same_line = (error.end_line or 0) - 1 == line
            if same_line and error.end_column and error.end_column > error.column:
                end_column = error.end_column - 1
            end = line
    else:
        line = end = fallback
    line, end = min(line, last_line), min(end, last_line)
    return Problem(
        first=line,
        last=end,
        message=error.message,
        severity="error",
        text=error.text,
        column=column,
        end_column=end_column,
        related=tuple(related),
        source=_lines(lines, line, end),
    )


# -- keeping results on their lines as the document changes --------------------------


@dataclass(frozen=True)
class LineChange:
    """Lines first..last (0-based, inclusive) were replaced by text with `newlines` line breaks."""

    first: int
    last: int
    newlines: int
    text: str = field(default="", compare=False)
    """What was typed (for telling an edit of code from one of a comment or blank line)."""
    deleted: bool = field(default=False, compare=False)
    """It replaced some text (its range was not empty)."""
    column: int = field(default=-1, compare=False)
    """Where on its line an edit of one line began (-1: not known, or several lines)."""

    @property
    def delta(self) -> int:
        return self.newlines - (self.last - self.first)


def _candidates(firsts: list[int], height: int, change: LineChange) -> list[int]:
    out: list[int] = []
    for first in firsts:
        if first + height < change.first:
            options = [first]
        elif first > change.last:
            options = [first + change.delta]
        else:  # touched: it stayed, or moved down/up; the text decides
            options = [first, first + change.delta]
        out.extend(o for o in options if o not in out and o >= 0)
    return out


def _shift_line(line: int, changes: Sequence[LineChange]) -> int:
    """Where a line went, without checking its text (for call sites in related info)."""
    for change in changes:
        if line > change.last:
            line += change.delta
    return line


def _new_first(
    first: int,
    last: int,
    source: tuple[str, ...],
    changes: Sequence[LineChange],
    lines: Sequence[str],
) -> int | None:
    """Where lines first..last went through `changes`, if their text still stands there."""
    height = last - first
    firsts = [first]
    for change in changes:
        firsts = _candidates(firsts, height, change)
    return next((f for f in firsts if _lines(lines, f, f + height) == source), None)


def _move_statement(
    item: StatementResult, changes: Sequence[LineChange], lines: Sequence[str]
) -> StatementResult | None:
    first = _new_first(item.first, item.last, item.source, changes, lines)
    return (
        None if first is None else replace(item, first=first, last=first + item.last - item.first)
    )


def _move_problem(
    item: Problem, changes: Sequence[LineChange], lines: Sequence[str]
) -> Problem | None:
    first = _new_first(item.first, item.last, item.source, changes, lines)
    if first is None:
        return None
    related = tuple(
        r if r.path else replace(r, line=_shift_line(r.line, changes)) for r in item.related
    )
    piece = item.piece and (
        _shift_line(item.piece[0], changes),
        _shift_line(item.piece[1], changes),
    )
    return replace(
        item, first=first, last=first + item.last - item.first, related=related, piece=piece
    )


def _untouched_shift(first: int, last: int, changes: Sequence[LineChange]) -> int | None:
    """How far lines first..last moved through changes that all left them alone (their
    text is then what it was); None when a change touched them."""
    shift = 0
    for change in changes:
        if last + shift < change.first:
            continue
        if first + shift > change.last:
            shift += change.delta
            continue
        return None
    return shift


def _edit_items(
    items: list[_Placed],
    changes: Sequence[LineChange],
    lines: Sequence[str],
    move: Callable[[_Placed, Sequence[LineChange], Sequence[str]], _Placed | None],
) -> tuple[list[_Placed], bool]:
    """Items through `changes`: untouched ones kept or shifted by arithmetic, only touched
    ones checked against the text; whether any moved or was dropped."""
    out: list[_Placed] = []
    changed = False
    for item in items:
        shift = _untouched_shift(item.first, item.last, changes)
        if shift == 0:
            out.append(item)
            continue
        if shift is not None:
            out.append(_shifted(item, shift))
            changed = True
        elif (moved := move(item, changes, lines)) is None:
            changed = True
        else:
            out.append(moved)
            changed = changed or moved != item
    out.sort(key=lambda i: i.first)
    return out, changed


def _edit_statements(
    results: DocumentResults, changes: Sequence[LineChange], lines: Sequence[str]
) -> bool:
    """Statements through `changes`; whether any moved or was dropped. One change (typing, an
    Enter, a paste) checks only the statements it touched against the text, and moves those
    below it by arithmetic on the document's offset, not one by one."""
    if len(changes) != 1:
        statements, moved = _edit_items(results.statements, changes, lines, _move_statement)
        results.statements = statements
        return moved
    change = changes[0]
    lo, hi = results.reaching(change.first), results.after(change.last)
    touched = [results.item(i) for i in range(lo, hi)]
    kept = [m for m in (_move_statement(s, changes, lines) for s in touched) if m is not None]
    if kept == touched and (change.delta == 0 or hi == results.count()):
        return False
    results.splice(lo, hi, kept, change.delta)
    return True


def _replace_overlapped(
    old: list[StatementResult], new: list[StatementResult]
) -> list[StatementResult]:
    """`old` without the statements `new` overlaps, plus `new`, sorted (both are sorted and
    free of overlaps: one pass over each, not one pass over `old` per new statement)."""
    new = sorted(new, key=lambda s: s.first)
    if any(a.last >= b.first for a, b in itertools.pairwise(new)):  # not from one run: one by one
        out = list(old)
        for s in new:
            out = [x for x in out if x.last < s.first or x.first > s.last]
            out.append(s)
        return sorted(out, key=lambda s: s.first)
    kept: list[StatementResult] = []
    j = 0
    for x in old:
        while j < len(new) and new[j].last < x.first:
            j += 1
        if j == len(new) or new[j].first > x.last:
            kept.append(x)
    return sorted([*kept, *new], key=lambda s: s.first)


class ResultStore:
    """Results per document URI, kept on their lines across edits."""

    _LOG = 1000  # changes remembered per document, for runs that finish after edits
    _RAN = 200  # pieces run remembered per document (what a value's hover asks of)

    def __init__(self) -> None:
        self._docs: dict[str, DocumentResults] = {}
        self._log: dict[str, list[tuple[int, LineChange, bool]]] = {}
        """Each document's changes: (version, the change, whether it touched code)."""
        self._forgotten: dict[str, int] = {}  # the newest version whose changes left the log
        self._ran: dict[str, list[tuple[int, int, int]]] = {}
        """Each document's latest pieces run: (version, first, last), newest last."""
        self._maps: dict[str, DocumentMap] = {}
        """Each document's cells and dataflow, from its text when results came, then moved
        by its edits."""

    def map(self, uri: str) -> DocumentMap | None:
        """The document's dataflow map as its text is now (None: it has had no results)."""
        return self._maps.get(uri)

    def get(self, uri: str) -> DocumentResults:
        return self._docs.get(uri) or DocumentResults()

    def has(self, uri: str) -> bool:
        results = self._docs.get(uri)
        return bool(results and (results.count() or results.problems))

    def clear(
        self, uri: str, first: int | None = None, last: int | None = None, everything: bool = False
    ) -> None:
        """Drop results on lines first..last (all when no lines are given).

        Safety findings stay when lines run again: they describe the code, not a run."""
        results = self._docs.get(uri)
        if results is None:
            return
        if first is None or last is None:
            first, last = 0, sys.maxsize
        statements = results.statements  # sorted, never overlapping: the touched ones are a slice
        lo = bisect.bisect_left(statements, first, key=lambda s: s.last)
        hi = bisect.bisect_right(statements, last, key=lambda s: s.first)
        if lo < hi:
            results.statements = [*statements[:lo], *statements[hi:]]
        results.problems = [
            p
            for p in results.problems
            if p.last < first or p.first > last or (p.kind == "safety" and not everything)
        ]
        if not results.statements and not results.problems:
            self._docs.pop(uri, None)

    def drop_kind(self, uri: str, kind: str) -> bool:
        """Drop the document's problems of one kind (`trust`, once the folder is decided)."""
        results = self._docs.get(uri)
        if results is None or not any(p.kind == kind for p in results.problems):
            return False
        results.problems = [p for p in results.problems if p.kind != kind]
        return True

    def clear_made_at(self, uri: str, made_at: int, first: int, last: int) -> None:
        """Lines first..last of version `made_at` run again: drop their results, wherever
        edits moved them; results further down made before now become stale."""
        ran = self._ran.setdefault(uri, [])
        ran.append((made_at, first, last))
        del ran[: -self._RAN]
        changes = self._changes_since(uri, made_at)
        first, last = _shift_line(first, changes), _shift_line(last, changes)
        self.clear(uri, first, last)
        results = self._docs.get(uri)
        if results is not None and results.statements and results.statements[-1].first > last:
            reason = f"the code at line {first + 1} ran again at {_now()}"
            results.changed(first, reason, frozenset())  # what it defines now, from the map

    def edited_above(self, uri: str, line: int) -> str | None:
        """Why what line `line` made when it last ran may be stale: code above it was edited
        since (None: not edited, or no run here reached it). For lines that made no result
        (an assignment), which `DocumentResults.stale` cannot tell of."""
        log = self._log.get(uri, [])
        for version, first, last in reversed(self._ran.get(uri, [])):
            if version < self._forgotten.get(uri, -1):
                return None
            since = [(c, code) for v, c, code in log if v > version]
            at, touched = line, []
            for change, code in reversed(since):  # where the line stood before each change
                if at > change.last + change.delta:
                    at -= change.delta
                elif at >= change.first:
                    at = change.first
                touched.append((change, code, at))
            if not first <= at <= last:
                continue  # that run did not reach this line
            for change, code, before in reversed(touched):
                if code and change.first < before:
                    return f"line {change.first + 1} was edited since it ran"
            return None
        return None

    def _changes_since(self, uri: str, version: int) -> list[LineChange]:
        return [c for v, c, _ in self._log.get(uri, []) if v > version]

    def reset(self, uri: str, version: int) -> None:
        """The whole text was replaced: drop everything, and results of runs still going."""
        self._docs.pop(uri, None)
        self._log.pop(uri, None)
        self._ran.pop(uri, None)
        self._maps.pop(uri, None)
        self._forgotten[uri] = version

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)
        self._log.pop(uri, None)
        self._ran.pop(uri, None)
        self._maps.pop(uri, None)
        self._forgotten.pop(uri, None)

    def edit(
        self, uri: str, version: int, changes: Sequence[LineChange], lines: Sequence[str]
    ) -> bool:
        """Move results through edits; True when anything moved or was dropped."""
        log = self._log.setdefault(uri, [])
        log.extend((version, c, _edits_code(c, lines)) for c in changes)
        if len(log) > self._LOG:
            self._forgotten[uri] = log[-self._LOG - 1][0]
            del log[: -self._LOG]
        flow = self._maps.get(uri)
        results = self._docs.get(uri)
        names: list[frozenset[str] | None] = []
        if flow is not None:
            for change in changes:  # what the cells edited defined before the edit
                names.append(_defined_before(flow, results, change))
                flow.edited(change.first, change.last, change.text, change.delta, lines)
        if results is None:
            return False
        moved = _edit_statements(results, changes, lines)
        problems, moved_problems = _edit_items(results.problems, changes, lines, _move_problem)
        results.problems = problems
        stale = _edit_fronts(results, changes, lines, names)
        return moved or moved_problems or stale

    def add(self, uri: str, made_at: int, new: DocumentResults, lines: Sequence[str]) -> None:
        """Add results made from document version `made_at`, moved through later edits."""
        if made_at < self._forgotten.get(uri, -1):
            return  # edits since then were forgotten: nothing can be placed safely
        changes = self._changes_since(uri, made_at)
        results = self._docs.setdefault(uri, DocumentResults())
        flow = self._maps.get(uri)
        if flow is None:
            flow = self._maps[uri] = DocumentMap(lines)
        elif flow.lines is not lines:
            flow.reset(lines)
        results.map = flow
        placed = [m for m in (_move_statement(s, changes, lines) for s in new.statements) if m]
        results.statements = _replace_overlapped(results.statements, placed)
        for p in new.problems:
            moved_p = _move_problem(p, changes, lines)
            if moved_p is not None and moved_p not in results.problems:
                results.problems.append(moved_p)
        results.statements.sort(key=lambda s: s.first)
        results.problems.sort(key=lambda p: p.first)


def _now() -> str:
    return time.strftime("%H:%M:%S")


def _defined_before(
    flow: DocumentMap, results: DocumentResults | None, change: LineChange
) -> frozenset[str] | None:
    """What the cell `change` edits defined before it (its map not yet moved by it). Not
    read when it cannot matter: no result below the change, a document of one cell, or a
    cell a front already holds the names of (typing on: the front's names are those from
    before the first keystroke)."""
    if results is None or not results.count():
        return None
    if change.first >= results.item(results.count() - 1).first:
        return None  # no result below it: no front comes of it
    if len(flow) == 1:
        return frozenset()
    cell = flow.index(change.first)
    if not results.fronts:
        return flow.defined(cell)
    for front in results.fronts:
        if front.names is not None and flow.index(front.line) == cell:
            return frozenset()
    return flow.defined(cell)


def _edit_fronts(
    results: DocumentResults,
    changes: Sequence[LineChange],
    lines: Sequence[str],
    names: Sequence[frozenset[str] | None] = (),
) -> bool:
    """Move the fronts through `changes`, and add one where code was edited above a result
    (typing in a comment or a blank line changes no state), with what its cell defined
    before (`names`, one per change). True when a result became stale."""
    fronts = results.fronts
    if fronts:
        moved = []
        for front in fronts:
            line = front.line
            for change in changes:
                if line > change.last:
                    line += change.delta
                elif line >= change.first:
                    line = change.first
            moved.append(front if line == front.line else replace(front, line=line))
        results.fronts = tuple(moved)
    count = results.count()
    last_result = results.item(count - 1).first if count else -1
    stale = False
    for n, change in enumerate(changes):
        if change.first < last_result and _edits_code(change, lines):
            below = results.after(change.first)
            was = below < count and results.stale(results.item(below))
            before = names[n] if n < len(names) else None
            results.changed(change.first, f"line {change.first + 1} was edited at {_now()}", before)
            stale = stale or not was  # newly stale: worth saying now
    return stale


def _edits_code(change: LineChange, lines: Sequence[str]) -> bool:
    """The change wrote or removed something on a line of code (typing in a comment, adding
    blank lines or a comment above, changes no state)."""
    if change.first == change.last and "\n" not in change.text and change.first < len(lines):
        comment = comment_start(lines[change.first])
        if comment is not None and 0 <= comment < change.column:
            return False  # typed in a trailing comment: `x = 1  # note`
    for i, typed in enumerate(change.text.split("\n")):
        touched = bool(typed.strip()) or (i == 0 and change.deleted)
        line = change.first + i
        if touched and line < len(lines) and _is_code(lines[line]):
            return True
    return False


_QUOTES = ('"""', "'''", '"', "'")


def comment_start(line: str) -> int | None:
    """Where a line's comment begins (outside its strings), in UTF-16 code units as LSP
    counts columns; None: no comment, or a string left open (its end is on another line)."""
    quote: str | None = None
    index = 0
    while index < len(line):
        if quote is None:
            if line[index] == "#":
                return len(line[:index].encode("utf-16-le")) // 2
            quote = next((q for q in _QUOTES if line.startswith(q, index)), None)
            index += len(quote) if quote is not None else 1
        elif line[index] == "\\":
            index += 2
        elif line.startswith(quote, index):
            index += len(quote)
            quote = None
        else:
            index += 1
    return None


def _is_code(line: str) -> bool:
    text = line.strip()
    return bool(text) and not text.startswith("#")


def line_change(
    start_line: int, end_line: int, text: str, deleted: bool = False, column: int = -1
) -> LineChange:
    return LineChange(start_line, end_line, text.count("\n"), text, deleted, column)
