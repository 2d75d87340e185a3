"""What only the live kernel knows of an error, said for the fix request.

A paste has the whole file; runfix also has the kernel the code raised in. Its helper reads,
without running a line of the user's code (`_kernel_live.evidence`), what the frames that
raised held: the function's locals, each name of the line that raised, the pieces of the
expression that raised (the operands of a failing `+`, a subscript's container and index),
and what an object missing a key or attribute does have. Here that becomes a few short
lines a small model can act on — "`xs[i + 1]`: the index is 3, but `xs` has 3 items" —
and, for a `None` where a value was expected, which call returned it and why (a function
of the file with no `return`, a method that changes its object in place), found in the
file's code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from executor.safety import without_magics
from lsp_server.text.positions import strip_eol

IN_PLACE = {
    "sort": "sorts it in place",
    "reverse": "reverses it in place",
    "append": "adds to it in place",
    "extend": "adds to it in place",
    "insert": "adds to it in place",
    "remove": "removes from it in place",
    "clear": "empties it in place",
    "update": "updates it in place",
    "add": "adds to it in place",
    "discard": "removes from it in place",
    "shuffle": "shuffles it in place",
}
"""Methods of the builtin types (and `random.shuffle`) that change their object and return
None: the usual source of a `None` assigned by mistake."""
LIMIT = 1500
"""Characters of evidence in one request at most."""


@dataclass(frozen=True)
class Held:
    """One value the kernel read: what it was written as, its type, a short preview."""

    label: str
    type: str
    preview: str
    length: int | None = None

    @classmethod
    def of(cls, raw: Any) -> Held | None:
        if not isinstance(raw, list) or len(raw) < 3:
            return None
        label, kind, preview = (str(x) for x in raw[:3])
        length = raw[3] if len(raw) > 3 and isinstance(raw[3], int) else None
        return cls(label, kind, preview, length)

    @property
    def text(self) -> str:
        size = f", {self.length} item{'s' if self.length != 1 else ''}" if self._sized else ""
        if self.preview == self.label:
            return f"`{self.label}` ({self.type}{size})"
        return f"`{self.label}` = {self.preview} ({self.type}{size})"

    @property
    def _sized(self) -> bool:
        return self.length is not None and self.type not in ("str", "bytes")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    source: str
    locals: tuple[Held, ...]
    names: tuple[Held, ...]
    expression: str | None = None
    parts: tuple[Held, ...] = ()
    has: tuple[str, ...] | None = None
    module: bool | None = None
    """Whether the frame ran as the module file it names (None: not said)."""

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Frame:
        def held(key: str) -> tuple[Held, ...]:
            items = raw.get(key) or []
            return tuple(h for h in (Held.of(x) for x in items) if h is not None)

        has = raw.get("has")
        return cls(
            file=str(raw.get("file", "")),
            line=int(raw.get("line", 0) or 0),
            function=str(raw.get("function", "")),
            source=str(raw.get("source", "")),
            locals=held("locals"),
            names=held("names"),
            expression=str(raw["expression"]) if raw.get("expression") else None,
            parts=held("parts"),
            has=tuple(str(h) for h in has) if isinstance(has, list) else None,
            module=raw["module"] if isinstance(raw.get("module"), bool) else None,
        )


_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def error_name(error: str) -> str | None:
    """The exception's class name of an error's text (its last line that names one)."""
    for line in reversed(error.strip().splitlines()):
        found = _EXCEPTION.match(line.strip())
        if found and (found.group(1)[:1].isupper() or "." in found.group(1)):
            return found.group(1).rsplit(".", 1)[-1]
    return None


def frames_of(found: Mapping[str, Any] | None) -> list[Frame]:
    """The kernel's answer as frames, innermost first (none for a malformed answer)."""
    if not found or not isinstance(found.get("frames"), list):
        return []
    out = []
    for raw in found["frames"]:
        if isinstance(raw, dict):
            try:
                out.append(Frame.of(raw))
            except (TypeError, ValueError):
                continue
    return out


STYLES = ("facts", "full")
"""How the evidence is said: `facts` — what the failing expression's pieces say about the
error (else the values of the failing line's names); `full` — the facts, then the values of
the failing frame and its caller. Measured with Qwen2.5-Coder-0.5B on the live bench's 30
tasks that need a model: facts 13 fixed, full 11 (and 11 with the facts as a comment on the
failing line): a small model does better with less to read."""


