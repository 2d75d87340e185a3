"""Runs inside the kernel as the module `_runfix_kernel`; the server sends its source at start.

Why not let IPython run the cell: IPython compiles a cell under a throw-away
filename with cell-relative line numbers and reports errors as ANSI text. Here
the cell is parsed with its line numbers moved to where it sits in the
document and compiled under the document's path, so every traceback line is a
document line, also for functions defined in earlier cells. Each top-level
statement is announced with its first output (in the same message when that
output is its value or its error), so output lands on the statement that
printed it. Output is capped here, at the source, so a print flood never
leaves the kernel.

Everything the server needs to read comes as `display_data` with the MIME type
below; the display publisher flushes stdout/stderr first, which keeps the order.
This file must run on any Python 3.8+ with IPython, and import nothing from runfix.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import linecache
import mmap
import os
import re
import struct
import sys
import textwrap
import threading
import time
import traceback
from typing import Any

MIME = "application/x-runfix+json"
_sources: dict[str, list[str]] = {}  # filename -> list of document lines seen so far, for linecache
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # Python's lines (not splitlines')
MESSAGE_LIMIT = 2_000
"""Characters of an exception's message kept (the diagnostic's text)."""
TRACEBACK_LIMIT = 20_000
"""Characters of a formatted traceback kept (the hover)."""
FRAME_LIMIT = 100
"""Frames kept of a deep traceback, after repeats are collapsed (first and last halves)."""


_SHELL: list[Any] = []


def _shell() -> Any:
    """The kernel's IPython shell (one for the kernel's life; looked up once: IPython's lazy
    module attribute cost a run ~0.05 ms over its eight look-ups)."""
    if not _SHELL:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None:
            return None
        _SHELL.append(shell)
    return _SHELL[0]


def clean(text: str) -> str:
    """Text that survives UTF-8 JSON: a lone surrogate would make the kernel drop the message."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    if isinstance(value, dict):
        return {clean(str(k)): _cleaned(v) for k, v in value.items()}
    return value


def _publish(payload: dict[str, Any], data: dict[str, Any] | None = None) -> None:
    bundle = _cleaned(dict(data or {}))
    bundle[MIME] = _cleaned(payload)
    _shell().display_pub.publish(bundle, {})


