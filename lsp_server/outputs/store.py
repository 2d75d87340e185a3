"""Results kept on their lines as the document changes: the store of every open
document's results, moved through each edit (`LineChange`) or dropped where their text
changed, and marked stale where code above them changed or ran again."""

from __future__ import annotations

import bisect
import functools
import itertools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from lsp_server.outputs.results import (
    DocumentResults,
    Placed,
    Problem,
    StatementResult,
    shifted,
    source_lines,
)
from lsp_server.text.dataflow import DocumentMap


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
    moves: tuple[tuple[int, int, int], ...] = field(default=(), compare=False)
    """Blocks of lines the change carried elsewhere (a notebook's cells moved): each its
    first and last line before the change and its first line after it."""

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
        else:  # touched: it stayed, moved down/up, or was carried; the text decides
            options = [first, first + change.delta]
            options += [first + to - a for a, b, to in change.moves if a <= first <= b - height]
        out.extend(o for o in options if o not in out and o >= 0)
    return out


def line_through(line: int, changes: Sequence[LineChange]) -> int:
    """Where a line went, without checking its text (for call sites in related info)."""
    for change in changes:
        carried = next((to - a for a, b, to in change.moves if a <= line <= b), None)
        if carried is not None:
            line += carried
        elif line > change.last:
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
    return next((f for f in firsts if source_lines(lines, f, f + height) == source), None)


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
        r if r.path else replace(r, line=line_through(r.line, changes)) for r in item.related
    )
    piece = item.piece and (
        line_through(item.piece[0], changes),
        line_through(item.piece[1], changes),
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
    items: list[Placed],
    changes: Sequence[LineChange],
    lines: Sequence[str],
    move: Callable[[Placed, Sequence[LineChange], Sequence[str]], Placed | None],
) -> tuple[list[Placed], bool]:
    """Items through `changes`: untouched ones kept or shifted by arithmetic, only touched
    ones checked against the text; whether any moved or was dropped."""
    out: list[Placed] = []
    changed = False
    for item in items:
        shift = _untouched_shift(item.first, item.last, changes)
        if shift == 0:
            out.append(item)
            continue
        if shift is not None:
            out.append(shifted(item, shift))
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
    if change.moves:  # cells carried past each other: their order changed
        kept.sort(key=lambda s: s.first)
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


def _touched(problem: Problem, first: int, last: int) -> bool:
    """Whether lines first..last running again replaces `problem`: it is on them, or a run
    of them made it (an error raised in another cell's function they called)."""
    if not (problem.last < first or problem.first > last):
        return True
    piece = problem.piece if problem.kind == "run" else None
    return piece is not None and not (piece[1] < first or piece[0] > last)


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
        self._not_python: set[str] = set()
        """Documents of another language: their maps never parse them (`DocumentMap.python`)."""
        self.line_name: Callable[[str, int], str] = lambda uri, line: f"line {line + 1}"
        """How a stale result's reason names a line (`Editor.line_name`: a notebook's are
        "cell 4, line 2"; the desk sets it)."""

    def not_python(self, uri: str) -> None:
        """The document is in another language than Python (as it opens)."""
        self._not_python.add(uri)

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
        """Drop results on lines first..last (all when no lines are given), and the errors
        the runs of those lines made elsewhere (in a function of another cell they called).

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
            if not _touched(p, first, last) or (p.kind == "safety" and not everything)
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

    def drop_problems(self, uri: str, gone: Callable[[Problem], bool]) -> bool:
        """Drop the document's problems `gone` says go (a test run's, of the tests it ran)."""
        results = self._docs.get(uri)
        if results is None or not any(gone(p) for p in results.problems):
            return False
        results.problems = [p for p in results.problems if not gone(p)]
        return True

    def clear_made_at(self, uri: str, made_at: int, first: int, last: int) -> None:
        """Lines first..last of version `made_at` run again: drop their results, wherever
        edits moved them; results further down made before now become stale."""
        ran = self._ran.setdefault(uri, [])
        ran.append((made_at, first, last))
        del ran[: -self._RAN]
        changes = self._changes_since(uri, made_at)
        first, last = line_through(first, changes), line_through(last, changes)
        self.clear(uri, first, last)
        results = self._docs.get(uri)
        if results is not None and results.statements and results.statements[-1].first > last:
            reason = f"the code at {self.line_name(uri, first)} ran again at {_now()}"
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
                    return f"{self.line_name(uri, change.first)} was edited since it ran"
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
        self._not_python.discard(uri)

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
        name = functools.partial(self.line_name, uri)
        stale = _edit_fronts(results, changes, lines, names, name)
        return moved or moved_problems or stale

    def add(self, uri: str, made_at: int, new: DocumentResults, lines: Sequence[str]) -> None:
        """Add results made from document version `made_at`, moved through later edits."""
        if made_at < self._forgotten.get(uri, -1):
            return  # edits since then were forgotten: nothing can be placed safely
        changes = self._changes_since(uri, made_at)
        results = self._docs.setdefault(uri, DocumentResults())
        flow = self._maps.get(uri)
        if flow is None:
            flow = self._maps[uri] = DocumentMap(lines, python=uri not in self._not_python)
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
    name: Callable[[int], str] = lambda line: f"line {line + 1}",
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
            results.changed(change.first, f"{name(change.first)} was edited at {_now()}", before)
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
    start_line: int,
    end_line: int,
    text: str,
    deleted: bool = False,
    column: int = -1,
    moves: tuple[tuple[int, int, int], ...] = (),
) -> LineChange:
    return LineChange(start_line, end_line, text.count("\n"), text, deleted, column, moves)
