"""Runs inside the kernel as the module `_runfix_live`: what the kernel knows where the user
types (completion, hover, signature help) and the names it holds (`variables`), read without
running a line of the user's code.

The rule: every read goes through a lookup no user code can hook. A value's type is
`type(x)` (never `x.__class__`, which a property or a `__getattribute__` answers: Django's
`SimpleLazyObject` would load its value); a class's namespace, bases, name and module come
from `type`'s own descriptors called directly (a metaclass's `__getattribute__` never sees
them); an instance's attributes are read from its `__dict__` through the interpreter's own
descriptor, or from a `__slots__` slot, never through a property, a descriptor or
`__getattr__`. Type tests are identity (`type(x) is dict`, a base found in the class's
`__mro__` by `is`) — `isinstance`, `len`, `repr`, `str`, `hash`, `==` and sorting run on
exact builtins only; a dictionary is searched by walking it and comparing keys of exactly
the key's type (a lookup would call a stored key's `__eq__` when the hashes match). Lengths
of containers' subclasses are the base type's (`list.__len__(x)`).

Libraries' objects (pandas, numpy, polars) are described from their metadata — dtype,
shape, column labels that are exact `str`/`int` — and their repr is shown only when no
element is a Python object (a numpy dtype without objects). A type counts as a library's
only when the library's module exports that very class under its name.

Only what a static language server cannot know is offered for completion: names that exist
in the kernel but are not bound in the document, attributes set on an instance at run time,
dictionary keys and table columns. A static server beside runfix (Pylance, pyright, pylsp)
lists the rest, and the editor merges the two lists without duplicates.

The server asks over a comm (`TARGET`), on a kernel subshell where the kernel has them, so an
answer never waits for a running cell. Answers are worked out on a worker thread, with a
deadline their walks check; a worker that still has not answered is abandoned (and said so)
and the next question goes to a new one. This file must run on any Python 3.8+ with
IPython, and import nothing from runfix.
"""

from __future__ import annotations

import inspect
import itertools
import json
import keyword
import os
import queue
import re
import sys
import threading
import time
import types
from collections.abc import Callable
from typing import Any, ClassVar

TARGET = "runfix.live"
"""The comm target the server opens."""
LIMIT = 500
"""Items in one completion answer."""
PREVIEW = 200
"""Characters of a value's preview."""
DEADLINE = 1.0
"""Seconds one answer's walk may take before it stops."""
ABANDON = 2.0
"""Seconds the comm waits for an answer before it gives up on its thread."""
STUCK = 4
"""Abandoned answers still running past which no new one is started."""

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

# -- reads no user code can hook -------------------------------------------------------

_class_namespace = type.__dict__["__dict__"].__get__
_class_mro = type.__dict__["__mro__"].__get__
_class_qualname = type.__dict__["__qualname__"].__get__
_class_module = type.__dict__["__module__"].__get__
_class_text_signature = type.__dict__["__text_signature__"].__get__
_module_namespace: Any = vars(types.ModuleType)["__dict__"].__get__
_function_code = types.FunctionType.__dict__["__code__"].__get__
_function_defaults = types.FunctionType.__dict__["__defaults__"].__get__
_function_kwdefaults = types.FunctionType.__dict__["__kwdefaults__"].__get__
_function_doc = types.FunctionType.__dict__["__doc__"].__get__
_function_qualname = types.FunctionType.__dict__["__qualname__"].__get__
_function_namespace = types.FunctionType.__dict__["__dict__"].__get__
_function_annotations = types.FunctionType.__dict__["__annotations__"].__get__  # noqa: RUF063 (`inspect.get_annotations` reads through getattr)
_method_function = types.MethodType.__dict__["__func__"].__get__
_static_function = staticmethod.__dict__["__func__"].__get__
_SLOTS = (types.GetSetDescriptorType, types.MemberDescriptorType)
_BUILTIN_CALLABLES = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
)
_TYPE_CALL = type.__dict__["__call__"]
_OBJECT_INIT = object.__dict__["__init__"]
_OBJECT_NEW = object.__dict__["__new__"]
_SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray)
"""Bases whose own `__len__` gives a subclass's length without running the subclass's."""


class _TooLong(Exception):
    """The walk went past the answer's deadline."""


_clock = threading.local()


def _tick() -> None:
    if time.monotonic() > getattr(_clock, "until", float("inf")):
        raise _TooLong


def _one_of(kind: Any, kinds: tuple[Any, ...]) -> bool:
    """`kind in kinds` by identity (`in` would call a metaclass's `__eq__`)."""
    return any(candidate is kind for candidate in kinds)


def _mro(kind: Any) -> tuple[Any, ...]:
    try:
        mro = _class_mro(kind)
    except TypeError:
        return ()
    return mro if type(mro) is tuple else ()


def _is_sub(kind: Any, base: type) -> bool:
    return _one_of(base, _mro(kind))


def _is_class(value: Any) -> bool:
    return _is_sub(type(value), type)


def _in_class(kind: Any, name: str) -> Any:
    """`name` as `kind` or a base holds it in its namespace, unread (a descriptor stays one)."""
    for klass in _mro(kind):
        found = _class_namespace(klass).get(name, _MISSING)
        if found is not _MISSING:
            return found
    return _MISSING


def _descriptor(found: Any) -> bool:
    return _in_class(type(found), "__get__") is not _MISSING


def _data_descriptor(found: Any) -> bool:
    kind = type(found)
    return (
        _in_class(kind, "__set__") is not _MISSING or _in_class(kind, "__delete__") is not _MISSING
    )


def _scan(mapping: Any, key: Any) -> Any:
    """`mapping[key]` for a str or int key, compared only with keys of exactly its type."""
    want = type(key)
    for index, (held, value) in enumerate(dict.items(mapping)):
        if not index & 1023:
            _tick()
        if type(held) is want and held == key:
            return value
    return _MISSING


def _str_items(mapping: Any, limit: int) -> list[tuple[str, Any]]:
    """The first `limit` entries of a dict whose keys are exact `str`."""
    out: list[tuple[str, Any]] = []
    for index, (key, value) in enumerate(dict.items(mapping)):
        if not index & 1023:
            _tick()
        if type(key) is str:
            out.append((key, value))
            if len(out) >= limit:
                break
    return out