def cap(text: str, limit: int) -> str:
    """`text` cut at `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def _cut_before(text: str, at: int) -> int:
    """`at`, or the start of a terminal escape sequence it would cut in two (a colour code
    cut by the limit would show its tail as text)."""
    start = text.rfind("\x1b", max(0, at - 64), at)
    if start < 0:
        return at
    whole = _ESCAPE.match(text, start)
    return start if whole is None or whole.end() > at else at


def _cut_after(text: str, at: int) -> int:
    """`at`, or the end of a terminal escape sequence it would cut in two."""
    start = text.rfind("\x1b", max(0, at - 64), at)
    if start < 0:
        return at
    whole = _ESCAPE.match(text, start)
    return whole.end() if whole is not None and whole.end() > at else at


class _Budget:
    """A run's output within `outputLimit`, as a terminal's scrollback keeps it: the head
    (half the limit) is passed on as it comes; past it the latest text is kept (the tail)
    and passed on when the run ends, after a line saying how much was dropped between. A
    flood of output never hides what the run printed last (its result)."""

    def __init__(self, limit: int) -> None:
        self.left = limit // 2
        self.tail_room = limit - self.left
        self.tail: list[list[Any]] = []
        """[stream, statement span, text], oldest first: what passed the head."""
        self.tail_size = 0
        self.dropped = 0
        self.open_line = False
        """The head's last text did not end its line."""

    def take(self, text: str) -> str:
        """The part of `text` within the head (what is left over is not kept)."""
        if len(text) <= self.left:
            self.left -= len(text)
            self._wrote(text)
            return text
        kept, self.left = text[: _cut_before(text, self.left)], 0
        self.dropped += len(text) - len(kept)
        self._wrote(kept)
        return kept

    def _wrote(self, text: str) -> None:
        if text:
            self.open_line = not text.endswith("\n")

    def take_stream(self, stream: Any, span: Any, text: str) -> str:
        """The part of `text` to write now; the rest joins the tail."""
        now = text[: _cut_before(text, self.left)] if self.left > 0 else ""
        self.left = max(self.left - len(now), 0) if len(now) == len(text) else 0
        self._wrote(now)
        rest = text[len(now) :]
        if rest:
            last = self.tail[-1] if self.tail else None
            if last is not None and last[0] is stream and last[1] == span:
                last[2] += rest
            else:
                self.tail.append([stream, span, rest])
            self.tail_size += len(rest)
            self._trim()
        return now

    def take_value(self, text: str) -> str:
        """A value's text: from the head while it lasts, then from the tail's room (a value
        is shown at once, where it was made)."""
        if self.left > 0:
            return self.take(text)
        kept = text[: self.tail_room // 2]
        self.tail_room -= len(kept)
        self.dropped += len(text) - len(kept)
        self._trim()
        return kept

    def _trim(self) -> None:
        while self.tail_size > self.tail_room and self.tail:
            oldest = self.tail[0]
            cut = min(len(oldest[2]), self.tail_size - self.tail_room)
            cut = _cut_after(oldest[2], cut)
            oldest[2] = oldest[2][cut:]
            self.tail_size -= cut
            self.dropped += cut
            if not oldest[2]:
                self.tail.pop(0)

    def flush_tail(self) -> None:
        """Pass on the tail, each piece under its statement, after a line saying how much
        was dropped before it."""
        if not self.tail:
            return
        said: Any = None
        for i, (stream, span, text) in enumerate(self.tail):
            if span is not None and span != said:
                _publish({"stmt": span})
                said = span
            if i == 0 and self.dropped:
                note = f"\n… {self.dropped:,} characters of output dropped …\n"
                line, _, rest = text.partition("\n")
                if self.open_line and "\r" in line:
                    # The line the head left open is redrawn with "\r" (a progress bar): its
                    # last frame takes the open line's place, and the note follows it.
                    stream.write(clean("\r" + line))
                    text = rest
                stream.write(note)
            stream.write(clean(text))
        self.tail = []
        _current.announced = False  # what follows says its statement again


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

    def tag(self, payload: dict[str, Any]) -> dict[str, Any]:
        """`payload` saying which statement it is from, if that was not said yet: one
        message instead of two for a statement whose first output is its value."""
        if not self.announced and self.span is not None:
            self.announced = True
            return {"stmt": self.span, **payload}
        return payload


_current = _Statement()


def _tag_display(msg: Any) -> Any:
    """Display-publisher hook: announce the statement before a display it makes."""
    kind = msg.get("msg_type")
    ours = MIME in msg.get("content", {}).get("data", {})
    if kind in ("display_data", "update_display_data") and not ours:
        _current.announce()
    return msg


class _CappedStream:
    """Wraps sys.stdout/stderr; during a run, what passes the run's budget is dropped here.

    Installed once and never replaced or freed: a thread inside `print()` holds a borrowed
    reference to the stream, and a stream swapped and freed under it crashes the
    interpreter (python/cpython#130163). Between runs it passes everything on.

    During a run, output from a thread an earlier run started is not this run's: it is
    counted and dropped (with a note), never shown on this run's statements."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._budget: _Budget | None = None
        self._earlier: set[int] = set()
        self.strays = 0
        self._ran_on: int | None = None
        """The thread the last run ran on (between runs, what another thread prints is a
        stray: sent then, the kernel would send it as the next run's output)."""
        self._between = 0

    def start(self, budget: _Budget, earlier: set[int]) -> None:
        self._earlier, self.strays, self._between = earlier, self._between, 0
        self._ran_on = threading.get_ident()
        self._budget = budget

    def stop(self) -> None:
        self._budget = None

    def write(self, text: str) -> int:
        budget = self._budget
        if budget is None:
            if self._ran_on is not None and threading.get_ident() != self._ran_on:
                self._between += len(text)  # a thread of a finished run: counted, not sent
                return len(text)
            return int(self._stream.write(text) or 0)
        if threading.get_ident() in self._earlier:
            self.strays += len(text)
            return len(text)
        kept = budget.take_stream(self._stream, _current.span, text)
        if kept:
            _current.announce()
            self._stream.write(clean(kept))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """The stream's flush, skipped when it holds nothing to send. ipykernel's flush waits
        for its I/O thread even then (~0.25 ms), and its display publisher flushes both
        streams before every display: a run showing its value paid 0.5 ms for nothing. Order
        holds: what was written is either pending (then flushed) or already handed to the
        I/O thread, which sends it before anything handed to it later."""
        stream = self._stream
        if getattr(stream, "_flush_pending", True) or getattr(
            stream, "_subprocess_flush_pending", False
        ):
            stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_WRAPPERS: list[_CappedStream] = []
"""Every wrapper ever installed (kept alive: a thread may still be inside one)."""


def _wrapped(name: str) -> _CappedStream:
    """`sys.<name>` as runfix's wrapper: the one installed, or a new one around whatever the
    code put there (the old one stays alive in `_WRAPPERS`)."""
    current = getattr(sys, name)
    if isinstance(current, _CappedStream):
        return current
    wrapper = _CappedStream(current)
    _WRAPPERS.append(wrapper)
    setattr(sys, name, wrapper)
    return wrapper


def _remember(filename: str, first_line: int, code: str) -> int:
    """The document's lines as this run has them, for linecache; how many lines the code has."""
    lines = _sources.setdefault(filename, [])
    new = _LINE.findall(code)
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    end = first_line - 1 + len(new)
    if len(lines) < end:
        lines.extend(["\n"] * (end - len(lines)))
    lines[first_line - 1 : end] = new
    # mtime None: linecache.checkcache() leaves the entry alone, and never reads its size
    # (summing every line's length here cost O(document) per run: 0.5 ms at 20,000 lines).
    linecache.cache[filename] = (0, None, lines, filename)
    return len(new)


_RAN_AS: dict[str, list[tuple[int, int, int]]] = {}
"""Per document: the lines each run compiled (first, last, from 1) and the execution count
it ran as, newest last — what names a frame `Cell In[n], line l` as IPython does (`_as_ran`)."""
RAN_AS_KEPT = 200
CONTEXT_BEFORE = 2
"""A frame's lines shown before its own in a notebook's saved traceback."""


def _ran_as(filename: str, first_line: int, lines: int, count: int) -> None:
    runs = _RAN_AS.setdefault(filename, [])
    runs.append((first_line, first_line + max(lines, 1) - 1, count))
    if len(runs) > RAN_AS_KEPT:
        del runs[: len(runs) - RAN_AS_KEPT]


def _as_ran(frame: Any, filename: str, line: int) -> dict[str, Any]:
    """What a notebook's saved traceback says of a frame as IPython would: the run that
    compiled its line (`in`: its execution count; `line`: from that run's first line), its
    call (`f(x)`: names, never values), its lines up to the frame's."""
    said: dict[str, Any] = {}
    first = max(line - CONTEXT_BEFORE, 1)
    for start, end, count in reversed(_RAN_AS.get(filename, ())):
        if start <= line <= end:
            said["in"], said["line"], first = count, line - start + 1, max(first, start)
            break
    code = frame.f_code
    if code.co_name != "<module>":
        with contextlib.suppress(Exception):
            args = inspect.getargvalues(frame)
            shape = inspect.formatargvalues(*args, formatvalue=lambda _: "")
            said["call"] = getattr(code, "co_qualname", code.co_name) + shape
    said["context"] = [cap(linecache.getline(filename, n), 200) for n in range(first, line + 1)]
    return said


def _frames(tb: Any) -> list[list[Any]]:
    """The traceback's frames, a run of one repeated frame collapsed as Python prints it:
    [file, line, function, repeats, what a notebook's saved traceback says (`_as_ran`)]."""
    frames: list[list[Any]] = []
    for f, (held, _) in zip(traceback.extract_tb(tb), traceback.walk_tb(tb), strict=False):
        line = f.lineno or 0
        if frames and frames[-1][:3] == [f.filename, line, f.name]:
            frames[-1][3] += 1
            continue
        frames.append([f.filename, line, f.name, 0, held])
    if len(frames) > FRAME_LIMIT:
        half = FRAME_LIMIT // 2
        gap = ["...", 0, f"{len(frames) - 2 * half} frames", 0, None]
        frames = [*frames[:half], gap, *frames[-half:]]
    for each in frames:
        each[4] = _as_ran(each[4], each[0], each[1]) if each[4] is not None else {}
    return frames


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = f"<{type(exc).__name__}: its message cannot be shown>"
    return cap(text, MESSAGE_LIMIT)


def _report(exc: BaseException, tb: Any, interrupted: bool = False) -> None:
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    jail = sys.modules.get("_runfix_jail")
    if jail is not None:  # (a jailed run's error is no longer the last)
        jail.EVIDENCE.clear()
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception:
        text = f"{type(exc).__name__}: {_message(exc)}\n"
    _publish(
        _current.tag(
            {
                "error": {
                    "ename": type(exc).__name__,
                    "evalue": _message(exc),
                    "frames": _frames(tb),
                    "text": cap(text, TRACEBACK_LIMIT),
                },
                "interrupted": interrupted,
            }
        )
    )


def _show(value: Any, budget: _Budget) -> None:
    shell = _shell()
    with contextlib.suppress(Exception):
        shell.displayhook.update_user_ns(value)
    data, _ = shell.display_formatter.format(value)
    capped: dict[str, Any] = {}
    for mime, content in data.items():
        if isinstance(content, str) and (mime.startswith("text/") or mime.endswith("json")):
            content = budget.take_value(content)
        capped[mime] = content
    _publish(_current.tag({"value": True, "about": _about(value)}), capped)


HEAD_ROWS = 5
HEAD_COLUMNS = 12
CELL_LIMIT = 40


def _cell(value: Any) -> str:
    text = str(value)
    return text if len(text) <= CELL_LIMIT else text[: CELL_LIMIT - 1] + "…"


def _about(value: Any) -> dict[str, Any]:
    """What the server tells of a value besides its MIME bundle: its type and shape, and for a
    table (a pandas DataFrame) its columns, their types and its first rows, as text."""
    about: dict[str, Any] = {"type": type(value).__name__}
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
            about["shape"] = list(shape)
        iloc, dtypes = getattr(value, "iloc", None), getattr(value, "dtypes", None)
        if iloc is not None and dtypes is not None and len(about.get("shape", ())) == 2:
            top = iloc[:HEAD_ROWS, :HEAD_COLUMNS]
            about["columns"] = [_cell(c) for c in top.columns]
            about["dtypes"] = [str(t) for t in list(dtypes)[:HEAD_COLUMNS]]
            about["index"] = [_cell(i) for i in top.index]
            about["rows"] = [[_cell(v) for v in row] for row in top.itertuples(index=False)]
    except Exception:  # a value that cannot be described is still shown
        pass
    return about


_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


def _parse(code: str, filename: str, first_line: int) -> tuple[str, Any]:
    """("magic", (name, line, body)) for a cell magic, ("ast", tree) for Python, or
    ("error", None) once a SyntaxError was published on the document's own line."""
    source = textwrap.dedent(code)
    if source.startswith("%%"):
        head, _, body = source.partition("\n")
        name, _, line = head[2:].partition(" ")
        return "magic", (name.strip(), line.strip(), body)
    indent = min((len(x) - len(x.lstrip()) for x in _LINE.findall(code) if x.strip()), default=0)
    shell = _shell()
    try:
        transformed = shell.transform_cell(source)
        if transformed.count("\n") < source.count("\n"):
            transformed = source  # a transform joined lines; keep them mappable
    except Exception:
        transformed = source
    try:
        # Not the file's name: Python would read the error's line from the file on disk (the
        # cell's line 1 is not the file's) and clamp the column to that line's length.
        tree = ast.parse(transformed, "<runfix cell>")
    except SyntaxError as exc:
        exc.filename = filename
        _publish_syntax_error(exc, code, first_line, indent)
        return "error", None
    _mark_quiet(tree, transformed)
    ast.increment_lineno(tree, first_line - 1)
    return "ast", tree


_QUIET = "_runfix_quiet"
"""Set on an expression statement ending in `;`: its value is not shown (IPython's rule)."""


def _mark_quiet(tree: Any, source: str) -> None:
    """Mark the expression statements a `;` ends (the last thing on their line, a comment
    aside), whose value IPython does not show."""
    lines = source.splitlines()
    for node in tree.body:
        end, column = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        if not isinstance(node, ast.Expr) or end is None or column is None or end > len(lines):
            continue
        rest = lines[end - 1].encode()[column:].decode(errors="replace").strip()
        if rest.startswith(";") and (not rest[1:].strip() or rest[1:].strip().startswith("#")):
            setattr(node, _QUIET, True)


def _publish_syntax_error(exc: SyntaxError, code: str, first_line: int, indent: int) -> None:
    """The error on the document's line, quoting that line (never the file on disk)."""
    lines = _LINE.findall(code)
    relative = exc.lineno or 1
    offset = first_line - 1
    exc.lineno = relative + offset
    if getattr(exc, "end_lineno", None):
        exc.end_lineno = exc.end_lineno + offset  # type: ignore[operator]
    if 1 <= relative <= len(lines):
        exc.text = lines[relative - 1]
    if exc.offset:
        exc.offset += indent
    if getattr(exc, "end_offset", None):
        exc.end_offset = exc.end_offset + indent  # type: ignore[operator]
    _publish(
        {
            "error": {
                "ename": type(exc).__name__,
                "evalue": cap(exc.msg or "", MESSAGE_LIMIT),
                "frames": [],
                "text": cap(
                    "".join(traceback.format_exception_only(type(exc), exc)), TRACEBACK_LIMIT
                ),
                "line": exc.lineno,
                "column": exc.offset if exc.offset else indent + 1,
                "end_line": getattr(exc, "end_lineno", None) or exc.lineno,
                "end_column": getattr(exc, "end_offset", None) or 0,
            }
        }
    )


def _steps(
    kind: str, parsed: Any, filename: str, first_line: int, budget: _Budget, adopt: Any = None
) -> Any:
    """Run statement by statement; yields each awaitable (top-level `await`) to be awaited.
    `adopt`: told each statement's code before it runs (the model's code: `_runfix_guard`)."""
    shell = _shell()
    namespace = shell.user_ns
    if kind == "magic":
        name, line, body = parsed
        last = first_line + len(_LINE.findall(body))
        _current.start(first_line, last)
        value = shell.run_cell_magic(name, line, body)
        if value is not None:
            _show(value, budget)
        return
    for node in parsed.body:
        _current.start(node.lineno, getattr(node, "end_lineno", node.lineno))
        if isinstance(node, ast.Expr):
            code = compile(ast.Expression(node.value), filename, "eval", flags=_AWAIT)
        else:
            code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec", _AWAIT)
        if adopt is not None:
            adopt(code)
        value = eval(code, namespace)
        if code.co_flags & inspect.CO_COROUTINE:
            value = yield value
        if isinstance(node, ast.Expr) and value is not None and not getattr(node, _QUIET, 0):
            _show(value, budget)
        if getattr(shell, "exit_now", False):
            _current.announce()  # the statement that ended the kernel; nothing after it runs
            return


def _cell_info(code: str) -> Any:
    """What IPython tells `pre_run_cell` about a cell; None if this IPython cannot say.

    The server sends its call to this module silently (no `execute_input` echo of the
    call, no execution count: ~0.5 ms a run), and IPython fires `pre_execute` and
    `post_execute` for silent requests too, but not `pre_run_cell` / `post_run_cell`.
    Extensions wait for those (autoreload, matplotlib's inline backend setting itself
    up), so they are fired here, for the user's code."""
    try:
        from IPython.core import interactiveshell
    except ImportError:
        return None
    make: Any = interactiveshell.ExecutionInfo
    # IPython 8+ takes a cell id; IPython 7 does not.
    for args in ((code, False, False, True, None), (code, False, False, True)):
        try:
            return make(*args)
        except TypeError:
            continue
    return None


def _into_history(shell: Any, code: str) -> int:
    """The run enters IPython's history as a cell Jupyter ran would (`In`, `_i`, `%history`,
    the execution count its value's `Out` entry and the reply carry): the request itself
    is silent, which IPython leaves out of all of these. Its count; counted now where this
    IPython counts before a cell runs (its displayhook's `Out[n]` is one behind then)."""
    count = int(shell.execution_count)
    if getattr(shell.displayhook, "prompt_count", count) == count - 1:
        shell.execution_count = count + 1
    with contextlib.suppress(Exception):
        shell.history_manager.store_inputs(count, code)
    return count


def _cell_done(info: Any, error: BaseException | None, count: int) -> None:
    from IPython.core import interactiveshell

    shell = _shell()
    result: Any = interactiveshell.ExecutionResult(info)  # type: ignore[no-untyped-call]
    result.execution_count = count
    result.error_in_exec = error
    shell.events.trigger("post_run_cell", result)


def _guard() -> Any:
    """The runtime guard (`executor/_kernel_guard.py`, loaded beside this module); None in
    a kernel whose helper was loaded without it."""
    module = sys.modules.get("_runfix_guard")
    return getattr(module, "_GUARD", [None])[0] if module is not None else None


class _Run:
    """One run's surroundings: capped streams, the display hook, the runtime guard for the
    model's code, and what is said at its end."""

    def __init__(
        self, code: str, filename: str, first_line: int, limit: int, guard: Any = None
    ) -> None:
        self.budget = _Budget(limit)
        if code.startswith("\ufeff"):
            code = code[1:]  # a byte-order mark opens the file; it is not code
        self.code, self.filename, self.first_line = code, filename, first_line
        self.policy = json.loads(guard) if isinstance(guard, str) else guard
        """The model's code: what its guard allows ({"allow": […], "keep": […]}, as JSON
        or not); None: the user's own."""
        self.guard = _guard()
        self.token: Any = None
        self.lines = _remember(filename, first_line, code)

    @property
    def adopt(self) -> Any:
        """Where the model's compiled statements go (None: the user's code)."""
        return self.guard.adopt if self.policy is not None and self.guard is not None else None

    def _refused(self) -> list[Any]:
        """What the guard stopped during this run (it is disarmed here)."""
        if self.guard is None:
            return []
        taken = self.guard.disarm(self.token) if self.policy is not None else self.guard.taken()
        return list(taken)

    def __enter__(self) -> _Run:
        self.usage = _usage_start()
        shell = _shell()
        self.count = _into_history(shell, self.code)
        _ran_as(self.filename, self.first_line, self.lines, self.count)
        self.info = _cell_info(self.code)
        if self.info is not None:
            shell.events.trigger("pre_run_cell", self.info)
        earlier = {t.ident for t in threading.enumerate() if t.ident is not None}
        earlier.discard(threading.get_ident())
        self.out, self.err = _wrapped("stdout"), _wrapped("stderr")
        self.out.start(self.budget, earlier)
        self.err.start(self.budget, earlier)
        hooks = getattr(shell.display_pub, "register_hook", None)
        if hooks is not None:
            hooks(_tag_display)
        if self.policy is not None and self.guard is not None:  # (last: nothing of ours after)
            self.token = self.guard.arm(self.policy.get("allow", ()), self.policy.get("keep", ()))
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        shell = _shell()
        refused = self._refused()  # (first: nothing of ours before)
        self.budget.flush_tail()
        if exc is None and refused:  # a refusal the code caught (`except BaseException`)
            exc = sys.modules["_runfix_guard"].GuardStop(
                "runfix's guard stopped the model's code: " + refused[0].sentence()
            )
        if exc is not None:
            _report(exc, _user_frames(tb), interrupted=isinstance(exc, KeyboardInterrupt))
        if refused:
            _publish({"guard": [r.said() for r in refused]})
        _current.end()
        if getattr(shell.display_pub, "unregister_hook", None) is not None:
            shell.display_pub.unregister_hook(_tag_display)
        # No flush here: ipykernel's display publisher flushes the streams before each
        # display (so a statement's text is sent before the next one is announced), and the
        # kernel flushes them once more when the request ends (a flush waits for its I/O
        # thread: 0.5 ms a run for stdout and stderr). The wrappers stay: see _CappedStream.
        self.out.stop()
        self.err.stop()
        if self.info is not None:
            _cell_done(self.info, exc, self.count)
        if shell.execution_count == self.count:  # (an IPython that counts at the end)
            shell.execution_count += 1  # (the kernel's reply says the one this run had)
        if self.budget.dropped:
            _publish({"truncated": self.budget.dropped})
        strays = self.out.strays + self.err.strays
        if strays:
            _publish({"strays": strays})
        if getattr(shell, "exit_now", False):
            _publish({"exited": True})
        _say_usage(_usage_end(self.usage))
        return True  # whatever the code raised was reported; it ends here


def _user_frames(tb: Any) -> Any:
    """The traceback from the user's code on: this module's own frames dropped, and the
    guard's or the jail's hook where it stopped the code (the code's own line is where it
    raised)."""
    while tb is not None and tb.tb_frame.f_globals is globals():
        tb = tb.tb_next
    ours = [sys.modules[n].__dict__ for n in ("_runfix_guard", "_runfix_jail") if n in sys.modules]
    step = tb
    while ours and step is not None and step.tb_next is not None:
        if any(step.tb_next.tb_frame.f_globals is space for space in ours):
            step.tb_next = None
            break
        step = step.tb_next
    return tb


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
USAGE_SOURCE = "runfix-usage"


_PROC: dict[str, tuple[int, int]] = {}
"""/proc/self files kept open, by name: (the pid that opened it, its descriptor). Opening
them for every run cost ~0.1 ms of each run's time; a forked child opens its own."""


def _proc_fd(name: str, flags: int) -> int:
    pid = os.getpid()
    kept = _PROC.get(name)
    if kept is not None and kept[0] == pid:
        return kept[1]
    fd = os.open(f"/proc/self/{name}", flags | getattr(os, "O_CLOEXEC", 0))
    _PROC[name] = (pid, fd)
    return fd


def _rss() -> int | None:
    """This process's resident memory in bytes (Linux), else None."""
    try:
        return int(os.pread(_proc_fd("statm", os.O_RDONLY), 128, 0).split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


def _usage_start() -> dict[str, Any]:
    """What a run's figures are measured from: CPU time, memory, and the peak reset (writing
    5 to /proc/self/clear_refs makes the peak the current size), so the peak is this run's."""
    try:
        os.write(_proc_fd("clear_refs", os.O_WRONLY), b"5")
        reset = True
    except OSError:
        reset = False
    return {"cpu": time.process_time(), "rss": _rss(), "reset": reset}


def _usage_end(start: dict[str, Any]) -> dict[str, Any]:
    usage: dict[str, Any] = {"cpu": time.process_time() - start["cpu"]}
    before, after = start["rss"], _rss()
    if before is not None and after is not None:
        usage["rss_before"], usage["rss_after"] = before, after
        if start["reset"]:
            try:
                import resource

                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                usage["peak"] = max(peak, before, after)
            except (ImportError, OSError):
                pass
    return usage


def _say_usage(usage: dict[str, Any]) -> None:
    """The run's figures go back in its own reply, as a payload (no message more, nothing
    for a display formatter to do): kernel CPU seconds (every thread of the kernel
    process), resident memory before and after, its peak during the run (children not
    counted)."""
    payloads = getattr(_shell(), "payload_manager", None)
    if payloads is not None:
        payloads.write_payload({"source": USAGE_SOURCE, "usage": usage}, single=True)


def run(
    code: str, filename: str, first_line: int = 1, limit: int = 100000, guard: Any = None
) -> None:
    """Run `code`, which starts on document line `first_line` of `filename`; `guard`: it is
    the model's, run under the runtime guard with these allowances."""
    with _Run(code, filename, first_line, limit, guard) as this:
        kind, parsed = _parse(this.code, filename, first_line)
        if kind == "error":
            return
        steps = _steps(kind, parsed, filename, first_line, this.budget, this.adopt)
        for awaitable in steps:  # only code with `await` yields: the server sends it to run_async
            awaitable.close()
            raise RuntimeError("top-level await needs run_async")


async def run_async(
    code: str, filename: str, first_line: int = 1, limit: int = 100000, guard: Any = None
) -> None:
    """`run` for code with top-level `await`, on the kernel's event loop as IPython runs it."""
    with _Run(code, filename, first_line, limit, guard) as this:
        kind, parsed = _parse(this.code, filename, first_line)
        if kind == "error":
            return
        steps = _steps(kind, parsed, filename, first_line, this.budget, this.adopt)
        try:
            awaitable = next(steps)
            while True:
                awaitable = steps.send(await awaitable)
        except StopIteration:
            pass


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


# -- the kernel's debugger (`lsp_server/debug`) ------------------------------------------


def _held(filename: str) -> bool:
    """A document runfix ran code of under `filename`, as the debugger may spell it: a name
    that is no path (a notebook cell's URI) made absolute against a folder of `sys.path`."""
    if filename in _sources:
        return True
    return any(
        os.path.abspath(name) == filename
        or (not os.path.isabs(name) and filename.endswith(os.sep + name))
        for name in _sources
    )


def defined_at(names: Any) -> str:
    """JSON: where each of `names` that the user's namespace holds as a function runfix ran
    was last defined — its code's document and first line (a decorator's, if any) — so a
    breakpoint in a `def` another document redefined since says why it is not hit. Reads no
    attribute a user's class could answer: only plain functions (unwrapped), and their
    code, are looked at; a name holding anything else, or a library's function, is left out."""
    import types

    space = _shell().user_ns
    found: dict[str, list[Any]] = {}
    for name in names if isinstance(names, list) else ():
        value = space.get(name) if isinstance(name, str) else None
        for _ in range(10):  # (functools.wraps' chain, bounded)
            inner = value.__dict__.get("__wrapped__") if type(value) is types.FunctionType else None
            if type(inner) is not types.FunctionType:
                break
            value = inner
        if type(value) is types.FunctionType and value.__code__.co_filename in _sources:
            found[name] = [value.__code__.co_filename, value.__code__.co_firstlineno]
    return json.dumps(found)


MACHINE_POLLER = "ipykernel-parent-poller"
"""The name ipykernel's parent poller gets, so that the debugger's thread list can leave
it out (`lsp_server.debug.session`): it was an unnamed "Thread-1" beside the user's."""


def see_documents() -> str:
    """Let the kernel's debugger (debugpy's pydevd) set breakpoints in what runfix ran that
    is no file on disk — a notebook's cell named by its URI, a new document never saved —
    (pydevd refuses a breakpoint in a file it cannot find), and leave a breakpoint in a
    notebook where it was set (pydevd reads a file's code lines to move a breakpoint onto
    one: a notebook's JSON has none). Done now where pydevd is loaded, else the moment it
    is (a debugger starts it after this). JSON: the documents' lines as the kernel ran them
    (`_sources`), for the debugger to tell a line edited since it ran."""
    if not _tell_pydevd():
        sys.meta_path.insert(0, _PydevdFinder())
    for thread in threading.enumerate():  # (the debugger lists threads by their names)
        if type(thread).__name__.startswith("ParentPoller") and thread.name.startswith("Thread-"):
            thread.name = MACHINE_POLLER  # ipykernel's, unnamed: it was "Thread-1"
    return json.dumps(_sources)


def _tell_pydevd() -> bool:
    utils: Any = sys.modules.get("pydevd_file_utils")
    api: Any = sys.modules.get("_pydevd_bundle.pydevd_api")
    if utils is None or api is None:
        return False
    if getattr(utils.exists, "_runfix", False):
        return True
    exists, code_lines = utils.exists, api._get_code_lines

    def held_exists(filename: Any) -> Any:
        return (isinstance(filename, str) and _held(filename)) or exists(filename)

    def held_code_lines(code: Any) -> Any:
        if isinstance(code, str) and not code.endswith(".py") and _held(code):
            raise OSError(f"{code}: runfix ran it from the editor's text, not from this file")
        return code_lines(code)

    held_exists._runfix = True  # type: ignore[attr-defined]
    utils.exists, api._get_code_lines = held_exists, held_code_lines
    return True


class _PydevdFinder:
    """Finds nothing itself: tells pydevd (`_tell_pydevd`) once its API module is loaded,
    then leaves `sys.meta_path`."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "_pydevd_bundle.pydevd_api":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        loader, finder = spec.loader, self

        class _Then:
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(finder)
                _tell_pydevd()

        spec.loader = _Then()  # type: ignore[assignment]
        return spec
