"""A dataflow map of a document's cells: the names each cell defines and reads.

What a result depends on is what its cell read: a change to a cell above it that
defines (or, before the change, defined) one of those names, directly or through the
cells in between, makes it stale; a change elsewhere does not. "Run dependents" runs
the cells below that read what a cell defines, and a fix is checked against them
(`fixcheck`). Plain Python: no LSP types, no kernel.

Names are found in the AST, as a script's reader would (marimo's visitor is the model):
assignments, imports, `def` and `class`, `global` in a function, augmented assignment
and assignment to an attribute or an item of a name (`df["x"] = …`: a use and a
definition of `df`) define; every other load of a global name reads, the free names of
a function's body included. What a method call does to its object (`rows.append(1)`,
`df.dropna(inplace=True)`) is not seen: such a cell reads the name, it does not define it.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lsp_server.cells import is_marker


@dataclass(frozen=True)
class CellFlow:
    """What one cell's code defines and reads (reads: loaded before it is defined there)."""

    defines: frozenset[str]
    reads: frozenset[str]
    parsed: bool = True
    """False: the code does not parse (mid-typing); what it does is not known."""

    @property
    def defines_or_none(self) -> frozenset[str] | None:
        return self.defines if self.parsed else None


UNKNOWN = CellFlow(frozenset(), frozenset(), parsed=False)


class _Names(ast.NodeVisitor):
    """The global names one top-level statement loads and stores."""

    def __init__(self) -> None:
        self.loads: set[str] = set()
        self.stores: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        (self.loads if isinstance(node.ctx, ast.Load) else self.stores).add(node.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, also_load=True)
        self.visit(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._target(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.annotation)
        self._target(node.target)

    def _target(self, target: ast.expr, also_load: bool = False) -> None:
        """An assignment target: a name is defined; `a.b = …`, `a[k] = …` use and define `a`
        (and load what the subscript reads)."""
        if isinstance(target, ast.Name):
            self.stores.add(target.id)
            if also_load:
                self.loads.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, also_load)
        elif isinstance(target, ast.Starred):
            self._target(target.value, also_load)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            base: ast.expr = target
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                if isinstance(base, ast.Subscript):
                    self.visit(base.slice)
                base = base.value
            if isinstance(base, ast.Name):
                self.loads.add(base.id)
                self.stores.add(base.id)
            else:
                self.visit(base)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.stores.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.stores.add(alias.asname or alias.name)

    def _scope(self, node: ast.AST, own: Iterable[str], body: Sequence[ast.AST]) -> None:
        """A function's or class's body: its free names are loads of the cell's globals;
        what it declares `global` and assigns is a definition."""
        inner = _Names()
        for statement in body:
            inner.visit(statement)
        declared = {n for s in ast.walk(node) if isinstance(s, ast.Global) for n in s.names}
        local = (inner.stores | set(own)) - declared
        self.loads |= inner.loads - local
        self.stores |= inner.stores & declared

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        arguments = node.args
        params = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        params += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        self._scope(node, params, node.body)
        self.stores.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in (*node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        self._scope(node, params, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.visit(expression)
        self._scope(node, (), node.body)
        self.stores.add(node.name)

    def _comprehension(self, node: ast.AST, *elements: ast.AST) -> None:
        generators: list[ast.comprehension] = node.generators  # type: ignore[attr-defined]
        inner = _Names()
        for generator in generators:
            inner.visit(generator)
        for element in elements:
            inner.visit(element)
        targets = {n.id for g in generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        self.loads |= inner.loads - targets
        self.stores |= inner.stores - targets  # the walrus's name leaks to the cell

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, node.elt)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node, node.elt)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node, node.elt)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, node.key, node.value)


