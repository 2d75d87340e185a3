"""What a run left on a document: results per statement and problems per line.

Plain data, no LSP types, so that the CLI and the conversions share it, and `build`,
which makes them from a run's events. Lines are 0-based. Every item remembers the text
of its lines when it was made: after an edit `store.ResultStore` keeps it only where
that text still stands, so a result is moved with its statement or dropped, never shown
on the wrong line.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
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


Placed = TypeVar("Placed", "StatementResult", "Problem")


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
        """The document's cells and their dataflow (`store.ResultStore` keeps it): with it, a
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

    def lines(self, first: int, last: int, to: int) -> DocumentResults:
        """The statements and problems wholly on lines first..last, as if those lines stood
        from line `to`: the same results, made when they were (a notebook's lines a split
        or a join took to another cell show there again)."""
        by = to - first

        def moved(p: Problem) -> Problem:
            related = tuple(
                replace(r, line=r.line + by) if r.path is None else r for r in p.related
            )
            piece = (p.piece[0] + by, p.piece[1] + by) if p.piece is not None else None
            return replace(p, first=p.first + by, last=p.last + by, related=related, piece=piece)

        on = (self.item(i) for i in range(self.reaching(first), self.after(last)))
        return DocumentResults(
            [shifted(s, by) for s in on if first <= s.first and s.last <= last],
            [moved(p) for p in self.problems if first <= p.first and p.last <= last],
        )

    def item(self, index: int) -> StatementResult:
        """The statement at `index`, where it is now (without settling the others)."""
        item = self._items[index]
        return shifted(item, self._offset) if index >= self._pivot and self._offset else item

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
            items[pivot:to] = [shifted(s, offset) for s in items[pivot:to]]
        elif offset and to < pivot:
            items[to:pivot] = [shifted(s, -offset) for s in items[to:pivot]]
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


def shifted(item: Placed, lines: int) -> Placed:
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


def source_lines(source: Sequence[str], first: int, last: int) -> tuple[str, ...]:
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
            text = Output(terminal_text(event.text), colored=colored_html(event.text), printed=True)
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
            StatementResult(first, last, tuple(outputs), source_lines(lines, first, last), ran=ran)
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
    return Problem(line, line, note, severity, note, source=source_lines(lines, line, line))


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
        source=source_lines(lines, line, end),
    )
