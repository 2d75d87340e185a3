"""A dataflow map of a document's cells: the names each cell defines and reads.

What a result depends on is what its cell read: a change to a cell above it that
defines (or, before the change, defined) one of those names, directly or through the
cells in between, makes it stale; a change elsewhere does not. "Run dependents" runs
the cells below that read what a cell defines, and a fix is checked against them
(`fixcheck`). Plain Python: no LSP types, no kernel.

Names are found in the AST, as a script's reader would (marimo's visitor is the model):
assignments, imports, `def` and `class`, `global` in a function, augmented assignment,
assignment to an attribute or an item of a name (`df["x"] = …`: a use and a definition
of `df`), `setattr`/`delattr` on a name, a `match` capture, `del`, and an attribute set
on `builtins` (a name every cell can read) define; every other load of a global name
reads, the free names of a function's body included. A cell that calls a function reads
what the function reads when it runs and defines the globals it sets (through the
functions it calls in turn). A definition under `if`, `for`, `while`, `try` or `match`
may not happen: it changes what the cell defines, but does not hide a change above it;
neither does `x: int`, which binds nothing. Where the code can read or bind any name —
`exec`, `eval`, `globals()`, `vars()`, `locals()`, `from m import *` — the cell "reads
anything" and "defines anything": every change above it reaches it, and a change of it
reaches every cell below.

Not seen: what a method call does to its object (`rows.append(1)`,
`df.dropna(inplace=True)`): such a cell reads the name, it does not define it; an
attribute of an object set inside a function the cell calls (`def grow(): cfg.n += 1`);
a module's state changed through another name (`sys.modules[__name__].x = 1`,
`setattr(sys.modules[...], …)`); code that runs on import of a module of the folder.
"""

from __future__ import annotations

import ast
import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from lsp_server.text.cells import is_marker

_ANY_NAME = frozenset({"exec", "eval", "globals", "vars", "locals"})
"""Builtins whose call can read or bind any global name."""
_BUILTINS = frozenset({"builtins", "__builtins__"})
_MAYBE = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)
"""Statements whose body may not run: what they bind does not hide a change above."""


@dataclass(frozen=True)
class Function:
    """What calling a function (or a class: its body and methods) reads and sets: its free
    global names, and the globals it declares and assigns."""

    name: str
    reads: frozenset[str]
    sets: frozenset[str]
    anything: bool = False
    """It calls `exec`, `globals()` and the like: it may read and bind any name."""


@dataclass(frozen=True)
class CellFlow:
    """What one cell's code defines and reads (reads: loaded before it is defined there)."""

    defines: frozenset[str]
    reads: frozenset[str]
    parsed: bool = True
    """False: the code does not parse (mid-typing); what it does is not known."""
    sure: frozenset[str] | None = None
    """What it defines whatever happens (not under `if`, `for`…): what hides a change above
    from the cells below. None: all it defines."""
    functions: tuple[Function, ...] = ()
    """The functions and classes it defines."""
    anything: bool = False
    """It may read and bind any name (`exec`, `import *`, `globals()`…)."""

    @property
    def defines_or_none(self) -> frozenset[str] | None:
        return self.defines if self.parsed and not self.anything else None

    @property
    def hides(self) -> frozenset[str]:
        return self.defines if self.sure is None else self.sure


UNKNOWN = CellFlow(frozenset(), frozenset(), parsed=False)