def _own_dict(value: Any) -> dict[Any, Any] | None:
    """The instance's `__dict__`, through the interpreter's own descriptor only (a class may
    make `__dict__` a property)."""
    kind = type(value)
    if _is_sub(kind, types.ModuleType):
        own = _module_namespace(value)
        return own if type(own) is dict else None
    for klass in _mro(kind):
        slot = _class_namespace(klass).get("__dict__", _MISSING)
        if slot is _MISSING:
            continue
        if not _one_of(type(slot), _SLOTS):
            return None
        try:
            own = slot.__get__(value, kind)
        except Exception:
            return None
        return own if type(own) is dict else None
    return None


def _attribute(value: Any, name: str) -> Any:
    """`value.name` where reading it runs nothing: a class's plain attribute, an instance's
    own, a slot's; else _MISSING."""
    if _is_class(value):
        found = _in_class(value, name)
        return _MISSING if found is _MISSING or _descriptor(found) else found
    kind = type(value)
    found = _in_class(kind, name)
    if found is not _MISSING and _data_descriptor(found):
        if type(found) is not types.MemberDescriptorType:  # a property, a custom descriptor
            return _MISSING
        try:
            return found.__get__(value, kind)  # a `__slots__` slot
        except Exception:
            return _MISSING
    own = _own_dict(value)
    if own is not None:
        held = _scan(own, name)
        if held is not _MISSING:
            return held
    return _MISSING if found is _MISSING or _descriptor(found) else found


def _item(value: Any, key: Any) -> Any:
    kind = type(value)
    if _is_sub(kind, dict):
        return _scan(value, key)
    if type(key) is int:
        for base in (list, tuple):
            if _is_sub(kind, base):
                try:
                    return base.__getitem__(value, key)
                except IndexError:
                    return _MISSING
    return _MISSING


def resolve(namespace: dict[str, Any], chain: str) -> Any:
    """The value `chain` names (`cfg["a"].b[0]`), or _MISSING where a step would have to
    run code."""
    head = re.match(_NAME, chain)
    if head is None:
        return _MISSING
    value = _scan(namespace, head.group(0))
    rest = chain[head.end() :]
    for step in _PART.finditer(rest):
        if value is _MISSING:
            return _MISSING
        attr, single, double, number = step.groups()
        if attr is not None:
            value = _attribute(value, attr)
        elif number is not None:
            value = _item(value, int(number))
        else:
            value = _item(value, single if single is not None else double)
    return value


# -- what a value is -------------------------------------------------------------------


def _kind_name(kind: Any) -> str:
    try:
        name = _class_qualname(kind)
        module = _class_module(kind)
    except Exception:
        return "?"
    if type(name) is not str:
        name = "?"
    if type(module) is not str or module in ("builtins", "__main__"):
        return name
    return f"{module}.{name}"


def _type_name(value: Any) -> str:
    return _kind_name(type(value))


def _short_name(value: Any) -> str:
    try:
        name = _class_qualname(type(value))
    except Exception:
        return "?"
    return name if type(name) is str else "?"


_libraries: dict[int, tuple[Any, str | None]] = {}


def _library(kind: Any) -> str | None:
    """The library (`_LIBRARIES`) whose module defines `kind` and exports that very class
    under its name, else None: a class that only says it is pandas's is not."""
    known = _libraries.get(id(kind))
    if known is not None and known[0] is kind:
        return known[1]
    root = None
    try:
        module = _class_module(kind)
        name = _class_qualname(kind)
    except Exception:
        module = name = None
    if type(module) is str and type(name) is str and module.partition(".")[0] in _LIBRARIES:
        home = _scan(sys.modules, module)
        held = _module_namespace(home) if _is_sub(type(home), types.ModuleType) else None
        for part in name.split("."):
            if type(held) is dict:
                held = _scan(held, part)
            elif _is_class(held):
                held = _class_namespace(held).get(part, _MISSING)
            else:
                held = _MISSING
        if held is kind or _numpy_dtype_kind(kind):
            root = module.partition(".")[0]
    if len(_libraries) < 4096:
        _libraries[id(kind)] = (kind, root)
    return root


def _numpy(name: str) -> Any:
    numpy = _scan(sys.modules, "numpy")
    if numpy is _MISSING or not _is_sub(type(numpy), types.ModuleType):
        return _MISSING
    namespace = _module_namespace(numpy)
    return _scan(namespace, name) if type(namespace) is dict else _MISSING


def _numpy_dtype_kind(kind: Any) -> bool:
    """A numpy dtype's class (numpy before 1.25 names them `dtype[float64]`, exported nowhere)."""
    dtype = _numpy("dtype")
    return _is_class(dtype) and _is_sub(kind, dtype)


def _length(value: Any) -> int | None:
    kind = type(value)
    for base in _SIZED:
        if _is_sub(kind, base):
            return base.__len__(value)
    return None


def _library_read(value: Any, name: str) -> Any:
    """`value.name` for a library's object, only where its class declares `name` (pandas
    answers other names from the object's own labels)."""
    if _in_class(type(value), name) is _MISSING:
        return _MISSING
    try:
        return getattr(value, name)
    except Exception:
        return _MISSING


def _shape(value: Any) -> list[int] | None:
    shape = _library_read(value, "shape")
    if type(shape) is tuple and all(type(n) is int for n in shape):
        return list(shape)
    return None


def _dtype_text(dtype: Any) -> str:
    """A dtype's name when a library made it; else the name of its type."""
    if _library(type(dtype)) is None:
        return f"<{_type_name(dtype)}>"
    try:
        text = str(dtype)
    except Exception:
        return f"<{_type_name(dtype)}>"
    return text if type(text) is str else f"<{_type_name(dtype)}>"


def _label(label: Any) -> str | None:
    if type(label) is str:
        return label
    if type(label) is int:
        return repr(label)
    return None


def _columns(value: Any) -> dict[str, str] | None:
    """A table's columns and their types (pandas, polars): labels that are exact `str` or
    `int` only, dtypes only as their library names them."""
    if _library(type(value)) is None:
        return None
    columns = _library_read(value, "columns")
    dtypes = _library_read(value, "dtypes")
    if columns is _MISSING or dtypes is _MISSING:
        return None
    try:
        labels = list(itertools.islice(columns, LIMIT))  # (a slice would build a new Index)
        kinds = list(itertools.islice(dtypes, LIMIT))
    except Exception:
        return None
    if len(labels) != len(kinds):
        return None
    out: dict[str, str] = {}
    for label, dtype in zip(labels, kinds):  # noqa: B905 (3.8)
        _tick()
        text = _label(label)
        if text is not None:
            out[text] = _dtype_text(dtype)
    return out


