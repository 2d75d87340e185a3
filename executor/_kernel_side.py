"""Runs inside the kernel as the module `_runfix_kernel`; the server sends its source at start.

Why not let IPython run the cell: IPython compiles a cell under a throw-away
filename with cell-relative line numbers and reports errors as ANSI text. Here
the cell is parsed with its line numbers moved to where it sits in the
document and compiled under the document's path, so every traceback line is a
document line, also for functions defined in earlier cells. Each top-level
statement is announced with its first output, so output lands on the statement
that printed it. Output is capped here, at the source, so a print flood never
leaves the kernel.

Everything the server needs to read comes as `display_data` with the MIME type
below; the display publisher flushes stdout/stderr first, which keeps the order.
This file must run on any Python 3.8+ with IPython, and import nothing from runfix.
"""

from __future__ import annotations

import ast
import contextlib
import json
import linecache
import mmap
import os
import struct
import sys
import textwrap
import traceback
import types
from typing import Any

MIME = "application/x-runfix+json"
_sources: dict[str, list[str]] = {}  # filename -> list of document lines seen so far, for linecache


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _publish(payload: dict[str, Any], data: dict[str, Any] | None = None) -> None:
    bundle = dict(data or {})
    bundle[MIME] = payload
    _shell().display_pub.publish(bundle, {})


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left = limit
        self.dropped = 0

    def take(self, text: str) -> str:
        if self.left <= 0:
            self.dropped += len(text)
            return ""
        if len(text) > self.left:
            kept = text[: self.left]
            self.dropped += len(text) - len(kept)
            self.left = 0
            return kept
        self.left -= len(text)
        return text


class _Statement:
    """The top-level statement running now, told to the server when it first shows something.

    It is also kept in a small shared-memory file (`RUNFIX_STATEMENT_FILE`) that
    outlives the kernel, so the server can say where a kernel that was killed
    (out of memory, a crash) was, at the cost of a memory store per statement."""

    def __init__(self) -> None:
        self.span: list[int] | None = None
        self.announced = True
        self._shared: Any = None
        path = os.environ.get("RUNFIX_STATEMENT_FILE")
        if path:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    os.ftruncate(fd, 16)
                    self._shared = mmap.mmap(fd, 16)
                    self._shared[:16] = bytes(16)  # a dead predecessor's statement is not ours
                finally:
                    os.close(fd)
            except (OSError, ValueError):
                self._shared = None

    def start(self, first: int, last: int) -> None:
        self.span, self.announced = [first, last], False
        if self._shared is not None:
            self._shared[:16] = struct.pack("<qq", first, last)

    def end(self) -> None:
        self.span = None
        if self._shared is not None:
            self._shared[:16] = bytes(16)

    def announce(self) -> None:
        if not self.announced and self.span is not None:
            self.announced = True
            _publish({"stmt": self.span})


_current = _Statement()


def _tag_display(msg: Any) -> Any:
    """Display-publisher hook: announce the statement before a display it makes."""
    kind = msg.get("msg_type")
    ours = MIME in msg.get("content", {}).get("data", {})
    if kind in ("display_data", "update_display_data") and not ours:
        _current.announce()
    return msg


class _CappedStream:
    """Wraps sys.stdout/stderr for one run; what passes the budget is dropped here."""

    def __init__(self, stream: Any, budget: _Budget) -> None:
        self._stream = stream
        self._budget = budget
        self.written = False

    def write(self, text: str) -> int:
        kept = self._budget.take(text)
        if kept:
            _current.announce()
            self.written = True
            self._stream.write(kept)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _remember(filename: str, first_line: int, code: str) -> None:
    lines = _sources.setdefault(filename, [])
    new = code.splitlines(True)
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    end = first_line - 1 + len(new)
    if len(lines) < end:
        lines.extend(["\n"] * (end - len(lines)))
    lines[first_line - 1 : end] = new
    # mtime None: linecache.checkcache() leaves the entry alone.
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)


def _frames(tb: Any) -> list[list[Any]]:
    return [[f.filename, f.lineno or 0, f.name] for f in traceback.extract_tb(tb)]


def _report(exc: BaseException, tb: Any) -> None:
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    _publish(
        {
            "error": {
                "ename": type(exc).__name__,
                "evalue": str(exc),
                "frames": _frames(tb),
                "text": text,
            }
        }
    )