class _Names(ast.NodeVisitor):
    """The global names one top-level statement loads and stores."""

    def __init__(self) -> None:
        self.loads: set[str] = set()
        self.stores: set[str] = set()
        self.binds: set[str] = set()
        """The stores that bind the name (not `a.b = …`, `a[k] = …`: those change its object)."""
        self.functions: dict[str, Function] = {}
        self.anything = False
        self.lambda_: Function | None = None
        """The last lambda visited (`f = lambda: rate` records it as `f`)."""

    def _bind(self, name: str) -> None:
        self.stores.add(name)
        self.binds.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.loads.add(node.id)
        else:
            self._bind(node.id)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._target(node.target, also_load=True)
        self.visit(node.value)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.lambda_ = None
        self.visit(node.value)
        for target in node.targets:
            self._target(target)
            if isinstance(node.value, ast.Lambda) and self.lambda_ and isinstance(target, ast.Name):
                self.functions[target.id] = replace(self.lambda_, name=target.id)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.annotation)
        if node.value is not None:  # `x: int` alone binds nothing
            self.visit(node.value)
            self._target(node.target)
        elif not isinstance(node.target, ast.Name):
            self.visit(node.target)

    def _target(self, target: ast.expr, also_load: bool = False) -> None:
        """An assignment target: a name is defined; `a.b = …`, `a[k] = …` use and define `a`
        (and load what the subscript reads)."""
        if isinstance(target, ast.Name):
            self._bind(target.id)
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
                if base.id in _BUILTINS:  # `builtins.rate = 5`: a name every cell reads
                    self.stores.add(_builtin_name(target) or base.id)
            else:
                self.visit(base)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        callee = node.func.id if isinstance(node.func, ast.Name) else None
        if callee in _ANY_NAME:
            self.anything = True
        elif callee in ("setattr", "delattr") and node.args:
            held = node.args[0]
            while isinstance(held, (ast.Attribute, ast.Subscript)):
                held = held.value
            if isinstance(held, ast.Name):
                self.stores.add(held.id)
                named = node.args[1] if len(node.args) > 1 else None
                if held.id in _BUILTINS and isinstance(named, ast.Constant):
                    self.stores.add(str(named.value))

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self._bind(node.rest)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._bind(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.anything = True  # names the module decides
            else:
                self._bind(alias.asname or alias.name)

    def _scope(self, node: ast.AST, own: Iterable[str], body: Sequence[ast.AST]) -> Function:
        """A function's or class's body: its free names are loads of the cell's globals;
        what it declares `global` and assigns is a definition. What calling it reads and
        sets, as a Function."""
        inner = _Names()
        for statement in body:
            inner.visit(statement)
        declared = {n for s in ast.walk(node) if isinstance(s, ast.Global) for n in s.names}
        local = (inner.binds | set(own)) - declared
        free = inner.loads - local
        self.loads |= free
        self.stores |= inner.stores & declared
        self.binds |= inner.binds & declared
        # Calling it sets the globals it declares and assigns, and changes the global
        # objects it sets an attribute or an item of (`cfg.n += 1`).
        sets = (inner.stores - local) | {
            n for f in inner.functions.values() for n in f.sets if n not in local
        }
        anything = inner.anything or any(f.anything for f in inner.functions.values())
        return Function(getattr(node, "name", ""), frozenset(free), frozenset(sets), anything)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in (*node.decorator_list, *node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        arguments = node.args
        params = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
        params += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        self.functions[node.name] = self._scope(node, params, node.body)
        self._bind(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in (*node.args.defaults, *node.args.kw_defaults):
            if expression is not None:
                self.visit(expression)
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
        self.lambda_ = self._scope(node, params, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.visit(expression)
        self.functions[node.name] = self._scope(node, (), node.body)
        self._bind(node.name)

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
        self.binds |= inner.binds - targets

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, node.elt)

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node, node.elt)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node, node.elt)

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, node.key, node.value)