def analyse(code: str) -> CellFlow:
    """What `code` (one cell) defines and reads; `UNKNOWN` if it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return UNKNOWN
    defined: set[str] = set()
    reads: set[str] = set()
    for statement in tree.body:
        names = _Names()
        names.visit(statement)
        reads |= names.loads - defined
        defined |= names.stores
    return CellFlow(frozenset(defined), frozenset(reads))


@dataclass(frozen=True)
class Dependence:
    """Why a cell depends on a change: the name it reads (through `via`, a cell between)."""

    name: str
    via: int | None = None
    """The first line of the cell between that reads `name` and defines what this one reads."""


class DocumentMap:
    """A document's cells (`# %%` markers) and their dataflow, kept across edits.

    Cells are found once and then moved by edits that add or remove no marker (O(cells));
    a cell's analysis is made when asked and remembered by its text, so an edit re-reads
    only the cells it touched."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines: Sequence[str] = lines
        self._starts: list[int] | None = None
        self._memo: dict[str, CellFlow] = {}
        """Analyses by cell text: an edit re-reads only the cells it changed."""
        self._flows: dict[int, CellFlow] = {}
        self._affected: dict[tuple[int, frozenset[str]], dict[int, str]] = {}
        """Both for the text as it is now: dropped by an edit."""

    # -- cells ----------------------------------------------------------------------------

    @property
    def starts(self) -> list[int]:
        """The first line of each cell (found when first asked)."""
        if self._starts is None:
            self._starts = _starts(self.lines)
        return self._starts

    def reset(self, lines: Sequence[str]) -> None:
        """The document is `lines` now (its cells found again when asked)."""
        self.lines, self._starts = lines, None
        self._flows, self._affected = {}, {}

    def __len__(self) -> int:
        return len(self.starts)

    def index(self, line: int) -> int:
        """The cell holding `line`."""
        return max(bisect.bisect_right(self.starts, line) - 1, 0)

    def bounds(self, index: int) -> tuple[int, int]:
        """The cell's first and last line."""
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.lines) - 1
        return self.starts[index], max(end, self.starts[index])

    def code(self, index: int) -> str:
        first, last = self.bounds(index)
        return "".join(self.lines[first : last + 1])

    def flow(self, index: int) -> CellFlow:
        found = self._flows.get(index)
        if found is not None:
            return found
        code = self.code(index)
        found = self._memo.get(code)
        if found is None:
            if len(self._memo) > 4 * len(self.starts) + 64:
                self._memo.clear()  # texts of cells long edited away
            found = self._memo[code] = analyse(code)
        self._flows[index] = found
        return found

    # -- edits ----------------------------------------------------------------------------

    def touches_marker(self, first: int, last: int, text: str) -> bool:
        """Whether an edit of lines first..last writing `text` may add or remove a cell."""
        if "%%" in text:
            return True
        at = bisect.bisect_left(self.starts, first)
        return at < len(self.starts) and self.starts[at] <= last and self.starts[at] > 0

    def edited(self, first: int, last: int, text: str, delta: int, lines: Sequence[str]) -> None:
        """Lines first..last became `text` (`delta` more lines), and the document `lines`."""
        starts = self._starts
        if starts is None:
            pass  # not found yet: found in `lines` when asked
        elif self.touches_marker(first, last, text) or (
            first < len(self.lines) and is_marker(self.lines[first])
        ):
            self._starts = None
        elif delta:
            at = bisect.bisect_right(starts, first)
            starts[at:] = [s + delta for s in starts[at:]]
        self.lines = lines
        self._flows, self._affected = {}, {}

    # -- dataflow -------------------------------------------------------------------------

    def affected(self, above: int, changed: frozenset[str] | None) -> dict[int, str] | None:
        """The cells below `above` that depend on a change there of the names `changed`
        (and of what it defines now), each with the name it depends by; None: every cell
        below (the change's names are not known, or its cell does not parse).

        One pass down the cells in file order: a cell that reads a changed name is affected
        and what it defines changes too; one that is not and defines a name anew hides the
        change from the cells below it. A cell that does not parse is affected ("?")."""
        source = self.flow(above)
        if changed is None or not source.parsed:
            return None
        key = (above, changed)
        found = self._affected.get(key)
        if found is not None:
            return found
        tainted = set(changed | source.defines)
        found = {}
        for index in range(above + 1, len(self.starts)):
            flow = self.flow(index)
            if not flow.parsed:
                found[index] = "?"
                continue
            hit = flow.reads & tainted
            if hit:
                found[index] = min(hit)
                tainted |= flow.defines
            else:
                tainted -= flow.defines
        self._affected[key] = found
        return found

    def depends(self, index: int, changed: frozenset[str] | None, above: int) -> str | None:
        """The name by which cell `index` depends on a change, in cell `above` (a cell
        before it), of the names `changed`; None if it does not; "?" when nothing says it
        does not (a cell that does not parse, on either side, or names not known)."""
        affected = self.affected(above, changed)
        return "?" if affected is None else affected.get(index)

    def dependents(self, index: int, also: frozenset[str] = frozenset()) -> list[int]:
        """The cells below `index` that read what it defines (or the names `also`: what it
        defined before an edit), directly or through the cells between, in file order (not
        those that do not parse: they cannot run)."""
        affected = self.affected(index, also)
        if affected is None:
            return list(range(index + 1, len(self.starts)))
        return sorted(i for i, name in affected.items() if name != "?")


def _starts(lines: Sequence[str]) -> list[int]:
    """The first line of each cell: 0, then each marker after the first line."""
    return [0, *(i for i, line in enumerate(lines) if i and is_marker(line))]