def _repr_is_safe(value: Any) -> bool:
    """A library's repr runs no user code: numpy's scalars and arrays, pandas's Series and
    Index, when their dtype is numpy's and holds no Python objects."""
    kind = type(value)
    root = _library(kind)
    if root is None or root == "polars":
        return False
    if root == "pandas" and _in_class(kind, "columns") is not _MISSING:
        return False  # a table: its columns say more
    dtype = _library_read(value, "dtype")
    if dtype is _MISSING or not _numpy_dtype_kind(type(dtype)):
        return False
    try:
        return dtype.hasobject is False
    except Exception:
        return False


def _preview(value: Any, depth: int = 2) -> str:
    """A short repr that runs no `__repr__` but the interpreter's own and, where it runs
    nothing of the user's, a library's."""
    kind = type(value)
    if kind is str or kind is bytes or kind is bytearray:
        cut = value[: PREVIEW + 1]
        return repr(cut) if len(cut) <= PREVIEW else repr(cut[:PREVIEW]) + "…"
    if kind is int:
        bits = value.bit_length()
        return repr(value) if bits <= 4000 else f"<int of {bits:,} bits>"
    if value is None or value is ... or _one_of(kind, (float, complex, bool, range)):
        return repr(value)
    if _one_of(kind, (list, tuple, set, frozenset, dict)):
        return _container_preview(value, kind, depth)
    if _is_class(value):
        return f"<class '{_kind_name(value)}'>"
    if kind is types.FunctionType:
        name = _function_qualname(value)
        return f"<function {name if type(name) is str else '?'}>"
    if _repr_is_safe(value):
        try:
            text = repr(value)
        except Exception:
            text = ""
        if type(text) is str and text:
            return text
    return f"<{_kind_name(kind)}>"


_BRACKETS = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    dict: ("{", "}"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
}


def _container_preview(value: Any, kind: Any, depth: int) -> str:
    opening, closing = _BRACKETS[kind]
    if depth <= 0:
        return f"{opening}…{closing}" if _length(value) else f"{opening}{closing}"
    parts: list[str] = []
    size = 0
    entries = dict.items(value) if kind is dict else value
    for index, entry in enumerate(entries):
        _tick()
        if index >= 20 or size > PREVIEW:
            parts.append("…")
            break
        if kind is dict:
            text = f"{_preview(entry[0], 0)}: {_preview(entry[1], depth - 1)}"
        else:
            text = _preview(entry, depth - 1)
        parts.append(text)
        size += len(text) + 2
    if kind is tuple and len(parts) == 1:
        return f"({parts[0]},)"
    if kind is set and not parts:
        return "set()"
    return opening + ", ".join(parts) + closing


# -- callables: signature and doc from the code object --------------------------------


class _Written:
    """Text shown as it is where a signature prints a default or an annotation."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _annotation(value: Any, depth: int = 3) -> str:
    kind = type(value)
    if kind is str:
        return str(value)
    if value is None:
        return "None"
    if _is_class(value):
        name = _kind_name(value)
        return name.rpartition(".")[2] if name.startswith("typing.") else name
    special = _attribute(value, "_name") if _kind_name(kind).startswith("typing.") else _MISSING
    if depth > 0 and (kind is types.GenericAlias or _kind_name(kind).startswith("typing.")):
        origin = _attribute(value, "__origin__")
        args = _attribute(value, "__args__")
        if origin is not _MISSING and type(args) is tuple:
            inner = ", ".join(_annotation(a, depth - 1) for a in args[:10])
            head = special if type(special) is str else _annotation(origin, depth - 1)
            return f"{head}[{inner}]"
    union = getattr(types, "UnionType", None)
    if depth > 0 and union is not None and kind is union:
        args = _attribute(value, "__args__")
        if type(args) is tuple:
            return " | ".join(_annotation(a, depth - 1) for a in args[:10])
    if type(special) is str:
        return special
    return _preview(value, 0)


def _unwrapped(function: Any) -> Any:
    """The function `functools.wraps` copied its signature from, as `inspect` follows it."""
    for _ in range(10):
        own = _function_namespace(function)
        inner = _scan(own, "__wrapped__") if type(own) is dict else _MISSING
        if type(inner) is not types.FunctionType:
            return function
        function = inner
    return function


def _function_signature(function: Any, bound: bool) -> inspect.Signature | None:
    """A plain function's signature from its code object, defaults and annotations shown
    only as `_preview` and `_annotation` write them; `bound`: the first parameter is taken."""
    function = _unwrapped(function)
    code = _function_code(function)
    if type(code) is not types.CodeType:
        return None
    names = code.co_varnames
    positional, keyword_only = code.co_argcount, code.co_kwonlyargcount
    only = getattr(code, "co_posonlyargcount", 0)
    defaults = _function_defaults(function)
    defaults = defaults if type(defaults) is tuple else ()
    kwdefaults = _function_kwdefaults(function)
    annotations = _annotations(function)
    P = inspect.Parameter
    parameters: list[inspect.Parameter] = []

    def add(name: str, kind: Any, default: Any = _MISSING) -> None:
        shown = P.empty if default is _MISSING else _Written(_preview(default, 1))
        note = _scan(annotations, name) if annotations else _MISSING
        hint = P.empty if note is _MISSING else _Written(_annotation(note))
        parameters.append(P(name, kind, default=shown, annotation=hint))

    first_default = positional - len(defaults)
    for index in range(positional):
        default = defaults[index - first_default] if index >= first_default else _MISSING
        add(names[index], P.POSITIONAL_ONLY if index < only else P.POSITIONAL_OR_KEYWORD, default)
    at = positional
    if code.co_flags & inspect.CO_VARARGS:
        add(names[at + keyword_only], P.VAR_POSITIONAL)
    for index in range(at, at + keyword_only):
        found = _scan(kwdefaults, names[index]) if type(kwdefaults) is dict else _MISSING
        add(names[index], P.KEYWORD_ONLY, found)
    if code.co_flags & inspect.CO_VARKEYWORDS:
        extra = 1 if code.co_flags & inspect.CO_VARARGS else 0
        add(names[at + keyword_only + extra], P.VAR_KEYWORD)
    if bound and parameters and parameters[0].kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
        parameters = parameters[1:]
    back = _scan(annotations, "return") if annotations else _MISSING
    try:
        return inspect.Signature(
            parameters,
            return_annotation=inspect.Signature.empty
            if back is _MISSING
            else _Written(_annotation(back)),
            __validate_parameters__=False,
        )
    except Exception:
        return None


def _annotations(function: Any) -> dict[Any, Any] | None:
    """A function's annotations where reading them runs nothing (from 3.14 they are
    evaluated on first read: left out there)."""
    if sys.version_info >= (3, 14):
        return None
    found = _function_annotations(function)
    return found if type(found) is dict else None


def _text_signature(text: Any) -> str | None:
    """A builtin's `__text_signature__` as `inspect` shows it (`$self` and the like gone)."""
    if type(text) is not str or not text.startswith("("):
        return None
    text = re.sub(r"\$\w+,?\s*", "", text)
    return str(re.sub(r"^\(/,?\s*", "(", text))


