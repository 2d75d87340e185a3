"""A candidate that makes the error go away without doing what the code was for is not a fix.

`fixcheck.still_runs` and `fixcheck.deletion_style` hold the plain cases (the failing line
deleted, `try/except: pass`, an early return). These rules read the candidate against what
the kernel said raised (the failing expression and what it held: `_kernel_live.evidence`)
and against what the fixed code then printed or returned:

- **the operation that raised is gone**: `sum(counts)` raised, and the candidate prints
  `counts` as it was — the call, subscript or attribute that raised must still be done (on
  the same object: `sorted(unique)[0]` keeps `unique[0]`'s job, `unique` alone does not),
  unless what the code prints shows something else was done in its place (`len(values)`
  for `values.count()`);
- **a default that is always taken**: `s["timeout"]` raised a KeyError and `s` has
  `timeout_s`: `s.get("timeout", 1)` gives 1 every time;
- **a constant in place of what failed, and the output shows it**: `… if i + w <= n else 0`
  and the code now prints `avg [3.0, 5.0, 0, 0]`;
- **what the kept statement says is now None or empty**: `metres None`, `[]`.

Each rule says itself in a sentence (`Held.rule`). A real fix passes all: a `.get` of the
right key, a bounds fix, a default the data needs (the key is absent, not misspelt, and the
output does not hold the default)."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from executor.events import RunOutcome, Stream, Value
from lsp_server.fix.evidence import frames_of
from lsp_server.fix.fixcheck import callee_of, same_job, statement_at, targets_of

_TOKEN = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|[A-Za-z_]\w*|\[\]|\{\}|\(\)|''|\"\"")
"""What output is compared by: numbers, words, empty brackets and quotes."""
_EMPTY = {"[]", "{}", "()", "''", '""', "set()"}
SAYS = 100
"""Characters of what the fixed code prints said in a fix's note."""


@dataclass(frozen=True)
class Failing:
    """What raised, as the kernel read it when it did: the expression (`s["timeout"]`), the
    error's name, what the object a key or attribute was missing from has, and the pieces of
    the expression with their previews."""

    expression: str
    ename: str
    has: tuple[str, ...] = ()
    parts: tuple[tuple[str, str], ...] = ()


def failing_of(found: Mapping[str, Any] | None, error: str) -> Failing | None:
    """The innermost frame's failing expression, from the kernel's evidence (None where it
    did not say: another language, a kernel without runfix's helper, no expression)."""
    frames = frames_of(found)
    if not frames or not frames[0].expression:
        return None
    name = error.strip().splitlines()[-1].split(":", 1)[0].strip() if error.strip() else ""
    first = frames[0]
    parts = tuple((p.label, p.preview) for p in first.parts)
    return Failing(first.expression or "", name, tuple(first.has or ()), parts)


def missing_key(code: str, error: str, keys: Sequence[str]) -> Failing | None:
    """What raised, read from a `KeyError`'s text where the kernel did not say: the lookup
    of that key in `code` (`cfg["timeout"]`), and the keys the kernel's dicts hold (its
    variables), so a `.get` of the missing key with a near one there is seen for what it is."""
    last = error.strip().splitlines()[-1] if error.strip() else ""
    if not last.startswith("KeyError:"):
        return None
    key = last.split(":", 1)[1].strip()
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.slice) == key:
            return Failing(ast.unparse(node), "KeyError", tuple(keys))
    return None


def said(outcome: RunOutcome | None) -> str:
    """What a run printed and returned, as text (stdout, values), in order."""
    if outcome is None:
        return ""
    out = []
    for event in outcome.events:
        if isinstance(event, Stream) and event.name == "stdout":
            out.append(event.text)
        elif isinstance(event, Value):
            out.append(str(event.data.get("text/plain", "")) + "\n")
    return "".join(out)


