"""Runs inside the kernel as the module `_runfix_live`: what the kernel knows where the user
types (completion, hover, signature help), read without running the user's code.

Values are reached by walking what already exists: a name in the namespace, then
attributes and literal subscripts. An attribute is read from the object's own
`__dict__` or as a plain class attribute, never through a property, a descriptor or
`__getattr__` (a getter that writes a file must not run because the user typed a dot);
a subscript only into a real dict, list or tuple. The only code of a value's type that
runs is what its library wrote for this purpose: `_ipython_key_completions_`, and the
columns, dtypes and shape of pandas and numpy objects.

Only what a static language server cannot know is offered: names that exist in the
kernel but are not bound in the document, attributes set on an instance at run time,
dictionary keys and table columns. A static server beside runfix (Pylance, pyright,
pylsp) lists the rest, and the editor merges the two lists without duplicates.

The server asks over a comm (`TARGET`), on a kernel subshell where the kernel has them,
so an answer never waits for a running cell. This file must run on any Python 3.8+ with
IPython, and import nothing from runfix.
"""

from __future__ import annotations

import builtins
import inspect
import keyword
import re
import reprlib
import types
from typing import Any

TARGET = "runfix.live"
"""The comm target the server opens."""
LIMIT = 500
"""Items in one completion answer."""
PREVIEW = 200
"""Characters of a value's preview."""

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP = r"(?:\.\s*" + _NAME + r"|\[\s*(?:'[^'\\]*'|\"[^\"\\]*\"|-?\d+)\s*\])"
_CHAIN = r"(?<![\w.\])])" + _NAME + r"(?:" + _STEP + r")*"
_KEY = re.compile(r"(" + _CHAIN + r")\[\s*(['\"])([^'\"\\]*)$")
_OPEN = re.compile(r"(" + _CHAIN + r")\[\s*$")
_ATTR = re.compile(r"(" + _CHAIN + r")\.(" + r"[A-Za-z0-9_]*)$")
_BARE = re.compile(r"(?<![\w.'\"])(" + _NAME + r")$")
_PART = re.compile(r"\.\s*(" + _NAME + r")|\[\s*(?:'([^'\\]*)'|\"([^\"\\]*)\"|(-?\d+))\s*\]")
_LIBRARIES = ("pandas", "numpy", "polars")
"""Packages whose own accessors (shape, columns, dtypes) may run to describe their values."""
_MISSING = object()
_OBJECT_REPR = object.__dict__["__repr__"]


# -- walking values without running their code -----------------------------------------


def _own_dict(value: Any) -> dict[str, Any] | None:
    """The instance's `__dict__`, through the interpreter's own descriptor only (a class may
    make `__dict__` a property)."""
    if isinstance(value, types.ModuleType):
        return value.__dict__
    for klass in type(value).__mro__:
        slot = klass.__dict__.get("__dict__", _MISSING)
        if slot is _MISSING:
            continue
        if isinstance(slot, types.GetSetDescriptorType):
            own = slot.__get__(value, type(value))
            return own if isinstance(own, dict) else None
        return None
    return None


def _class_value(value: Any, name: str) -> Any:
    """A plain class attribute (no descriptor: nothing to run to read it), else _MISSING."""
    for klass in type(value).__mro__:
        found = klass.__dict__.get(name, _MISSING)
        if found is _MISSING:
            continue
        return _MISSING if hasattr(type(found), "__get__") else found
    return _MISSING


def _attribute(value: Any, name: str) -> Any:
    own = _own_dict(value)
    if own is not None and name in own:
        return own[name]
    if isinstance(value, type):
        found = value.__dict__.get(name, _MISSING)
        return _MISSING if hasattr(type(found), "__get__") else found
    return _class_value(value, name)


