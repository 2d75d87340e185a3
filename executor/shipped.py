"""Code runfix sends to run in another interpreter — the kernel, the test run beside it —
made into modules there from their sources (no file is written): the secret rule
(`redact`), the runtime guard (`_kernel_guard`), the kernel's helpers (`_kernel_side`,
`_kernel_live`), the jail for model-written code (`_kernel_jail`). Each runs on the
interpreter it is sent to (Python 3.8+, its standard library): none imports runfix."""

from __future__ import annotations

from pathlib import Path

from executor import _kernel_guard, _kernel_jail, _kernel_live, _kernel_side, redact

SOURCES = {
    "_runfix_redact": redact,
    "_runfix_guard": _kernel_guard,
    "_runfix_kernel": _kernel_side,
    "_runfix_live": _kernel_live,
    "_runfix_jail": _kernel_jail,
}
"""The name each has there, and the module it is here."""


def modules_code(*names: str) -> str:
    """Code that makes each of `names` (of `SOURCES`) a module of the interpreter it runs
    in, in order (a later one may import an earlier)."""
    sources = tuple(
        (name, Path(str(SOURCES[name].__file__)).read_text(encoding="utf-8")) for name in names
    )
    return (
        "import sys as _s, types as _t\n"
        f"for _n, _c in {sources!r}:\n"
        "    _m = _t.ModuleType(_n)\n"
        "    _s.modules[_n] = _m\n"
        "    exec(_c, _m.__dict__)\n"
        "del _s, _t, _m, _n, _c\n"
    )