def _show(value: Any, budget: _Budget) -> None:
    shell = _shell()
    with contextlib.suppress(Exception):
        shell.displayhook.update_user_ns(value)
    data, _ = shell.display_formatter.format(value)
    capped: dict[str, Any] = {}
    for mime, content in data.items():
        if isinstance(content, str) and (mime.startswith("text/") or mime.endswith("json")):
            content = budget.take(content)
        capped[mime] = content
    _current.announce()
    _publish({"value": True}, capped)


def run(code: str, filename: str, first_line: int = 1, limit: int = 100000) -> None:
    """Run `code`, which starts on document line `first_line` of `filename`."""
    shell = _shell()
    budget = _Budget(limit)
    source = textwrap.dedent(code)
    indent = min((len(x) - len(x.lstrip()) for x in code.splitlines() if x.strip()), default=0)
    try:
        transformed = shell.transform_cell(source)
        if transformed.count("\n") < source.count("\n"):
            transformed = source  # a cell magic rewrote the lines; keep them mappable
    except Exception:
        transformed = source
    _remember(filename, first_line, code)
    try:
        tree = ast.parse(transformed, filename)
    except SyntaxError as exc:
        offset = first_line - 1
        _publish(
            {
                "error": {
                    "ename": type(exc).__name__,
                    "evalue": exc.msg or "",
                    "frames": [],
                    "text": "".join(traceback.format_exception_only(type(exc), exc)),
                    "line": (exc.lineno or 1) + offset,
                    "column": (exc.offset or 1) + indent,
                    "end_line": (getattr(exc, "end_lineno", None) or exc.lineno or 1) + offset,
                    "end_column": (getattr(exc, "end_offset", None) or 0) + indent,
                }
            }
        )
        return
    ast.increment_lineno(tree, first_line - 1)
    saved = sys.stdout, sys.stderr
    out, err = _CappedStream(saved[0], budget), _CappedStream(saved[1], budget)
    sys.stdout, sys.stderr = out, err
    hooks = getattr(shell.display_pub, "register_hook", None)
    if hooks is not None:
        hooks(_tag_display)
    namespace = shell.user_ns
    try:
        for node in tree.body:
            _current.start(node.lineno, getattr(node, "end_lineno", node.lineno))
            if isinstance(node, ast.Expr):
                value = eval(compile(ast.Expression(node.value), filename, "eval"), namespace)
                if value is not None:
                    _show(value, budget)
            else:
                module = ast.Module(body=[node], type_ignores=[])
                exec(compile(module, filename, "exec"), namespace)
    except KeyboardInterrupt:
        _current.announce()
        _publish({"interrupted": True})
    except BaseException as exc:
        _current.announce()
        # Drop this function's own frame: the user's code starts one level down.
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None
        _report(exc, tb)
    finally:
        _current.end()
        if getattr(shell.display_pub, "unregister_hook", None) is not None:
            shell.display_pub.unregister_hook(_tag_display)
        if out.written or err.written:
            out.flush()
            err.flush()
        sys.stdout, sys.stderr = saved
        if budget.dropped:
            _publish({"truncated": budget.dropped})


def _describe(name: str, value: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "type": type(value).__name__}
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        item["shape"] = list(shape)
    elif not isinstance(value, (str, bytes)) and hasattr(value, "__len__"):
        with contextlib.suppress(Exception):
            item["length"] = len(value)
    dtypes = getattr(value, "dtypes", None)
    columns = getattr(value, "columns", None)
    if dtypes is not None and columns is not None:
        with contextlib.suppress(Exception):
            item["columns"] = {str(c): str(dtypes[c]) for c in list(columns)[:50]}
    try:
        text = repr(value)
    except Exception:
        text = "<unrepresentable>"
    item["summary"] = text if len(text) <= 80 else text[:79] + "…"
    return item


def variables(limit: int = 200) -> str:
    """The user's names as JSON: modules, private and IPython's own names left out."""
    shell = _shell()
    hidden = shell.user_ns_hidden
    items = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in hidden or isinstance(value, types.ModuleType):
            continue
        items.append(_describe(name, value))
        if len(items) >= limit:
            break
    return json.dumps(items)


def reap() -> int:
    """Collect the kernel's children that have exited (zombies hold pids until collected)."""
    import os

    collected = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return collected
        if pid == 0:
            return collected
        collected += 1