def render(
    found: Mapping[str, Any] | None,
    error: str,
    sources: Mapping[str, Sequence[str]],
    name_of: Mapping[str, str] | None = None,
    style: str = "facts",
) -> str:
    """The evidence as lines for the model ("" when the kernel had none). `error`: the
    exception's line (`TypeError: …`); `sources`: the files' lines by path (the document,
    a module of the folder), where a `None`'s origin is looked for; `name_of`: how a path
    is named to the model (its file name; the document: none)."""
    frames = frames_of(found)
    if not frames:
        return ""
    names = name_of or {}
    facts = _facts(frames[0], error, frames, sources)
    if style == "facts":
        said = facts or (["; ".join(h.text for h in frames[0].names)] if frames[0].names else [])
        if not said:
            return ""
        text = "What the kernel held when it raised:\n" + "\n".join(f"- {f}" for f in said)
        return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"
    lines: list[str] = [f"- {fact}" for fact in facts]
    for depth, frame in enumerate(frames[:2]):
        where = _where(frame, names)
        values = [h.text for h in (frame.locals if frame.function != "<module>" else frame.names)]
        if frame.function == "<module>" and depth:
            continue
        if values:
            lines.append(f"- {'In' if depth == 0 else 'Called from'} {where}: " + "; ".join(values))
    if not lines:
        return ""
    text = "What the kernel held when it raised (read by runfix, nothing run):\n" + "\n".join(lines)
    return text if len(text) <= LIMIT else text[: LIMIT - 2] + " …"


def _where(frame: Frame, names: Mapping[str, str]) -> str:
    file = names.get(frame.file)
    place = f"line {frame.line}" + (f" of {file}" if file else "")
    if frame.function == "<module>":
        return place
    return f"`{frame.function}` ({place})"


def _facts(
    top: Frame,
    error: str,
    frames: Sequence[Frame],
    sources: Mapping[str, Sequence[str]],
) -> list[str]:
    """What the failing expression's pieces say about this error, in a sentence each."""
    facts: list[str] = []
    expression = top.expression
    kind = error.split(":", 1)[0].strip()
    parts = {p.label: p for p in top.parts}
    tree = _expression(expression) if expression else None
    if tree is not None and kind == "IndexError" and isinstance(tree, ast.Subscript):
        container = parts.get(ast.unparse(tree.value))
        index = parts.get(ast.unparse(tree.slice))
        if container is not None and container.length is not None and index is not None:
            top_index = container.length - 1
            valid = f"indexes 0 to {top_index}" if container.length else "no index is valid"
            facts.append(
                f"`{expression}`: the index `{index.label}` is {index.preview}, but "
                f"`{container.label}` has {container.length} items ({valid})."
            )
    elif tree is not None and kind == "TypeError" and top.parts:
        shown = ", ".join(_is(p) for p in top.parts[:4])
        facts.append(f"`{expression}`: {shown}.")
    elif tree is not None and kind in ("KeyError", "AttributeError") and top.has is not None:
        owner = top.parts[0] if top.parts else None
        what = "keys" if kind == "KeyError" else "attributes"
        listed = ", ".join(top.has[:20]) if top.has else "none"
        missing = ast.unparse(tree.slice) if isinstance(tree, ast.Subscript) else None
        if isinstance(tree, ast.Attribute):
            missing = tree.attr
        label = f"`{owner.label}`" + (f" (a {owner.type})" if owner else "") if owner else "it"
        facts.append(f"{label} has these {what}: {listed} — not {missing}.")
    if _about_none(error):
        for frame in frames[:2]:
            for _, held in _nones([frame]):
                origin = none_origin(held.label, frame, sources)
                fact = f"`{held.label}` is None" + (f": {origin}" if origin else ".")
                if fact not in facts:
                    facts.append(fact)
            if len(facts) > 3:
                break
    return facts


def _about_none(error: str) -> bool:
    """Whether an error's line is about a None where a value was expected."""
    return "NoneType" in error or "None" in error.split(":", 1)[-1]


def _nones(frames: Sequence[Frame]) -> list[tuple[Frame, Held]]:
    """The names (plain names only) the two innermost frames held None in, with their frame."""
    return [
        (frame, held)
        for frame in frames[:2]
        for held in (*frame.parts, *frame.names)
        if held.preview == "None" and re.fullmatch(r"[A-Za-z_]\w*", held.label)
    ]


def _is(held: Held) -> str:
    if held.preview == "None":
        return f"`{held.label}` is None"
    return f"`{held.label}` is {_a(held.type)} ({held.preview})"


def _a(kind: str) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