def _item(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        return dict.get(value, key, _MISSING)
    if isinstance(value, (list, tuple)) and isinstance(key, int):
        try:
            return list.__getitem__(value, key) if isinstance(value, list) else value[key]
        except IndexError:
            return _MISSING
    return _MISSING


def resolve(namespace: dict[str, Any], chain: str) -> Any:
    """The value `chain` names (`cfg["a"].b[0]`), or _MISSING where a step would have to
    run code."""
    head = re.match(_NAME, chain)
    if head is None or head.group(0) not in namespace:
        return _MISSING
    value = namespace[head.group(0)]
    rest = chain[head.end() :]
    for step in _PART.finditer(rest):
        attr, single, double, number = step.groups()
        if attr is not None:
            value = _attribute(value, attr)
        elif number is not None:
            value = _item(value, int(number))
        else:
            value = _item(value, single if single is not None else double)
        if value is _MISSING:
            return _MISSING
    return value


def _from_library(value: Any) -> bool:
    module = type(value).__module__ or ""
    return module.split(".", 1)[0] in _LIBRARIES


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    name = kind.__qualname__
    return name if module in ("builtins", "__main__", None) else f"{module}.{name}"


def _columns(value: Any) -> dict[str, str] | None:
    """A table's columns and their types (pandas, polars)."""
    if not _from_library(value):
        return None
    try:
        columns = list(value.columns)
        dtypes = list(value.dtypes)
    except Exception:
        return None
    if len(columns) != len(dtypes):
        return None
    return {str(c): str(t) for c, t in zip(columns[:LIMIT], dtypes[:LIMIT])}  # noqa: B905 (3.8)


def _keys(value: Any) -> list[tuple[str, str]]:
    """(key, what it holds) for `value[` completion."""
    if isinstance(value, dict):
        return [
            (k, _type_name(v)) for k, v in list(dict.items(value))[:LIMIT] if isinstance(k, str)
        ]
    columns = _columns(value)
    if columns is not None:
        return list(columns.items())
    for klass in type(value).__mro__:  # the completion protocol: a method meant to run
        method = klass.__dict__.get("_ipython_key_completions_", _MISSING)
        if isinstance(method, types.FunctionType):
            try:
                return [(str(k), "") for k in list(method(value))[:LIMIT] if isinstance(k, str)]
            except Exception:
                return []
        if method is not _MISSING:
            break
    return []


# -- what the server asks ------------------------------------------------------------


def _hidden(shell: Any) -> set[str]:
    return set(getattr(shell, "user_ns_hidden", {}) or {})


def complete(
    namespace: dict[str, Any], before: str, bound: list[str], hidden: set[str] | None = None
) -> dict[str, Any] | None:
    """Completion for the line's text before the cursor; None when the kernel knows nothing
    there a static server would not. `bound`: names the document binds itself."""
    key = _KEY.search(before)
    if key is not None:
        value = resolve(namespace, key.group(1))
        if value is _MISSING:
            return None
        prefix, quote = key.group(3), key.group(2)
        items = [
            {"label": k, "kind": "key", "detail": detail, "quote": quote}
            for k, detail in _keys(value)
            if k.startswith(prefix) and quote not in k and "\\" not in k
        ]
        return {"what": "key", "prefix": prefix, "items": items}
    opened = _OPEN.search(before)
    if opened is not None:  # `df[`: the keys, quoted (the editor's `[` trigger)
        value = resolve(namespace, opened.group(1))
        if value is _MISSING:
            return None
        items = [
            {"label": repr(k), "kind": "key", "detail": detail}
            for k, detail in _keys(value)
            if "\\" not in k
        ]
        return {"what": "key", "prefix": "", "items": items}
    attr = _ATTR.search(before)
    if attr is not None:
        value = resolve(namespace, attr.group(1))
        if value is _MISSING or isinstance(value, (types.ModuleType, type)):
            return None  # a module's or a class's members are in their source: static
        prefix = attr.group(2)
        items = []
        own = _own_dict(value) or {}
        for name, held in list(own.items())[:LIMIT]:
            if (
                isinstance(name, str)
                and name.isidentifier()
                and name.startswith(prefix)
                and (not name.startswith("_") or prefix.startswith("_"))
            ):
                items.append({"label": name, "kind": "attribute", "detail": _type_name(held)})
        for name, dtype in (_columns(value) or {}).items():
            if (
                name.isidentifier()
                and not keyword.iskeyword(name)
                and name.startswith(prefix)
                and not any(name in k.__dict__ for k in type(value).__mro__)
                and name not in own
            ):
                items.append({"label": name, "kind": "column", "detail": dtype})
        return {"what": "attribute", "prefix": prefix, "items": items}
    bare = _BARE.search(before)
    if bare is None:
        return None
    prefix = bare.group(1)
    skip = set(bound) | (hidden or set())
    items = []
    for name, held in list(namespace.items()):
        if len(items) >= LIMIT:
            break
        if (
            not isinstance(name, str)
            or not name.startswith(prefix)
            or name in skip
            or keyword.iskeyword(name)
            or hasattr(builtins, name)
            or (name.startswith("_") and not prefix.startswith("_"))
            or isinstance(held, types.ModuleType)
        ):
            continue
        items.append({"label": name, "kind": "name", "detail": _type_name(held)})
    return {"what": "name", "prefix": prefix, "items": items}


class _Preview(reprlib.Repr):
    """A short repr that runs no `__repr__` but the interpreter's own and its libraries'."""

    def repr1(self, x: Any, level: int) -> str:
        kind = type(x)
        if (
            kind.__module__ == "builtins"
            or inspect.getattr_static(kind, "__repr__") is _OBJECT_REPR
            or _from_library(x)
        ):
            return super().repr1(x, level)
        return f"<{_type_name(x)}>"


_PREVIEW = _Preview()
_PREVIEW.maxstring = PREVIEW
_PREVIEW.maxother = PREVIEW


def describe(namespace: dict[str, Any], chain: str) -> dict[str, Any] | None:
    """What hover shows of the value `chain` names: type, shape or length, a table's
    columns, a preview, a callable's signature and doc. None: nothing there to read."""
    value = resolve(namespace, chain)
    if value is _MISSING:
        return None
    about: dict[str, Any] = {"expression": chain, "type": _type_name(value)}
    if isinstance(value, (list, tuple, dict, set, frozenset, str, bytes)):
        about["length"] = len(value)
    elif _from_library(value):
        try:
            shape = value.shape
            if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
                about["shape"] = list(shape)
        except Exception:
            pass
        columns = _columns(value)
        if columns is not None:
            about["columns"] = dict(list(columns.items())[:50])
    if callable(value):
        about.update(_callable(value))
    elif "columns" not in about:
        about["preview"] = _PREVIEW.repr(value)[:PREVIEW]
        own = None if isinstance(value, types.ModuleType) else _own_dict(value)
        if own:
            about["attributes"] = {
                str(k): _type_name(v)
                for k, v in list(own.items())[:30]
                if not str(k).startswith("_")
            }
    return about


class _Written:
    """An annotation written as a string (`from __future__ import annotations`), shown bare."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _signature(value: Any) -> inspect.Signature | None:
    try:
        sig = inspect.signature(value)
    except (TypeError, ValueError):
        return None

    def bare(annotation: Any) -> Any:
        return _Written(annotation) if isinstance(annotation, str) else annotation

    parameters = [p.replace(annotation=bare(p.annotation)) for p in sig.parameters.values()]
    return sig.replace(parameters=parameters, return_annotation=bare(sig.return_annotation))


_PLAIN_DOC = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _doc(value: Any) -> str:
    """A callable's docstring, read without running a `__doc__` property."""
    if isinstance(value, _PLAIN_DOC):
        doc = value.__doc__
    else:
        doc = inspect.getattr_static(value, "__doc__", None)
    return inspect.cleandoc(doc)[:2000] if isinstance(doc, str) else ""


def _callable(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sig = _signature(value)
    if sig is not None:
        out["signature"] = str(sig)
    doc = _doc(value)
    if doc:
        out["doc"] = doc
    return out


def _open_call(before: str) -> tuple[str, int] | None:
    """The callee before the innermost unclosed `(`, and how many top-level commas follow."""
    depth, commas = 0, 0
    for index in range(len(before) - 1, -1, -1):
        char = before[index]
        if char in ")]}":
            depth += 1
        elif char in "([{":
            if depth == 0:
                if char != "(":
                    return None
                callee = re.search(_CHAIN + r"\s*$", before[:index])
                return (callee.group(0).strip(), commas) if callee else None
            depth -= 1
        elif char == "," and depth == 0:
            commas += 1
    return None


def signature(namespace: dict[str, Any], before: str) -> dict[str, Any] | None:
    """Signature help for the call the cursor is in, from the live callable."""
    found = _open_call(before)
    if found is None:
        return None
    callee, commas = found
    value = resolve(namespace, callee)
    if value is _MISSING or not callable(value):
        return None
    sig = _signature(value)
    if sig is None:
        return None
    parameters = [str(p) for p in sig.parameters.values()]
    return {
        "label": f"{callee}{sig}",
        "parameters": parameters,
        "active": min(commas, max(len(parameters) - 1, 0)),
        "doc": _doc(value),
    }


def picture(namespace: dict[str, Any], hidden: set[str], limit: int = 200) -> dict[str, Any]:
    """The namespace in brief, for answers while the kernel is busy and cannot be asked:
    each name's type, and for those with them its attributes, keys or columns."""
    names: dict[str, Any] = {}
    for name, value in list(namespace.items()):
        if len(names) >= limit:
            break
        if not isinstance(name, str) or name.startswith("_") or name in hidden:
            continue
        if isinstance(value, types.ModuleType):
            continue
        entry: dict[str, Any] = {"type": _type_name(value)}
        keys = _keys(value) if isinstance(value, dict) or _from_library(value) else []
        if keys:
            entry["keys"] = keys[:100]
        own = None if isinstance(value, type) else _own_dict(value)
        if own:
            entry["attributes"] = {
                str(k): _type_name(v) for k, v in list(own.items())[:100] if isinstance(k, str)
            }
        names[name] = entry
    return {"names": names}


# -- the comm ------------------------------------------------------------------------


def _answer(shell: Any, data: dict[str, Any]) -> Any:
    namespace = shell.user_ns
    op = data.get("op")
    if op == "complete":
        return complete(
            namespace, str(data.get("before", "")), list(data.get("bound", ())), _hidden(shell)
        )
    if op == "describe":
        return describe(namespace, str(data.get("expression", "")))
    if op == "signature":
        return signature(namespace, str(data.get("before", "")))
    if op == "picture":
        return picture(namespace, _hidden(shell))
    return None


def register() -> None:
    """Open the comm target the server asks through (once per kernel)."""
    from IPython import get_ipython

    shell = get_ipython()
    manager = getattr(getattr(shell, "kernel", None), "comm_manager", None)
    if manager is None:
        return

    def opened(comm: Any, _open_msg: Any) -> None:
        def asked(msg: Any) -> None:
            data = msg.get("content", {}).get("data") or {}
            try:
                answer = _answer(shell, data)
                comm.send({"id": data.get("id"), "answer": answer})
            except Exception as exc:  # an answer that failed is no answer, never a crash
                comm.send({"id": data.get("id"), "error": f"{type(exc).__name__}: {exc}"})

        comm.on_msg(asked)

    manager.register_target(TARGET, opened)