def _signature_text(value: Any) -> str | None:
    kind = type(value)
    if kind is types.FunctionType:
        sig = _function_signature(value, bound=False)
    elif kind is types.MethodType:
        function = _method_function(value)
        sig = _function_signature(function, True) if type(function) is types.FunctionType else None
    elif _one_of(kind, _BUILTIN_CALLABLES):
        descriptor = _in_class(kind, "__text_signature__")
        if not _one_of(type(descriptor), _SLOTS):
            return None
        try:
            return _text_signature(descriptor.__get__(value, kind))
        except Exception:
            return None
    elif _is_class(value):
        sig = _class_signature(value)
        if sig is None or type(sig) is str:
            return sig
    else:
        call = _in_class(kind, "__call__")
        sig = _function_signature(call, True) if type(call) is types.FunctionType else None
    return None if sig is None else str(sig)


def _class_signature(value: Any) -> Any:
    """What calling the class takes: its `__init__`'s, else its `__new__`'s parameters; a
    builtin's text signature; nothing where a metaclass takes the call."""
    if _in_class(type(value), "__call__") is not _TYPE_CALL:
        return None
    init = _in_class(value, "__init__")
    if type(init) is types.FunctionType:
        return _function_signature(init, True)
    new = _in_class(value, "__new__")
    if type(new) is staticmethod:
        new = _static_function(new)
    if type(new) is types.FunctionType:
        return _function_signature(new, True)
    module = _class_module(value)
    if (
        init is _OBJECT_INIT
        and new is _OBJECT_NEW
        and not (type(module) is str and module == "builtins")
    ):
        return "()"
    try:
        return _text_signature(_class_text_signature(value))
    except Exception:
        return None


def _doc(value: Any) -> str:
    """A callable's docstring, read without running a `__doc__` property."""
    kind = type(value)
    if kind is types.MethodType:
        value, kind = _method_function(value), types.FunctionType
    if kind is types.FunctionType:
        doc = _function_doc(value)
    elif _is_class(value):
        doc = _class_namespace(value).get("__doc__")
    elif _one_of(kind, _BUILTIN_CALLABLES):
        descriptor = _in_class(kind, "__doc__")
        try:
            doc = descriptor.__get__(value, kind) if _one_of(type(descriptor), _SLOTS) else None
        except Exception:
            doc = None
    else:
        doc = _in_class(kind, "__doc__")
    return inspect.cleandoc(doc)[:2000] if type(doc) is str else ""


def _callable(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sig = _signature_text(value)
    if sig is not None:
        out["signature"] = sig
    doc = _doc(value)
    if doc:
        out["doc"] = doc
    return out


# -- what the server asks ------------------------------------------------------------


def _keys(value: Any) -> list[tuple[str, str]]:
    """(key, what it holds) for `value[` completion: a dict's `str` keys, a table's columns."""
    if _is_sub(type(value), dict):
        return [(k, _type_name(v)) for k, v in _str_items(value, LIMIT)]
    columns = _columns(value)
    if columns is not None:
        return [(k, t) for k, t in columns.items() if not k[:1].isdigit() and k[:1] != "-"]
    return []


def _is_module(value: Any) -> bool:
    return _is_sub(type(value), types.ModuleType)


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
        if value is _MISSING or _is_module(value) or _is_class(value):
            return None  # a module's or a class's members are in their source: static
        return {
            "what": "attribute",
            "prefix": attr.group(2),
            "items": _members(value, attr.group(2)),
        }
    bare = _BARE.search(before)
    if bare is None:
        return None
    prefix = bare.group(1)
    skip = set(bound) | (hidden or set()) | _builtin_names()
    items = []
    for name, held in _str_items(namespace, len(namespace) + 1):
        if len(items) >= LIMIT:
            break
        if (
            not name.startswith(prefix)
            or name in skip
            or keyword.iskeyword(name)
            or (name.startswith("_") and not prefix.startswith("_"))
            or _is_module(held)
        ):
            continue
        items.append({"label": name, "kind": "name", "detail": _type_name(held)})
    return {"what": "name", "prefix": prefix, "items": items}


_builtins_seen: list[Any] = [None, set()]


def _builtin_names() -> set[str]:
    """The builtins' names (made again when a name was put there or taken away)."""
    import builtins

    space = _module_namespace(builtins)
    if _builtins_seen[0] != len(space):
        _builtins_seen[:] = [len(space), {name for name, _ in _str_items(space, 10_000)}]
    names: set[str] = _builtins_seen[1]
    return names


def _members(value: Any, prefix: str) -> list[dict[str, Any]]:
    """An instance's own attributes and a table's columns that are identifiers."""
    items = []
    own = _own_dict(value)
    names: set[str] = set()
    for name, held in _str_items(own, LIMIT) if own is not None else ():
        names.add(name)
        if (
            name.isidentifier()
            and name.startswith(prefix)
            and (not name.startswith("_") or prefix.startswith("_"))
        ):
            items.append({"label": name, "kind": "attribute", "detail": _type_name(held)})
    for name, dtype in (_columns(value) or {}).items():
        if (
            name.isidentifier()
            and not keyword.iskeyword(name)
            and name.startswith(prefix)
            and name not in names
            and _in_class(type(value), name) is _MISSING
        ):
            items.append({"label": name, "kind": "column", "detail": dtype})
    return items


def describe(namespace: dict[str, Any], chain: str) -> dict[str, Any] | None:
    """What hover shows of the value `chain` names: type, shape or length, a table's
    columns, a preview, a callable's signature and doc. None: nothing there to read."""
    value = resolve(namespace, chain)
    if value is _MISSING:
        return None
    about: dict[str, Any] = {"expression": chain, "type": _type_name(value), **_size(value)}
    if callable(value):
        about.update(_callable(value))
    elif "columns" not in about:
        about["preview"] = _preview(value)[:PREVIEW]
        own = None if _is_module(value) else _own_dict(value)
        if own:
            about["attributes"] = {
                k: _type_name(v) for k, v in _str_items(own, 30) if not k.startswith("_")
            }
    return about


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
    sig = _signature_text(value)
    if sig is None:
        return None
    parameters = _parameters(sig)
    return {
        "label": f"{callee}{sig}",
        "parameters": parameters,
        "active": min(commas, max(len(parameters) - 1, 0)),
        "doc": _doc(value),
    }


def _parameters(sig: str) -> list[str]:
    """The parameters of a signature's text, split at its top-level commas."""
    inner = sig[1 : sig.rfind(")")] if sig.startswith("(") else ""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(inner):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:index].strip())
            start = index + 1
    if inner.strip():
        parts.append(inner[start:].strip())
    return [p for p in parts if p not in ("/", "*")]