def _expression(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None


_ASSIGN = r"^(\s*){name}\s*(?::[^=]+)?=(?!=)\s*(.+?)\s*$"


def none_origin(name: str, frame: Frame, sources: Mapping[str, Sequence[str]]) -> str | None:
    """Why `name` held None, from the code: the assignment above the line that raised (in
    the frame's file, else the document), and the call it took the value from — a function
    of the file without a `return` of a value, or a method that changes its object in place
    and returns None."""
    found = _assignment(name, frame, sources)
    if found is None:
        return None
    line, value = found
    call = ast.unparse(value)
    said = f"it was assigned `{name} = {call}` (line {line + 1})"
    if isinstance(value.func, ast.Attribute) and value.func.attr in IN_PLACE:
        owner = ast.unparse(value.func.value)
        return (
            f"{said}, and `.{value.func.attr}()` {IN_PLACE[value.func.attr]} "
            f"(`{owner}`) and returns None."
        )
    if isinstance(value.func, ast.Name):
        why = _returns_none(value.func.id, sources)
        if why is not None:
            return f"{said}, and {why}"
    return said + "."


def _assigned_call(
    name: str, frame: Frame, sources: Mapping[str, Sequence[str]]
) -> ast.Call | None:
    found = _assignment(name, frame, sources)
    return found[1] if found is not None else None


def _assignment(
    name: str, frame: Frame, sources: Mapping[str, Sequence[str]]
) -> tuple[int, ast.Call] | None:
    """The nearest assignment of a call's value to `name` above the frame's line (in its
    file, else anywhere in the others): its line (0-based) and the call."""
    lines = sources.get(frame.file)
    files = [(frame.file, lines)] if lines is not None else []
    files += [(f, ls) for f, ls in sources.items() if f != frame.file]
    assign = re.compile(_ASSIGN.format(name=re.escape(name)))
    for file, text in files:
        above = range(min(frame.line - 1, len(text)) - 1, -1, -1) if file == frame.file else None
        for i in above if above is not None else range(len(text) - 1, -1, -1):
            found = assign.match(strip_eol(text[i]))
            if not found:
                continue
            value = _expression(found.group(2))
            if isinstance(value, ast.Call):
                return i, value
    return None


def _returns_none(function: str, sources: Mapping[str, Sequence[str]]) -> str | None:
    """Why a function of the file returns None, where its code says: no `return` of a value
    at all, or a last statement that is not a `return`."""
    found = _none_returning(function, sources)
    return found[0] if found is not None else None


def _none_returning(
    function: str, sources: Mapping[str, Sequence[str]]
) -> tuple[str, str, int] | None:
    """(why, file, line of its `def`) of a function of the files that returns None."""
    for file, text in sources.items():
        source = "".join(text)
        try:
            tree = ast.parse(without_magics(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.name != function:
                continue
            returns = [r for r in _own_returns(node) if r.value is not None]
            where = f"`{function}` (line {node.lineno})"
            if not returns:
                return f"{where} has no `return` of a value, so it returns None.", file, node.lineno
            last = node.body[-1]
            if not isinstance(last, (ast.Return, ast.Raise)):
                why = f"{where} returns None when it ends without reaching a `return`."
                return why, file, node.lineno
            return None
    return None


def none_from(
    found: Mapping[str, Any] | None, error: str, sources: Mapping[str, Sequence[str]]
) -> tuple[str, int] | None:
    """Where the cause of a `None` error is: the `def` (file, 0-based line) of the file's
    function that returned the None a name of the failing frame held, without a `return`
    of a value — the place a fix belongs, rather than the line that used the None."""
    if not _about_none(error):
        return None
    for frame, held in _nones(frames_of(found)):
        call = _assigned_call(held.label, frame, sources)
        if call is not None and isinstance(call.func, ast.Name):
            made = _none_returning(call.func.id, sources)
            if made is not None:
                return made[1], made[2] - 1
    return None


def _own_returns(function: ast.AST) -> list[ast.Return]:
    """The function's own `return` statements (not those of functions defined inside it)."""
    found: list[ast.Return] = []
    todo = list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return found


# -- what the evidence itself fixes, with no model -----------------------------------------


def returned(code: str) -> tuple[str, str] | None:
    """`code` (lines from `first` of its file) with the function it defines returning the
    value its last statement computes, where that function returns nothing at all and ends
    in an expression that is not a call to `print` — a forgotten `return` — and what was
    changed; None otherwise."""
    try:
        tree = ast.parse(without_magics(code))
    except SyntaxError:
        return None
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(functions) != 1 or [r for r in _own_returns(functions[0]) if r.value is not None]:
        return None
    function = functions[0]
    last = function.body[-1]
    if not isinstance(last, ast.Expr) or isinstance(last.value, ast.Constant):
        return None
    call = last.value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
        return None
    rows = code.split("\n")
    at = last.lineno - 1
    column = last.col_offset  # (the AST's columns are UTF-8 bytes: the prefix is indentation)
    rows[at] = rows[at][:column] + "return " + rows[at][column:]
    said = f"`{function.name}` returned None: it now returns its last expression"
    return "\n".join(rows), said


def sorted_instead(
    code: str, found: Mapping[str, Any] | None, error: str
) -> tuple[str, str] | None:
    """`code` with `x = items.sort(…)` — which sorts `items` in place and returns None —
    made `x = sorted(items, …)`, where the kernel's evidence shows `x` held that None; and
    what was changed. None otherwise."""
    if "NoneType" not in error:
        return None
    nones = {held.label for _, held in _nones(frames_of(found))}
    rows = code.split("\n")
    for i, row in enumerate(rows):
        text = row.strip()
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
            continue
        assign = tree.body[0]
        value = assign.value
        names = [t.id for t in assign.targets if isinstance(t, ast.Name)]
        if not (
            names
            and names[0] in nones
            and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "sort"
            and not value.args
        ):
            continue
        owner = value.func.value
        assign.value = ast.Call(ast.Name("sorted", ast.Load()), [owner], value.keywords)
        indent = row[: len(row) - len(row.lstrip())]
        rows[i] = indent + ast.unparse(assign)
        said = f"`{ast.unparse(owner)}.sort()` returns None: `sorted({ast.unparse(owner)})` instead"
        return "\n".join(rows), said
    return None