def _builtin_name(target: ast.Attribute | ast.Subscript) -> str | None:
    """The name `builtins.x = …` or `__builtins__["x"] = …` binds for every cell."""
    if isinstance(target, ast.Attribute):
        return target.attr
    key = target.slice
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def analyse(code: str) -> CellFlow:
    """What `code` (one cell) defines and reads; `UNKNOWN` if it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return UNKNOWN
    defined: set[str] = set()
    sure: set[str] = set()
    reads: set[str] = set()
    functions: dict[str, Function] = {}
    anything = False
    for statement in tree.body:
        names = _Names()
        names.visit(statement)
        reads |= names.loads - defined
        defined |= names.stores
        if not isinstance(statement, _MAYBE):
            sure |= names.stores
        functions.update(names.functions)
        anything = anything or names.anything
    return CellFlow(
        frozenset(defined),
        frozenset(reads),
        sure=frozenset(sure) if sure != defined else None,
        functions=tuple(functions.values()),
        anything=anything,
    )


@dataclass
class _Calls:
    """What running a cell reads and defines once the functions it calls are counted."""

    reads: set[str] = field(default_factory=set)
    defines: set[str] = field(default_factory=set)
    anything: bool = False


def _with_calls(flow: CellFlow, functions: dict[str, Function]) -> _Calls:
    """`flow`'s reads and definitions with those of the functions it calls (the latest
    definition above it of each name it reads, through the functions they call)."""
    out = _Calls(set(flow.reads), set(flow.defines), flow.anything)
    todo = [n for n in flow.reads if n in functions]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        called = functions[name]
        out.reads |= called.reads
        out.defines |= called.sets
        out.anything = out.anything or called.anything
        todo.extend(n for n in called.reads if n in functions)
    return out


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

    def __init__(self, lines: Sequence[str], *, python: bool = True) -> None:
        self.lines: Sequence[str] = lines
        self.python = python
        """False: another language's text, never read by Python's parser: each cell may read
        and define anything (`UNKNOWN`), so a change marks every cell below it."""
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
            found = self._memo[code] = analyse(code) if self.python else UNKNOWN
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
        below (the change's names are not known, its cell does not parse, or it may bind
        any name).

        One pass down the cells in file order: a cell that reads a changed name — itself
        or in a function it calls — is affected and what it defines changes too; one that
        is not and surely defines a name anew hides the change from the cells below it. A
        cell that does not parse is affected ("?"); one that may read any name is, by "*",
        and after one that may bind any name is affected, every cell below is ("*")."""
        source = self.flow(above)
        if changed is None or not source.parsed or source.anything:
            return None
        key = (above, changed)
        found = self._affected.get(key)
        if found is not None:
            return found
        functions = self._functions(above + 1)
        effect = _with_calls(source, functions)
        if effect.anything:
            return None
        tainted = set(changed) | effect.defines
        anything = False
        found = {}
        for index in range(above + 1, len(self.starts)):
            flow = self.flow(index)
            if not flow.parsed:
                found[index] = "?"
                continue
            calls = _with_calls(flow, functions)
            hit = calls.reads & tainted
            if hit or anything or (calls.anything and tainted):
                found[index] = min(hit) if hit else "*"
                tainted |= calls.defines
                anything = anything or calls.anything
            else:
                tainted -= flow.hides
            functions.update((f.name, f) for f in flow.functions)
        self._affected[key] = found
        return found

    def _functions(self, end: int) -> dict[str, Function]:
        """The functions the cells before `end` define, the latest of each name."""
        functions: dict[str, Function] = {}
        for index in range(end):
            functions.update((f.name, f) for f in self.flow(index).functions)
        return functions

    def defined(self, index: int) -> frozenset[str] | None:
        """What running cell `index` defines, the globals the functions it calls set
        included; None: not known (it does not parse, or may bind any name)."""
        flow = self.flow(index)
        if flow.defines_or_none is None:
            return None
        calls = _with_calls(flow, self._functions(index))
        return None if calls.anything else frozenset(calls.defines)

    def depends(self, index: int, changed: frozenset[str] | None, above: int) -> str | None:
        """The name by which cell `index` depends on a change, in cell `above` (a cell
        before it), of the names `changed`; None if it does not; "?" when nothing says it
        does not (a cell that does not parse, on either side, or names not known)."""
        affected = self.affected(above, changed)
        return "?" if affected is None else affected.get(index)

    def dependents(self, index: int, also: frozenset[str] = frozenset()) -> list[int]:
        """The cells below `index` that read what it defines (or the names `also`: what it
        defined before an edit), directly or through the cells between, or may ("*"), in
        file order (not those that do not parse: they cannot run)."""
        affected = self.affected(index, also)
        if affected is None:
            return list(range(index + 1, len(self.starts)))
        return sorted(i for i, name in affected.items() if name != "?")


def _starts(lines: Sequence[str]) -> list[int]:
    """The first line of each cell: 0, then each marker after the first line."""
    return [0, *(i for i, line in enumerate(lines) if i and is_marker(line))]