def picture(namespace: dict[str, Any], hidden: set[str], limit: int = 200) -> dict[str, Any]:
    """The namespace in brief, for answers while the kernel is busy and cannot be asked:
    each name's type, and for those with them its attributes, keys or columns."""
    names: dict[str, Any] = {}
    for name, value in _str_items(namespace, len(namespace) + 1):
        if len(names) >= limit:
            break
        if name.startswith("_") or name in hidden or _is_module(value):
            continue
        entry: dict[str, Any] = {"type": _type_name(value)}
        keys = _keys(value)
        if keys:
            entry["keys"] = keys[:100]
        own = None if _is_class(value) else _own_dict(value)
        if own:
            entry["attributes"] = {k: _type_name(v) for k, v in _str_items(own, 100)}
        names[name] = entry
    return {"names": names}


def _size(value: Any) -> dict[str, Any]:
    """A container's length, or a library object's shape and columns (the first 50)."""
    length = _length(value)
    if length is not None:
        return {"length": length}
    out: dict[str, Any] = {}
    if _library(type(value)) is not None:
        shape = _shape(value)
        if shape is not None:
            out["shape"] = shape
        columns = _columns(value)
        if columns is not None:
            out["columns"] = dict(list(columns.items())[:50])
    return out


def _rule() -> Any:
    """The secret rule (`executor/redact.py`): the module the server loaded beside this one
    in the kernel, or runfix's own where this file is imported (the tests)."""
    rule = sys.modules.get("_runfix_redact")
    if rule is None:
        from executor import redact as rule
    return rule


class _Secrets:
    """What the rule looks for while one answer is made: the kernel's own environment's
    secrets (a container's or a remote server's are not the editor's) and the names the
    user added (`secretNames`)."""

    values: ClassVar[dict[str, str]] = {}
    extra: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def read(cls, extra: Any = ()) -> None:
        cls.extra = tuple(str(n) for n in extra or () if type(n) is str)
        cls.values = _rule().env_secrets(os.environ, cls.extra)


def _said(name: str, text: str) -> str:
    """A preview of a value named `name` as the secret rule lets it out (before it is cut:
    a secret cut in two is no longer found)."""
    hidden = _rule().hide_value(name, text, _Secrets.values, _Secrets.extra)
    return text if hidden is None else hidden


def _variable(name: str, value: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "type": _short_name(value), **_size(value)}
    text = _said(name, _preview(value, 1))
    item["summary"] = text if len(text) <= 80 else text[:79] + "…"
    return item


def variables_of(namespace: dict[str, Any], hidden: set[str], limit: int = 200) -> list[Any]:
    """The user's names in brief: type, length or shape, a table's columns, a preview (a
    secret's hidden: `_said`)."""
    items: list[dict[str, Any]] = []
    for name, value in _str_items(namespace, len(namespace) + 1):
        if name.startswith("_") or name in hidden or _is_module(value):
            continue
        items.append(_variable(name, value))
        if len(items) >= limit:
            break
    return items


def variables(limit: int = 200, names: Any = ()) -> str:
    """The kernel's names as JSON (`runfix.variables`, agents, the model's context):
    modules, private and IPython's own names left out; what was read within the deadline.
    `names`: more names whose values are secrets (the `secretNames` setting)."""
    from IPython import get_ipython

    shell = get_ipython()
    _Secrets.read(names)
    _clock.until = time.monotonic() + 2 * DEADLINE
    try:
        items = variables_of(shell.user_ns, _hidden(shell), limit)
    except _TooLong:
        items = []
    finally:
        _clock.until = float("inf")
    return json.dumps(items)


# -- what the failing code held (a fix request's evidence) ------------------------------

EVIDENCE_FRAMES = 3
"""The innermost frames of the user's code described."""
EVIDENCE_LOCALS = 12
"""Locals described per frame."""
EVIDENCE_HAS = 40
"""Keys or attributes listed of the object a key or attribute was missing from."""
_ARITHMETIC: dict[Any, Callable[[Any, Any], Any]] = {}


def _system_paths() -> tuple[str, ...]:
    import sysconfig

    paths = sysconfig.get_paths()
    found = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(sorted(p for p in found if p))


def _users(filename: str, system: tuple[str, ...]) -> bool:
    """A frame of the user's code: a real file (a cell's document, a module), not the
    standard library's, an installed package's or the interpreter's own."""
    return not (
        filename.startswith("<")
        or "site-packages" in filename
        or "dist-packages" in filename
        or any(filename.startswith(p) for p in system)
    )


def _shown(name: str, value: Any) -> list[Any]:
    """[type, preview, length] of a value, a secret's hidden (`_said`)."""
    text = _preview(value, 2)
    said = _said(name, text)
    length = _length(value) if said == text else None
    return [_type_name(value), said if len(said) <= 160 else said[:159] + "…", length]