def says(outcome: RunOutcome | None) -> str:
    """What the fixed code printed or returned, in one short line for a note ("" if nothing)."""
    return _shown(said(outcome))


@dataclass(frozen=True)
class Held:
    rule: str
    """Why, as what the candidate does (`it removes …`), naming the rule."""


def silencing(
    original: str,
    candidate: str,
    failing: Failing | None,
    printed: str,
    line: int | None = None,
) -> Held | None:
    """The rule that holds `candidate` (fixing `original`, whose `failing` expression raised
    on its `line`, from 1; `printed`: what the code said once fixed), else None."""
    try:
        before, after = ast.parse(original), ast.parse(candidate)
    except SyntaxError:
        return None
    tokens = _TOKEN.findall(printed)
    shown = _shown(printed)
    held = _constant_result(before, after, line) if line is not None else None
    held = held or _varying_made_constant(before, after)
    if held is not None:
        return held
    if failing is not None:
        held = _default_always(failing, after) or _lookup_gone(failing, before, after)
        if held is None and _prints_an_operand(failing, printed):
            held = _operation_gone(failing, before, after)
        if held is not None:
            return held
    constants = _new_defaults(before, after, failing)
    hit = next((c for c in constants if c in tokens), None)
    if hit is not None:
        return Held(
            f"replaces what failed with a constant ({hit}), and what the code prints now holds "
            f"it: `{shown}`"
        )
    if "None" in tokens and "None" not in _TOKEN.findall(original):
        return Held(f"makes what the code prints or returns None: `{shown}`")
    if tokens and _only_empty(printed):
        return Held(f"makes what the code prints or returns empty: `{shown}`")
    return None


def _shown(printed: str) -> str:
    """Printed text in one short line: its lines joined by ` / `, cut at `SAYS`."""
    text = " / ".join(line.strip() for line in printed.splitlines() if line.strip())
    return text if len(text) <= SAYS else text[: SAYS - 1] + "…"


def _only_empty(printed: str) -> bool:
    """Every line says an empty value where its value goes (`[]`, `x {}`, `total ''`)."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    return bool(lines) and all(line.split()[-1] in _EMPTY for line in lines)


def _varying_made_constant(before: ast.AST, after: ast.AST) -> Held | None:
    """A call that took a value that varies — a loop's or a comprehension's variable, a
    parameter — takes a constant in its place (`[label(s) for s in scores]` →
    `[label(70) for s in scores]`): every item gets the one answer."""
    varying = _varying_names(before)
    old = [n for n in ast.walk(before) if isinstance(n, ast.Call)]
    for call in (n for n in ast.walk(after) if isinstance(n, ast.Call)):
        callee = ast.unparse(call.func)
        for was in old:
            if ast.unparse(was.func) != callee or len(was.args) != len(call.args):
                continue
            for then, now in zip(was.args, call.args, strict=True):
                if (
                    isinstance(then, ast.Name)
                    and then.id in varying
                    and isinstance(now, ast.Constant)
                ):
                    return Held(
                        f"replaces `{then.id}`, which varies, with a constant "
                        f"(`{ast.unparse(call)[:60]}`): every item gets one answer"
                    )
    return None


def _varying_names(tree: ast.AST) -> set[str]:
    """Names bound by a `for`, a comprehension or as a function's parameters."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            names |= {a.arg for a in (*node.args.posonlyargs, *node.args.args)}
    return names


def _constant_result(before: ast.AST, after: ast.AST, line: int) -> Held | None:
    """The statement that raised computed from names (`return sum(xs) / len(xs)`,
    `print(len(evens(10)))`); the candidate's doing its job is a constant (`return 3 + 4 +
    5`, `print(1)`)."""
    failing = statement_at(before, line)
    if failing is None or not _names(_value_of(failing)) - _CALLED_ALONE:
        return None
    doing = [n for n in ast.walk(after) if same_job(failing, n, before, after)]
    doing += _filling(after, targets_of(failing))
    constant = [n for n in doing if _is_constant(_value_of(n))]
    if doing and len(constant) == len(doing):
        said = ast.unparse(constant[0]).splitlines()[0]
        return Held(f"replaces what the code computed with a constant (`{said[:60]}`)")
    return None