def _frame_locals(frame: Any) -> list[tuple[str, Any]]:
    """A function frame's locals, without running user code (a snapshot; in 3.13 a proxy
    whose reads are the interpreter's own)."""
    held = frame.f_locals
    items = dict.items(held) if type(held) is dict else held.items()
    return [(k, v) for k, v in items if type(k) is str and not k.startswith((".", "__"))]


def _lookup(frame: Any, name: str) -> Any:
    """A name as the frame sees it: its locals, its globals, the builtins."""
    for space in (frame.f_locals, frame.f_globals):
        if type(space) is dict:
            found = _scan(space, name)
        else:
            found = space.get(name, _MISSING) if name in space else _MISSING
        if found is not _MISSING:
            return found
    import builtins

    return _scan(vars(builtins), name)


def _value_of(node: Any, frame: Any) -> Any:
    """What an expression of the failing line held, where reading it runs no user code:
    names, attributes, constant subscripts, `len` of a builtin container, and arithmetic on
    exact ints and floats; _MISSING elsewhere."""
    import ast

    _tick()
    if type(node) is ast.Constant:
        return node.value
    if type(node) is ast.Name:
        return _lookup(frame, node.id)
    if type(node) is ast.Attribute:
        owner = _value_of(node.value, frame)
        return _MISSING if owner is _MISSING else _attribute(owner, node.attr)
    if type(node) is ast.Subscript:
        owner = _value_of(node.value, frame)
        key = _value_of(node.slice, frame)
        if owner is _MISSING or type(key) not in (int, str):
            return _MISSING
        return _item(owner, key)
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub:
        inner = _value_of(node.operand, frame)
        return -inner if type(inner) in (int, float) else _MISSING
    if type(node) is ast.BinOp:
        left, right = _value_of(node.left, frame), _value_of(node.right, frame)
        operate = _ARITHMETIC.get(type(node.op))
        if operate is None or type(left) not in (int, float) or type(right) not in (int, float):
            return _MISSING
        if abs(left) > 1e12 or abs(right) > 1e12:
            return _MISSING
        try:
            return operate(left, right)
        except ArithmeticError:
            return _MISSING
    if (
        type(node) is ast.Call
        and type(node.func) is ast.Name
        and node.func.id == "len"
        and len(node.args) == 1
        and _lookup(frame, "len") is len
    ):
        inner = _value_of(node.args[0], frame)
        length = None if inner is _MISSING else _length(inner)
        return _MISSING if length is None else length
    return _MISSING