def _filling(tree: ast.AST, names: set[str]) -> list[ast.AST]:
    """Calls of a method of an assigned name (`table.update({…})`, `rows.append(r)`): they
    fill what was first made empty, and do the statement's job as much as its assignment."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
        and isinstance(n.value.func.value, ast.Name)
        and n.value.func.value.id in names
    ]


_CALLED_ALONE = {"print", "str", "repr", "int", "float", "round", "len"}
"""Names a statement may call on a constant without computing anything from the data."""


def _value_of(statement: ast.AST) -> ast.AST:
    """What a statement computes: a return's or an assignment's value, a call's arguments."""
    if isinstance(statement, (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return statement.value if statement.value is not None else ast.Constant(None)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        return ast.Tuple([*call.args, *(k.value for k in call.keywords)], ast.Load())
    return statement


def _is_constant(node: ast.AST) -> bool:
    """Made of literals alone (`3 + 4 + 5`, `(1, 'a')`, `[]`), or of calls of `print`,
    `str` and their like on them."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in _CALLED_ALONE:
            return False
        if isinstance(sub, (ast.Attribute, ast.Subscript, ast.Lambda, ast.comprehension)):
            return False
    return True


def _lookup_gone(failing: Failing, before: ast.AST, after: ast.AST) -> Held | None:
    """The lookup that raised (`item["qty"]`, `xs[i]`) dropped: fewer lookups in what it
    was looked up in than before, or its varying index made a fixed one (`xs[1]`)."""
    node = _segment(failing.expression)
    if not isinstance(node, ast.Subscript):
        return None
    base = _names(node.value)
    if not base:
        return None

    def lookups(tree: ast.AST) -> list[ast.Subscript]:
        return [
            n for n in ast.walk(tree) if isinstance(n, ast.Subscript) and base <= _names(n.value)
        ]

    said = f"`{failing.expression.strip()}`"
    if not base & {n.id for n in ast.walk(after) if isinstance(n, ast.Name)}:
        return None  # (renamed: `for row in rows` where `for r in rows` was; not judged here)
    old, new = lookups(before), lookups(after)
    gets = [n for n in ast.walk(after) if _is_get(n) and base <= _names(n.func.value)]  # type: ignore[attr-defined]
    if not new and not gets:
        return Held(f"removes the operation that raised ({said}): nothing is looked up in it")
    keyed = isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
    if keyed and len(new) + len(gets) < len(old):  # (a rewrite by index, `zip`, may use fewer)
        return Held(f"removes the operation that raised ({said}): one lookup fewer")
    varying = _data_names(node.slice) - base  # (`xs[len(xs)]` → `xs[-1]`: the same item)
    fixed = [n for n in new if not isinstance(n.slice, ast.Slice) and not _names(n.slice)]
    if varying and not gets and len(fixed) == len(new):
        return Held(f"looks up a fixed item where the code looked up {said}")
    return None


def _data_names(node: ast.AST) -> set[str]:
    """The names an expression reads as data (not the functions it calls: `len` in
    `len(xs) - 1`)."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and id(n) not in called}


def _prints_an_operand(failing: Failing, printed: str) -> bool:
    """What the code prints shows what the failing operation was to work on, unworked (the
    list `sum` was to add up): a candidate that calls something else on it instead (`len`
    for `.count()`, `sqrt` for `root`) prints what that made, and is a fix to judge."""
    return any(len(preview) >= 3 and preview in printed for _, preview in failing.parts)


def _segment(expression: str) -> ast.expr | None:
    try:
        return ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _operation_gone(failing: Failing, before: ast.AST, after: ast.AST) -> Held | None:
    """The call, subscript or attribute that raised, done nowhere in the candidate on what
    it was done on (an object named as before, wrapped or not)."""
    node = _segment(failing.expression)
    if node is None:
        return None
    said = f"`{failing.expression.strip()}`"
    if isinstance(node, ast.Call):
        callee = callee_of(node)
        if callee and not any(
            isinstance(n, ast.Call) and callee_of(n) == callee for n in ast.walk(after)
        ):
            return Held(f"removes the operation that raised ({said}): `{callee}` is never called")
        return None
    if isinstance(node, ast.Subscript):
        base = _names(node.value)
        if not base:
            return None
        done = any(
            (isinstance(n, ast.Subscript) and base <= _names(n.value))
            or (_is_get(n) and base <= _names(n.func.value))  # type: ignore[attr-defined]
            for n in ast.walk(after)
        )
        if not done:
            return Held(f"removes the operation that raised ({said}): nothing is looked up in it")
        return None
    if isinstance(node, ast.Attribute):

        def has_attr(tree: ast.AST) -> bool:
            return any(isinstance(n, ast.Attribute) and n.attr == node.attr for n in ast.walk(tree))

        if has_attr(before) and not has_attr(after):
            return Held(f"removes the operation that raised ({said})")
    return None


def _is_get(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
    )


def _default_always(failing: Failing, after: ast.AST) -> Held | None:
    """`d.get(key, default)` of the very key that was missing, where `d` holds one spelt
    almost like it: the key is wrong, and the default is taken every time."""
    node = _segment(failing.expression)
    if failing.ename != "KeyError" or not isinstance(node, ast.Subscript):
        return None
    key = ast.unparse(node.slice)
    base = _names(node.value)
    for call in ast.walk(after):
        if not _is_get(call) or not base <= _names(call.func.value):  # type: ignore[attr-defined]
            continue
        if ast.unparse(call.args[0]) != key:  # type: ignore[attr-defined]
            continue
        close = _close_keys(key, failing.has)
        default = ast.unparse(call.args[1]) if len(call.args) > 1 else "None"  # type: ignore[attr-defined]
        if close:
            return Held(
                f"gives a default that is always taken: there is no {key} (there is "
                f"{close[0]}), so `.get({key}, …)` gives {default} every time"
            )
    return None


def _close_keys(key: str, has: Sequence[str]) -> list[str]:
    wanted = key.strip("'\"").lower()
    return [
        k
        for k in has
        if difflib.SequenceMatcher(None, wanted, k.strip("'\"").lower()).ratio() >= 0.7
    ]


def _new_defaults(before: ast.AST, after: ast.AST, failing: Failing | None) -> list[str]:
    """Constants the candidate falls back to in place of what failed, which the original did
    not: `… if ok else 0`, `x or 0`, `.get(k, 0)` around the failing expression's objects
    (as their reprs). Without the kernel's word on what failed: none."""
    node = _segment(failing.expression) if failing is not None else None
    if node is None:
        return []
    wanted = _names(node)

    def defaults(tree: ast.AST) -> list[str]:
        found: list[str] = []
        for sub in ast.walk(tree):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(sub, ast.IfExp):
                pairs = [(sub.body, sub.orelse), (sub.orelse, sub.body)]
            elif isinstance(sub, ast.BoolOp) and isinstance(sub.op, ast.Or):
                pairs = [(v, sub.values[0]) for v in sub.values[1:]]
            elif isinstance(sub, ast.Call) and _is_get(sub) and len(sub.args) > 1:
                pairs = [(sub.args[1], sub)]
            for constant, other in pairs:
                if isinstance(constant, ast.Constant) and wanted & _names(other):
                    found.append(repr(constant.value))
        return found

    old = defaults(before)
    return [
        c for c in dict.fromkeys(defaults(after)) if c not in old and c not in ("True", "False")
    ]