def _failing_segment(tb: Any, lines: list[str]) -> str | None:
    """The text of the expression that raised (Python 3.11's positions), else None."""
    code = tb.tb_frame.f_code
    positions = getattr(code, "co_positions", None)
    if positions is None or tb.tb_lasti < 0:
        return None
    try:
        where = next(itertools.islice(positions(), tb.tb_lasti // 2, None))
    except (StopIteration, ValueError):
        return None
    first, last, start, end = where
    if None in where or first != last or first != tb.tb_lineno or not lines:
        return None
    raw = lines[0].encode("utf-8")  # (the positions are UTF-8 byte offsets)
    if not 0 <= start < end <= len(raw):
        return None
    return raw[start:end].decode("utf-8", "replace")


def _parts(tree: Any, frame: Any) -> list[list[Any]]:
    """The failing expression's pieces with what they held: operands, the container and
    index of a subscript, the object of an attribute, a call's function and arguments."""
    import ast

    top = tree.body if type(tree) is ast.Expression else tree
    kids: list[Any] = []
    if type(top) is ast.BinOp:
        kids = [top.left, top.right]
    elif type(top) is ast.Compare:
        kids = [top.left, *top.comparators]
    elif type(top) is ast.Subscript:
        kids = [top.value, top.slice]
    elif type(top) is ast.Attribute:
        kids = [top.value]
    elif type(top) is ast.Call:
        kids = [top.func, *top.args]
    elif type(top) is ast.UnaryOp:
        kids = [top.operand]
    out = []
    for kid in kids:
        value = _value_of(kid, frame)
        if value is not _MISSING and type(value) is not types.BuiltinFunctionType:
            text = ast.unparse(kid) if hasattr(ast, "unparse") else "?"
            out.append([text, *_shown(text, value)])
    return out


def _names_of(source: str, frame: Any) -> list[list[Any]]:
    """Each name, attribute and constant subscript of the failing line, with what it held."""
    import ast

    text = source.strip()
    tree = None
    for attempt in (text, text + " pass", text.rstrip(":") + ": pass"):
        try:
            tree = ast.parse(attempt)
            break
        except SyntaxError:
            continue
    if tree is None:
        return []
    out: list[list[Any]] = []
    seen: set[str] = set()
    for node in ast.walk(tree):
        if type(node) not in (ast.Name, ast.Attribute, ast.Subscript) or len(out) >= 16:
            continue
        if type(node) is ast.Name and type(node.ctx) is not ast.Load:
            continue
        label = ast.unparse(node) if hasattr(ast, "unparse") else getattr(node, "id", "?")
        if label in seen or len(label) > 80:
            continue
        value = _value_of(node, frame)
        if value is _MISSING or _is_module(value) or type(value) is types.BuiltinFunctionType:
            continue
        if type(node) is ast.Name and _scan(vars(__import__("builtins")), node.id) is value:
            continue
        seen.add(label)
        out.append([label, *_shown(label, value)])
    return out


def _has(exc: Any, tree: Any, frame: Any) -> list[str] | None:
    """For a missing key or attribute: what the object does have (its keys, a table's
    columns; an object's own attributes and its class's public names)."""
    import ast

    top = tree.body if tree is not None and type(tree) is ast.Expression else None
    kind = type(exc)
    if kind is KeyError and type(top) is ast.Subscript:
        owner = _value_of(top.value, frame)
        if owner is _MISSING:
            return None
        if _is_sub(type(owner), dict):
            keys = [k for k, _ in itertools.islice(dict.items(owner), 200)]
            return [_preview(k, 0) for k in keys if type(k) in (str, int)][:EVIDENCE_HAS]
        columns = _columns(owner)
        return list(columns)[:EVIDENCE_HAS] if columns is not None else None
    if kind is AttributeError and type(top) is ast.Attribute:
        owner = _value_of(top.value, frame)
        if owner is _MISSING:
            return None
        names: list[str] = []
        own = None if _is_class(owner) else _own_dict(owner)
        if own is not None:
            names += [k for k, _ in _str_items(own, 200)]
        for klass in _mro(owner if _is_class(owner) else type(owner)):
            if klass is object:
                continue
            names += [k for k in _class_namespace(klass) if type(k) is str]
        public = [n for n in dict.fromkeys(names) if not n.startswith("_")]
        return public[:EVIDENCE_HAS]
    return None


def _ran_from(frame: Any, filename: str) -> bool:
    """Whether the frame's code is that of the module file it names: its globals are a
    module's whose `__file__` is that file (code compiled under a file's name by `exec` in
    another namespace names the file without being it)."""
    import os

    space = frame.f_globals
    declared = _scan(space, "__file__") if type(space) is dict else _MISSING
    if type(declared) is not str:
        return False
    try:
        return os.path.realpath(declared) == os.path.realpath(filename)
    except (OSError, ValueError):
        return False


def evidence(ename: str, line: int, names: Any = ()) -> str:
    """What the last error's frames held, as JSON (null when the last error is not the one
    asked about: `ename` raised on `line` of its innermost user frame): for the innermost
    frames of the user's code, the function's locals, each name of the line that raised and
    the pieces of the expression that raised, and for a missing key or attribute what the
    object has. Read as `variables` reads: nothing of the user's code runs."""
    import ast
    import linecache

    jail = sys.modules.get("_runfix_jail")
    jailed = jail.evidence(ename) if jail is not None and not line else None
    if jailed is not None:  # the last error was a jailed run's, read in its jail
        return str(jailed)
    exc, tb = getattr(sys, "last_value", None), getattr(sys, "last_traceback", None)
    if exc is None or tb is None or type(exc).__name__ != ename:
        return "null"
    if not _ARITHMETIC:
        import operator

        _ARITHMETIC.update(
            {
                ast.Add: operator.add,
                ast.Sub: operator.sub,
                ast.Mult: operator.mul,
                ast.FloorDiv: operator.floordiv,
                ast.Mod: operator.mod,
                ast.Div: operator.truediv,
            }
        )
    system = _system_paths()
    steps = []
    while tb is not None:
        if _users(tb.tb_frame.f_code.co_filename, system):
            steps.append(tb)
        tb = tb.tb_next
    if not steps or (line and steps[-1].tb_lineno != line):
        return "null"
    _Secrets.read(names)
    _clock.until = time.monotonic() + DEADLINE
    frames = []
    try:
        for depth, step in enumerate(reversed(steps[-EVIDENCE_FRAMES:])):
            frame, code = step.tb_frame, step.tb_frame.f_code
            source = linecache.getline(code.co_filename, step.tb_lineno)
            entry: dict[str, Any] = {
                "file": code.co_filename,
                "line": step.tb_lineno,
                "function": code.co_name,
                "source": source.strip()[:200],
                "module": _ran_from(frame, code.co_filename),
            }
            if code.co_name != "<module>":
                held = _frame_locals(frame)
                entry["locals"] = [[k, *_shown(k, v)] for k, v in held[:EVIDENCE_LOCALS]]
                entry["more"] = max(len(held) - EVIDENCE_LOCALS, 0)
            entry["names"] = _names_of(source, frame)
            if depth == 0:
                segment = _failing_segment(step, [source.rstrip("\n")])
                tree = None
                if segment:
                    try:
                        tree = ast.parse(segment.strip(), mode="eval")
                    except SyntaxError:
                        tree = None
                if tree is not None and segment is not None:
                    entry["expression"] = segment.strip()[:200]
                    entry["parts"] = _parts(tree, frame)
                has = _has(exc, tree, frame)
                if has is not None:
                    entry["has"] = has
            frames.append(entry)
    except _TooLong:
        pass
    finally:
        _clock.until = float("inf")
    return json.dumps({"frames": frames})


# -- the comm ------------------------------------------------------------------------


_hidden_seen: list[Any] = [None, set()]


def _hidden(shell: Any) -> set[str]:
    """IPython's own names in the namespace (read again when their number changes)."""
    hidden = getattr(shell, "user_ns_hidden", None)
    if type(hidden) is not dict:
        return set()
    if _hidden_seen[0] != (id(hidden), len(hidden)):
        _hidden_seen[:] = [(id(hidden), len(hidden)), {n for n, _ in _str_items(hidden, 100_000)}]
    names: set[str] = _hidden_seen[1]
    return names


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


class _Worker:
    """The thread answers are worked out on, kept between questions (starting one per
    question cost a tenth of a millisecond); replaced when one of its answers is abandoned."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.abandoned = False
        """Given up on: it ends once its answer is done, if ever."""
        self.thread = threading.Thread(target=self._loop, name="runfix-live", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while not self.abandoned:
            self.jobs.get()()


_workers: list[_Worker] = []
_abandoned: list[threading.Thread] = []


def answer(shell: Any, data: dict[str, Any]) -> dict[str, Any]:
    """`{"answer": …}` or `{"error": …}` for one question, worked out on the worker thread
    within DEADLINE; a worker that has not answered in ABANDON is left (said so) and the
    next question goes to a new one."""
    _abandoned[:] = [t for t in _abandoned if t.is_alive()]
    if len(_abandoned) >= STUCK:
        return {"error": f"{len(_abandoned)} earlier answers are still stuck in the kernel"}
    if not _workers:
        _workers.append(_Worker())
    worker = _workers[0]
    said: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        _clock.until = time.monotonic() + DEADLINE
        try:
            said["answer"] = _answer(shell, data)
        except _TooLong:
            said["error"] = f"stopped: the answer took over {DEADLINE:g} s"
        except Exception as exc:  # an answer that failed is no answer, never a crash
            said["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            done.set()

    worker.jobs.put(work)
    if not done.wait(ABANDON):
        worker.abandoned = True
        _workers.remove(worker)
        _abandoned.append(worker.thread)
        return {"error": f"abandoned: no answer within {ABANDON:g} s", "abandoned": True}
    return said


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
            comm.send({"id": data.get("id"), **answer(shell, data)})

        comm.on_msg(asked)

    manager.register_target(TARGET, opened)


# -- a debugger's variables (`lsp_server/debug`): read as the rest is, running nothing --


def _children(value: Any) -> list[tuple[str, Any]] | None:
    """What a value holds, as a debugger's Variables view pages it: a list's or tuple's
    items, a dict's entries with an exact str or int key, an object's own attributes;
    None for a value that holds nothing runfix can read without running its code."""
    kind = type(value)
    for base in (list, tuple):
        if _is_sub(kind, base):
            return [(f"[{i}]", item) for i, item in enumerate(base.__iter__(value))]
    if _is_sub(kind, dict):
        out: list[tuple[str, Any]] = []
        for index, (key, item) in enumerate(dict.items(value)):
            if not index & 1023:
                _tick()
            if type(key) in (str, int):
                out.append((repr(key), item))
        return out
    own = None if _is_class(value) else _own_dict(value)
    return _str_items(own, len(own) + 1) if own else None


def _child_count(value: Any) -> tuple[int, int]:
    """(indexed, named) children a debugger may page: a list's or tuple's items are indexed;
    a dict's entries and an object's attributes named."""
    kind = type(value)
    if _is_sub(kind, list) or _is_sub(kind, tuple):
        return _length(value) or 0, 0
    if _is_sub(kind, dict):
        return 0, _length(value) or 0
    own = None if _is_class(value) else _own_dict(value)
    return 0, len(own) if own else 0


def _step(value: Any, step: Any) -> Any:
    """The child `step` names: an index into a list or tuple, or a name of `_children`."""
    kind = type(value)
    if type(step) is int and (_is_sub(kind, list) or _is_sub(kind, tuple)):
        return _item(value, step)
    for name, child in _children(value) or ():
        if name == step:
            return child
    return _MISSING


def debug_frame(where: Any, scope: str, *rest: Any) -> str:
    """`debug_children` of a stopped frame's `scope` ("locals" or "globals"): the `nth` from
    the top that runs function `name` at `line` of `filename` (`where`, as the debugger's
    stack trace says). Found on the stacks of the kernel's threads: the debugger evaluates in
    a namespace of its own making, whose `locals()` is the frame's globals and locals
    merged."""
    filename, name, line, nth = where
    for top in sys._current_frames().values():
        frame: Any = top
        seen = 0
        while frame is not None:
            code = frame.f_code
            if code.co_name == name and frame.f_lineno == line and code.co_filename == filename:
                if seen == nth:
                    space = frame.f_locals if scope == "locals" else frame.f_globals
                    return debug_children(space, *rest)
                seen += 1
            frame = frame.f_back
    return json.dumps({"error": "that frame is gone (the code went on)"})


def debug_children(
    scope: Any, path: Any, start: int = 0, count: int = 0, names: Any = (), hide: bool = True
) -> str:
    """A debugger's page of variables as JSON: the children of what `path` (steps from the
    frame's `scope`, its locals or globals) names, `count` of them (0: all) from `start`;
    each with its type, preview, length or shape, and how many children it has in turn.
    A secret's value is hidden as everywhere (`names`: the user's `secretNames`)."""
    _Secrets.read(names)
    _clock.until = time.monotonic() + 2 * DEADLINE
    try:
        value: Any = scope
        for at, step in enumerate(path):
            value = _scan(scope, step) if at == 0 else _step(value, step)
            if value is _MISSING:
                return json.dumps({"error": "that value is gone"})
        if value is scope:
            items = _str_items(scope, len(scope) + 1)
            if hide:  # the globals: as the Variables list shows them (no modules, no IPython)
                from IPython import get_ipython

                hidden = _hidden(get_ipython())
                items = [
                    (k, v)
                    for k, v in items
                    if not k.startswith("_") and k not in hidden and not _is_module(v)
                ]
        else:
            kind = type(value)
            sequence = _is_sub(kind, list) or _is_sub(kind, tuple)
            if sequence and count:
                base = list if _is_sub(kind, list) else tuple
                held = base.__getitem__(value, slice(start, start + count))
                items = [(f"[{start + i}]", v) for i, v in enumerate(held)]
                start = 0
            else:
                items = _children(value) or []
        page = items[start : start + count] if count else items[start:]
        out = []
        for name, child in page:
            indexed, named = _child_count(child)
            entry = _variable(name, child)
            entry.update(indexed=indexed, named=named, step=_step_of(name))
            out.append(entry)
        return json.dumps({"variables": out})
    except _TooLong:
        return json.dumps({"error": "reading these values took too long"})
    finally:
        _clock.until = float("inf")


def _step_of(name: str) -> Any:
    """The path step that finds a child again by its name (an index for `[3]`)."""
    if name.startswith("[") and name.endswith("]") and name[1:-1].isdigit():
        return int(name[1:-1])
    return name


def debug_postmortem(op: str, *rest: Any) -> str:
    """The kernel's last error (`sys.last_traceback`) as a debugger's stopped thread that
    runs nothing. "frames": the error and its frames in the user's code, innermost first
    (file, function, line); "children": `debug_children` of one of them (`debug_frame`'s
    arguments: where, scope, then the page)."""
    exc, tb = getattr(sys, "last_value", None), getattr(sys, "last_traceback", None)
    system = _system_paths()
    kept: list[Any] = []
    while tb is not None:
        if _users(tb.tb_frame.f_code.co_filename, system):
            kept.append(tb)
        tb = tb.tb_next
    kept.reverse()
    if op == "frames":
        if exc is None or not kept:
            return json.dumps(None)
        frames = [
            [t.tb_frame.f_code.co_filename, t.tb_frame.f_code.co_name, t.tb_lineno] for t in kept
        ]
        kind, said = _short_name(exc), _message(exc)
        text = _said("", f"{kind}: {said}" if said else kind)
        return json.dumps({"kind": kind, "error": text, "frames": frames})
    where, scope, *page = rest
    filename, name, line, nth = where
    matching = [
        t
        for t in kept
        if (t.tb_frame.f_code.co_filename, t.tb_frame.f_code.co_name, t.tb_lineno)
        == (filename, name, line)
    ]
    if nth >= len(matching):
        return json.dumps({"error": "that error is gone (a later run replaced it)"})
    frame = matching[nth].tb_frame
    return debug_children(frame.f_locals if scope == "locals" else frame.f_globals, *page)


def _message(exc: BaseException) -> str:
    """An exception's message where it is plain text (its one argument, a `str`): nothing of
    the user's code runs to read it (no `__str__`, no argument's)."""
    args = BaseException.__dict__["args"].__get__(exc)
    if type(args) is tuple and len(args) == 1 and type(args[0]) is str:
        return repr(args[0][:300]) if _is_sub(type(exc), KeyError) else args[0][:300]
    return ""
