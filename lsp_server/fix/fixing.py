"""Fixes: offline ones read from an error, and the model's, proven by running them.

`Fixer` is the loop: ask the model for a candidate, scan it, run it, and keep
going with each failure in the next request, up to `fix.maxAttempts`. It knows
nothing of LSP: the server and `runfix run --fix` hand it the ways to ask, to
run, to confirm and to report.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import keyword
import logging
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from executor.events import Error, RunOutcome, RunStatus, Variable
from executor.safety import Finding, scan, without_magics
from executor.text import split_lines
from executor.vouched import document_names
from lsp_server.fix.candidates import (
    SAMPLED_TEMPERATURE,
    Ran,
    agreed,
    disagreement,
    grouped,
    in_jail,
)
from lsp_server.fix.evidence import (
    error_name,
    frames_of,
    none_from,
    render,
    returned,
    sorted_instead,
)
from lsp_server.fix.fixcheck import Check, deletion_style, still_runs
from lsp_server.fix.reach import reaches_past
from lsp_server.fix.silencing import Failing, failing_of, missing_key, said, says, silencing
from lsp_server.folder_files import FileId, read_regular_file
from lsp_server.model.client import ModelCancelled, ModelError
from lsp_server.model.context import (
    LINE_BOUND,
    Attempt,
    ReplyError,
    answer_bound,
    error_text,
    extract_code,
    fix_messages,
    headline,
    line_messages,
    reply_block,
    splice_line,
)
from lsp_server.model.paste import from_file, paste_messages
from lsp_server.outputs.results import Problem
from lsp_server.text.cells import cell_at, code_of, is_marker, is_text_marker, split_cells
from lsp_server.text.languages import PYTHON, Language

log = logging.getLogger(__name__)
# -- offline fixes ----------------------------------------------------------------------

COMMON_IMPORTS = {
    "np": "import numpy as np",
    "pd": "import pandas as pd",
    "plt": "import matplotlib.pyplot as plt",
    "mpl": "import matplotlib as mpl",
    "sns": "import seaborn as sns",
    "tf": "import tensorflow as tf",
    "pl": "import polars as pl",
    "nx": "import networkx as nx",
    "sp": "import scipy as sp",
    "sm": "import statsmodels.api as sm",
    "px": "import plotly.express as px",
    "go": "import plotly.graph_objects as go",
    "Path": "from pathlib import Path",
    "defaultdict": "from collections import defaultdict",
    "Counter": "from collections import Counter",
    "OrderedDict": "from collections import OrderedDict",
    "namedtuple": "from collections import namedtuple",
    "deque": "from collections import deque",
    "dataclass": "from dataclasses import dataclass",
    "field": "from dataclasses import field",
    "partial": "from functools import partial",
    "reduce": "from functools import reduce",
    "lru_cache": "from functools import lru_cache",
    "pprint": "from pprint import pprint",
    "timedelta": "from datetime import timedelta",
    "date": "from datetime import date",
    "Any": "from typing import Any",
    "Optional": "from typing import Optional",
    "chain": "from itertools import chain",
    "product": "from itertools import product",
    "combinations": "from itertools import combinations",
    "permutations": "from itertools import permutations",
    "islice": "from itertools import islice",
    "sleep": "from time import sleep",
    "tqdm": "from tqdm import tqdm",
    "torch": "import torch",
    "nn": "from torch import nn",
}
_NO_MODULE = re.compile(r"^(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")
_NO_NAME = re.compile(r"^NameError: name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


def missing_module(message: str) -> str | None:
    match = _NO_MODULE.match(message)
    return match.group(1) if match else None


def missing_name(message: str) -> str | None:
    match = _NO_NAME.match(message)
    return match.group(1) if match else None


def imports_by_name(code: str, module: str) -> bool:
    """Whether `code` names `module` in an `import` statement (`import a.b`, `from a.b import
    c`; a parent or child package of it counts): a module whose name the code computes is
    not one the user wrote."""
    try:
        tree = ast.parse(without_magics(code))
    except SyntaxError:
        return False

    def related(name: str | None) -> bool:
        return bool(name) and (
            name == module or module.startswith(f"{name}.") or str(name).startswith(f"{module}.")
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(related(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and related(node.module):
            return True
    return False


def import_for(name: str) -> str | None:
    """The import statement that defines `name`, for common aliases and the standard library."""
    if name in COMMON_IMPORTS:
        return COMMON_IMPORTS[name]
    if name in sys.stdlib_module_names and not name.startswith("_"):
        return f"import {name}"
    return None


def import_line(lines: Sequence[str]) -> int:
    """Where a new import goes: after the leading imports, else after the file's header.

    The header is a shebang, encoding line, comments, a docstring, a first cell
    marker and `from __future__` imports; markdown and raw cells above the first code
    cell (a notebook's title) are passed, not written into."""
    start = 0
    while start < len(lines) and is_text_marker(lines[start]):
        after = range(start + 1, len(lines))
        start = next((i for i in after if is_marker(lines[i])), len(lines))
    header = start
    for i in range(start, len(lines)):
        line, text = lines[i], lines[i].strip()
        if (i == start and is_marker(line)) or (text.startswith("#") and not is_marker(line)):
            header = i + 1
        elif text:
            break
    source = "".join(lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return header
    at = header
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            at = node.end_lineno or node.lineno
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and node is tree.body[0]
        ):
            at = max(at, node.end_lineno or node.lineno)
        else:
            break
    return at


# -- what Python would have suggested ------------------------------------------------------

_NAME_ERROR = re.compile(r"NameError: name '([A-Za-z_]\w*)' is not defined")
_ATTRIBUTE_ERROR = re.compile(
    r"AttributeError: (?:module '([\w.]+)'|'(\w+)' object) has no attribute '(\w+)'"
)
_KEY_ERROR = re.compile(r"KeyError: '([^'\n]{1,80})'")


@dataclass(frozen=True)
class Suggestion:
    """What Python (or the kernel's columns) says of a misspelt name, attribute or key."""

    pattern: re.Pattern[str]
    """Which error it is about: `_NAME_ERROR`, `_ATTRIBUTE_ERROR` or `_KEY_ERROR`."""
    wrong: str
    right: str | None = None
    have: str = ""
    """When nothing is close, for a user class: what its objects have."""

    @property
    def text(self) -> str | None:
        if self.right is not None:
            return f"Did you mean: '{self.right}'?"
        return self.have or None


def suggest(
    error: str, code: str, names: Sequence[str] = (), keys: Sequence[str] = ()
) -> Suggestion | None:
    """Python's own "Did you mean" for a misspelt name or attribute (the interpreter prints
    it under a traceback; a kernel's error message lacks it): from the names of `code`, then
    `names` (the kernel's variables, the file's names), then builtins; for attributes, of a
    standard-library module the server has loaded or of a builtin type, or what a class of
    `code` sets on `self`. A `KeyError` gets the close one of `keys` (the columns of the
    kernel's DataFrames). A small model that does not see the typo fixes it once told."""
    if found := _KEY_ERROR.search(error):
        wrong = found.group(1)
        by_case = {k.lower(): k for k in keys}
        close = difflib.get_close_matches(wrong.lower(), sorted(by_case), n=1, cutoff=0.75)
        return Suggestion(_KEY_ERROR, wrong, by_case[close[0]]) if close else None
    kind: str | None = None
    if found := _NAME_ERROR.search(error):
        wrong = found.group(1)
        pools = [_names_in(code), set(names), set(dir(builtins))]  # nearest first
    elif found := _ATTRIBUTE_ERROR.search(error):
        module, kind, wrong = found.groups()
        owner: object = None
        if module and module.split(".")[0] in sys.stdlib_module_names:
            owner = sys.modules.get(module)
        elif kind and isinstance(getattr(builtins, kind, None), type):
            owner = getattr(builtins, kind)
        if owner is not None:
            pools = [{n for n in dir(owner) if not n.startswith("_")}]
        elif kind:  # a class of the user's code: what its methods set on self
            pools = [_attributes_of(code, kind)]
        else:
            pools = []
    else:
        return None
    for pool in pools:  # Python's own rule, then a likeness of letters (`srot` → `sort`)
        nearest = closest(wrong, pool) or next(
            iter(difflib.get_close_matches(wrong, sorted(pool - {wrong}), n=1, cutoff=0.75)),
            None,
        )
        if nearest is not None:
            return Suggestion(found.re, wrong, nearest)
    if kind and pools and found.re is _ATTRIBUTE_ERROR:
        shown = sorted(n for n in pools[0] - {wrong} if not n.startswith("__"))[:12]
        if shown:
            return Suggestion(found.re, wrong, have=f"'{kind}' objects have: {', '.join(shown)}.")
    return None


_STEP, _CASE = 2, 1
"""What a letter added, dropped or changed costs in `closest`'s distance, and a letter that
differs only in its case."""


def closest(wrong: str, pool: Collection[str]) -> str | None:
    """The name of `pool` Python's own "Did you mean" would name for `wrong`: the nearest by
    an edit distance where a letter's case costs half a change, within a bound that grows
    with both names' lengths (so `x` → `xs`, `valeus` → `values`; not `a` → `bc`)."""
    best: tuple[int, str] | None = None
    for name in sorted(pool):
        if name == wrong:
            continue
        bound = (len(name) + len(wrong) + 3) * _STEP // 6
        far = _distance(wrong, name, bound)
        if far <= bound and (best is None or far < best[0]):
            best = (far, name)
    return best[1] if best is not None else None


def _distance(a: str, b: str, bound: int) -> int:
    """The edit distance of `a` and `b` (`_STEP` a letter, `_CASE` a case), or `bound + 1`
    as soon as it must be more than `bound`."""
    while a and b and a[0] == b[0]:
        a, b = a[1:], b[1:]
    while a and b and a[-1] == b[-1]:
        a, b = a[:-1], b[:-1]
    if not a or not b:
        return _STEP * (len(a) + len(b))
    if len(a) > len(b):
        a, b = b, a
    if (len(b) - len(a)) * _STEP > bound or len(b) > 40:
        return bound + 1
    row = [_STEP * (i + 1) for i in range(len(a))]
    for j, letter in enumerate(b):
        left = diagonal = j * _STEP
        least = None
        for i, other in enumerate(a):
            change = 0 if letter == other else _CASE if letter.lower() == other.lower() else _STEP
            here = min(diagonal + change, row[i] + _STEP, left + _STEP)
            diagonal, row[i], left = row[i], here, here
            least = here if least is None or here < least else least
        if least is not None and least > bound:
            return bound + 1
    return row[-1]


def suggestion(
    error: str, code: str, names: Sequence[str] = (), keys: Sequence[str] = ()
) -> str | None:
    """`suggest`'s words, as the model is told them under the error."""
    found = suggest(error, code, names, keys)
    return found.text if found is not None else None


def suggested(
    target: Target, error: str, names: Sequence[str], keys: Sequence[str] = ()
) -> tuple[str, str] | None:
    """The code to fix with Python's own "Did you mean" applied on the line that raised
    (a misspelt name, attribute or column key, nothing else), and what was changed; None
    when nothing is suggested or the line does not hold the wrong one."""
    if target.line is None or not target.first <= target.line <= target.last:
        return None
    found = suggest(error, target.code, names, keys)
    if found is None or found.right is None:
        return None
    bad, good = found.wrong, found.right
    # What replaces the wrong one comes from the kernel or from data (a column of a CSV, a
    # name in the namespace): it goes into code only as a value — a key as the literal
    # `repr` makes of it, a name or attribute only when it is an identifier — never spliced
    # in as text (a column named `x"+str(exec(…))+"` would be code).
    if found.pattern is _KEY_ERROR:  # the key as a string literal, either quote
        pattern, into = rf"""(['"]){re.escape(bad)}\1""", lambda m: _literal(good, m.group(1))
    elif not good.isidentifier() or keyword.iskeyword(good):
        return None
    elif found.pattern is _ATTRIBUTE_ERROR:
        pattern, into = rf"\.{re.escape(bad)}\b", lambda m: f".{good}"
    else:
        pattern, into = rf"(?<![\w.]){re.escape(bad)}\b", lambda m: good
    lines = target.code.split("\n")
    at = target.line - target.first
    fixed, count = re.subn(pattern, into, lines[at])
    if not count:
        return None
    lines[at] = fixed
    said = "a column the kernel has" if found.pattern is _KEY_ERROR else "Python's suggestion"
    return "\n".join(lines), f"{said} (`{bad}` → `{good}`)"


def _literal(value: str, quote: str) -> str:
    """`value` as a string literal in the quotes the code used, where that needs no escape;
    else as `repr` writes it."""
    plain = repr(value)
    if plain[1:-1] == value and quote not in value and "\\" not in value:
        return f"{quote}{value}{quote}"
    return plain


def _hinted(error: str, hint: str | None) -> str:
    """The error with Python's suggestion right under the line that says what was wrong."""
    if not hint or hint in error:
        return error
    lines = error.rstrip().split("\n")
    at = next(
        (
            i
            for i in range(len(lines) - 1, -1, -1)
            if _NAME_ERROR.search(lines[i])
            or _ATTRIBUTE_ERROR.search(lines[i])
            or _KEY_ERROR.search(lines[i])
        ),
        len(lines) - 1,
    )
    return "\n".join([*lines[: at + 1], hint, *lines[at + 1 :]])


def _attributes_of(code: str, kind: str) -> set[str]:
    """The attributes a class of `code` named `kind` has: its methods, and what they set
    on `self`."""
    try:
        tree = ast.parse(without_magics(code))
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == kind:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.add(sub.name)
                elif (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    found.add(sub.attr)
    return found


def _names_in(code: str) -> set[str]:
    try:
        tree = ast.parse(without_magics(code))
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


# -- where a fix goes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The code a fix rewrites: where the innermost frame of the user's code raised.

    Another cell's function, when the cell that ran called it (the call site is left as it
    is, and runs again as the fix's test); else the piece that ran."""

    first: int
    last: int
    """Its lines in its file (0-based, inclusive)."""
    code: str
    line: int | None = None
    """The line that raised (0-based, in its file), when known."""
    path: Path | None = None
    """A module file of the folder the code is in; None: the document."""
    lines: tuple[str, ...] = ()
    """That module file's lines, as read."""
    file: FileId | None = None
    """Which file that was (the fix is written into it and no other)."""

    def holds(self, first: int, last: int) -> bool:
        """Whether this is the piece first..last itself."""
        return self.path is None and (self.first, self.last) == (first, last)


MODULE_LIMIT = 1_000_000
"""Bytes of a module file read to fix it (a bigger one is not the user's to fix here)."""
_NOT_USERS = {"site-packages", "dist-packages", "node_modules", "__pypackages__", "venv"}


def user_module(filename: str, folder: Path | None) -> Path | None:
    """`filename` as a module of the user's own, resolved: a regular `.py` file inside
    `folder` (a link out of it is not), not in a virtual environment or a hidden folder."""
    if folder is None or not filename.endswith(".py") or not os.path.isabs(filename):
        return None
    try:
        real = Path(filename).resolve()
        inside = real.relative_to(folder.resolve())
        regular = stat.S_ISREG(real.stat().st_mode)
    except (OSError, ValueError):
        return None
    hidden = any(part.startswith(".") or part in _NOT_USERS for part in inside.parts[:-1])
    return real if regular and not hidden else None


@dataclass(frozen=True)
class Reported:
    """An error as the document shows it (a diagnostic a quick fix is for)."""

    error: str
    """Its traceback (else its message)."""
    raised: int | None
    """The line it was raised on (the innermost frame in the document), where known."""
    module: tuple[Path, int] | None
    """The folder's module file (and line) it was raised in, where the diagnostic names one
    ("raised in …")."""


def reported(
    problems: Sequence[Problem], piece: tuple[int, ...], message: str, folder: Path
) -> Reported:
    """What the stored results say of the error `message` a run of lines `piece` raised."""
    problem = next(
        (p for p in problems if p.kind == "run" and p.piece == piece and p.message == message),
        None,
    )
    if problem is None:
        return Reported(message, None, None)
    module = next(
        (
            (found, related.line)
            for related in reversed(problem.related)
            if related.path and (found := user_module(related.path, folder)) is not None
        ),
        None,
    )
    return Reported(error_text(problem.message, problem.text), problem.first, module)


def module_frame(error: Error | None, path: str, folder: Path | None) -> tuple[Path, int] | None:
    """The innermost frame below the document's in a module file of the folder: the file
    and the line (0-based) that raised there."""
    if error is None:
        return None
    frames = list(error.frames)
    ours = [i for i, f in enumerate(frames) if f.filename == path]
    for frame in reversed(frames[ours[-1] + 1 :] if ours else frames):
        if (module := user_module(frame.filename, folder)) is not None:
            return module, frame.line - 1
    return None


_REDEFINE = """\
def __runfix_redefine(path, source):
    import os, sys
    real = os.path.realpath(path)
    for module in list(sys.modules.values()):
        file = module.__dict__.get("__file__") if type(module).__name__ == "module" else None
        if isinstance(file, str) and os.path.realpath(file) == real:
            break
    else:
        raise ImportError(path + " is not imported in the kernel: import it, then fix again")
    space = module.__dict__
    old = dict(space)
    code = compile(source, path, "exec")
    guard = getattr(sys.modules.get("_runfix_guard"), "_GUARD", None)
    if guard:  # the model's code, wherever its functions run later
        guard[0].adopt(code)
    exec(code, space)
    user = globals()
    for name, value in list(user.items()):
        for key, was in old.items():
            if value is was and space.get(key) is not was:
                user[name] = space[key]
                break
try:
    __runfix_redefine({path!r}, {source!r})
finally:
    del __runfix_redefine
"""


def redefinition(path: str, first: int, candidate: str) -> str:
    """Kernel code that runs `candidate` (lines from `first` of the module file `path`) in
    that module's namespace — its tracebacks name the file's lines — and rebinds the names
    the user's namespace took from it (`from utils import average`), as the file will say
    once the fix is applied."""
    return _REDEFINE.format(path=path, source="\n" * first + candidate)


def module_target(module: Path, line: int) -> Target | None:
    """The top-level statement of `module` holding `line`, read with a size cap."""
    try:
        data, file = read_regular_file(module, MODULE_LIMIT)
        lines = split_lines(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    if not 0 <= line < len(lines):
        return None
    a, b = enclosing(lines, 0, len(lines) - 1, line)
    return Target(a, b, code_of(lines, a, b), line, module, tuple(lines), file)


def raised_line(error: Error | None, path: str) -> int | None:
    """The document's line (0-based) of the innermost frame in it, if any."""
    if error is None:
        return None
    ours = [f for f in error.frames if f.filename == path]
    if ours:
        return ours[-1].line - 1
    return error.span.first - 1 if error.span is not None else None


def target_for(
    lines: Sequence[str],
    first: int,
    last: int,
    raised: int | None,
    markers: Sequence[str],
    python: bool = True,
) -> Target:
    """Where the fix of piece first..last goes, given the line that raised: in another
    cell, the top-level statement holding it (in another language than Python, which
    runfix does not parse, that whole cell)."""
    piece = Target(first, last, code_of(lines, first, last), raised)
    if raised is None or first <= raised <= last or not 0 <= raised < len(lines):
        return piece if raised is None or first <= raised <= last else replace(piece, line=None)
    cell = cell_at(split_cells(lines, markers), raised)
    if cell is None:
        return replace(piece, line=None)
    a, b = (
        enclosing(lines, cell.code_first, cell.last, raised)
        if python
        else (cell.code_first, cell.last)
    )
    return Target(a, b, code_of(lines, a, b), raised)


def enclosing(lines: Sequence[str], first: int, last: int, line: int) -> tuple[int, int]:
    """The top-level statement of lines first..last holding `line` (a function with its
    decorators), else first..last."""
    try:
        tree = ast.parse(without_magics(code_of(lines, first, last)))
    except SyntaxError:
        return first, last
    at = line - first + 1
    for node in tree.body:
        top = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        if top <= at <= (node.end_lineno or node.lineno):
            return first + top - 1, first + (node.end_lineno or node.lineno) - 1
    return first, last


# -- the model's fixes --------------------------------------------------------------------


@dataclass
class FixResult:
    status: str
    """fixed | failed | cancelled"""
    code: str | None = None
    """The candidate that ran clean."""
    outcome: RunOutcome | None = None
    """The run that proved it: the candidate's, or the calling piece's run again after it
    (when the fix went into another cell)."""
    attempts: int = 0
    message: str = ""
    tried: list[Attempt] = field(default_factory=list)
    check: Check | None = None
    """How the candidate fared against the cells that depend on it (None: not checked)."""
    flag: str | None = None
    """How it makes the error go away by removing what failed (`deletion_style`,
    `still_runs`), if so."""
    target: Target | None = None
    """Where the candidate goes (None: the piece that failed)."""
    defined: RunOutcome | None = None
    """The candidate's own run, when it went elsewhere than the piece."""
    says: str = ""
    """What the fixed code printed or returned (`silencing.says`), for the fix's note: a
    person judges the result, not the word "fixed"."""

    @property
    def held(self) -> str | None:
        """Why the candidate must not be applied without a look (None: it may)."""
        if self.check is not None and self.check.regressions:
            return self.check.label
        return self.flag

    @property
    def label(self) -> str:
        """What was checked, for a title or a message: `verified: 3 dependent cells still
        pass`, `breaks …`, `not checked against dependents: …`, the deletion it is."""
        parts = [self.check.label] if self.check is not None else []
        if self.flag:
            parts.append(f"{self.flag}: look before applying")
        return "; ".join(parts)


class Ports(Protocol):
    """What one fix's loop asks of the world, declared in one object (`fix.ports.FixPorts`
    is runfix's): the loop calls these and nothing else, and none of them calls back into
    the loop."""

    fixes_modules: bool
    """Whether a candidate for a module file's code can be put into that module in the
    kernel (`redefine`); False: a fix stays in the document."""
    origin: str
    """Who wrote the code `run` runs, for the record: "model", or "offline" while the loop
    tries a fix read from the error (Python's suggestion, a column the kernel has)."""

    async def ask(self, messages: list[dict[str, str]], what: str, bound: int, asked: int) -> str:
        """The model's reply to `messages` (`what`: the attempt, for progress; `bound`: the
        answer's cap; `asked`: the requests this fix made before); ModelError or
        ModelCancelled otherwise. A retry follows a failed candidate: sampled warmer
        (`RETRY_TEMPERATURE`), with another seed."""
        ...

    async def ask_many(self, asks: Sequence[Asking], what: str) -> list[list[str]]:
        """The answers to several requests asked at once (each `Asking.n` choices, sampled
        at its temperature; None: the request's own): a request that failed has none;
        ModelError when none answered, ModelCancelled when cancelled."""
        ...

    async def run(self, code: str, at: int, proof_only: bool = False) -> RunOutcome:
        """Run code at a document line (0-based); never raises for what the code did.
        `proof_only`: in a jail or not at all, nothing asked of the user."""
        ...

    async def variables(self) -> list[Variable]:
        """What the kernel's namespace holds (for the request)."""
        ...

    async def confirm(self, code: str, findings: list[Finding]) -> bool:
        """Asked before a flagged candidate runs; False: it does not run."""
        ...

    def report(self, message: str) -> None:
        """Progress, as the loop goes."""
        ...

    async def evidence(self, ename: str, line: int) -> Mapping[str, Any] | None:
        """What the kernel's frames held when an error was raised (the kernel helper's
        answer); None: the kernel cannot say."""
        ...

    async def redefine(self, target: Target, candidate: str) -> RunOutcome:
        """A module file's candidate put into that module in the kernel (what the file will
        say once the edit is applied) for the `run` that follows; called only where
        `fixes_modules`. An error here (it does not compile) is the attempt's."""
        ...

    async def define(self, code: str, at: int) -> RunOutcome:
        """A candidate for another cell (a function the piece called) at document line
        `at`, in place for the `run` that follows (the piece again: its test). An error
        here is the attempt's."""
        ...

    async def verify(self, candidate: str, target: Target) -> Check | None:
        """A candidate that ran clean, checked against the cells that depend on it
        (`fixcheck`); None: not checked. One that breaks a passing cell goes back to the
        model with what it broke."""
        ...


@dataclass(frozen=True)
class Asking:
    """One request of a round of candidates asked at once."""

    messages: list[dict[str, str]]
    n: int
    bound: int
    temperature: float | None = None
    """None: the request's own (model.temperature)."""
    how: str = "asked"
    """Which way it asks (`candidates.Ran.how`)."""


RETRY_TEMPERATURE = 0.7
"""A retry samples at least this warm: at temperature 0 a model answers the same request,
told its answer failed, with the same answer (seen with Qwen2.5-Coder-0.5B)."""


UNUSED = "(not used:"
"""How an answer without code that can be used is kept among the attempts (the next request
says so in its own line, not as an attempt)."""
IDENTICAL = (
    "This is the code that failed, unchanged (or an earlier attempt again): it was not run. "
    "Make a different change that removes the cause of the error."
)


def _same_code(a: str, b: str) -> bool:
    """The same code, whatever its whitespace and comments."""
    try:
        return ast.dump(ast.parse(without_magics(a))) == ast.dump(ast.parse(without_magics(b)))
    except SyntaxError:
        return "".join(a.split()) == "".join(b.split())


@dataclass
class Fixer:
    """One failing piece of code at lines first..last of a document, and how to fix it."""

    ports: Ports
    """The model, the user, the kernel and the check, as the loop asks them."""
    max_attempts: int
    budget: int
    max_tokens: int = 1024
    """The cap on an answer (model.maxTokens); a request asks for what its code needs."""
    layout: str = "first"
    language: Language = PYTHON
    modules: Collection[str] = ()
    """The folder's own modules (what a candidate may import unasked)."""
    """What the code is in. Python's own suggestions (a typo's name), the check that a
    candidate keeps the failing statement and the safety scan read Python only: in another
    language the model is asked in it, and every candidate is one to look at before it
    runs (`safety.scan`)."""
    path: str = ""
    """The document's path, as the kernel's frames name it."""
    evidence_style: str = "facts"
    """How the evidence is said (`evidence.STYLES`)."""
    evidence_after: int = 0
    """Answers the model gives before a request carries the evidence (0: the first does)."""
    narrow: bool = True
    """After an answer that changed nothing (or had no code), ask for the failing line alone
    (`context.line_messages`); False: the whole code again, with a line saying so."""
    stop_alike: bool = True
    """Two answers alike in a row end the loop."""
    retarget: Callable[[int], Target] | None = None
    """Where a fix goes for a document line (0-based) that is the cause of the error (the
    `def` of a function that returned a None the failing line used); None: not moved."""
    by_tests: bool = False
    """The project's tests judge a candidate (`tests_fix`): a guard that returns early or
    code that no longer runs the raising line is theirs to pass or fail; only a candidate
    that silences the error (`try/except: pass`) is held."""
    candidates: int = 1
    """Candidates asked at once in the first attempt (`model.candidates`), each run in its own
    jail and chosen by what they do (`_round`); 1: one answer an attempt."""

    async def fix(
        self,
        lines: Sequence[str],
        first: int,
        last: int,
        code: str,
        error: str,
        target: Target | None = None,
        raised_at: int = 0,
    ) -> FixResult:
        """`error`: what the piece raised, traceback included (see `context.error_text`).
        `target`: where the fix goes when the frame that raised is elsewhere (another
        cell's function); the piece then runs again after it, unchanged, as its test.
        `raised_at`: the line (1-based, in its file) the innermost frame of the user's code
        raised on, which the kernel's evidence must be of (0: the kernel's last error)."""
        loop = await self._begin(lines, first, last, code, error, target, raised_at)
        done, fresh, number = await self._opening(loop, lines, error)
        """`fresh`: the kernel's variables, until a run may have changed them."""
        if done is not None:
            return done
        note = ""
        """What was wrong with the last answer, said in one line in the next request."""
        while number < self.max_attempts:
            number += 1
            current = loop.current
            headline = current.strip().splitlines()[-1] if current.strip() else "error"
            self.ports.report(f"attempt {number}/{self.max_attempts}: {headline[:80]}")
            variables = fresh = fresh if fresh is not None else await self.ports.variables()
            focus = loop.focus if note and self.narrow else None
            asking = time.perf_counter()
            try:
                reply = await self._ask(loop, number, focus, note, variables)
            except ModelCancelled:
                return loop.ended("cancelled", number, "cancelled")
            except ModelError as exc:
                if loop.best is None and loop.flagged is None:
                    return loop.ended("failed", number, str(exc))
                break  # what ran clean so far is offered for what it is
            try:
                candidate = self._candidate(loop, reply, focus)
            except ReplyError as exc:
                loop.no_code(reply[:2000], str(exc))
                if loop.answered(f"no code: {reply.strip()}") and self.stop_alike:
                    return loop.stuck(number)
                note = f"Your last answer could not be used ({exc}): answer with code."
                continue
            if loop.seen(candidate):  # not run: it failed already
                loop.failed(candidate, IDENTICAL, loop.current)
                loop.unchanged += 1
                if loop.answered(_normal(candidate)) and self.stop_alike:
                    return loop.stuck(number)
                note = (
                    "Your last answer left the code unchanged, and unchanged it raises: change it."
                )
                continue
            if loop.answered(_normal(candidate)) and self.stop_alike:
                return loop.stuck(number)
            note = ""
            note, ended = await _screened(self, loop, candidate, lines, number)
            if ended is not None:
                return ended
            if note:
                continue
            asked, loop.checked = time.perf_counter(), 0.0
            done = await self._attempt(loop, candidate, number, lines)
            self._took(number, asked - asking, time.perf_counter() - asked, loop.checked)
            if done is not None:
                return done
            fresh = None  # the candidate ran: the kernel's variables may differ now
        return loop.settled(number)

    async def _opening(
        self, loop: _Loop, lines: Sequence[str], error: str
    ) -> tuple[FixResult | None, list[Variable] | None, int]:
        """Before one answer an attempt: Python's own suggestion, tried before any model is
        asked, then the round of candidates asked at once (`_round`). (The fix's end, else
        the kernel's variables where no run may have changed them, and the attempts made.)"""
        variables = await self.ports.variables()
        python = self.language.python
        names = [v.name for v in variables] + loop.in_code
        keys = loop.keys = [str(k) for v in variables for k in (v.columns or {})]
        typo = suggested(loop.target, error, names, keys) if python else None
        typo = typo or (self._from_evidence(loop, error) if python else None)
        typo = typo or (_module_import(loop.target, error) if python else None)
        fresh: list[Variable] | None = variables
        if typo is not None:
            done = await self._offline(loop, typo, lines)
            if done is not None:
                return done, None, 0
            fresh = None
        if self.candidates > 1 and not self.by_tests:
            done = await _round(self, loop, lines, fresh or await self.ports.variables())
            return done, None, 1
        return None, fresh, 0

    def _took(self, number: int, model: float, ran: float, checked: float) -> None:
        """Where an attempt's time went, said as it ends: the model (reading the request and
        writing the answer), running the candidate, the check against what depends on it."""
        check = f", the check {checked:.1f} s" if checked else ""
        self.ports.report(
            f"attempt {number} took {model + ran:.1f} s: the model {model:.1f} s, running it "
            f"{ran - checked:.1f} s{check}"
        )

    async def _offline(
        self, loop: _Loop, typo: tuple[str, str], lines: Sequence[str]
    ) -> FixResult | None:
        """Python's own suggestion (`typo`: the code, what it is), run as an attempt."""
        self.ports.report(f"trying {typo[1]}")
        self.ports.origin = "offline"
        try:
            done = await self._attempt(loop, typo[0], 0, lines)
        finally:
            self.ports.origin = "model"
        if done is not None and done.status == "fixed":
            done.message = f"{typo[1]}; no model asked"
        return done

    def _loop(
        self,
        lines: Sequence[str],
        first: int,
        last: int,
        code: str,
        error: str,
        target: Target | None,
    ) -> _Loop:
        """One fix's state, with what stays the same across its attempts."""
        if target is not None and target.path is not None and not self.ports.fixes_modules:
            target = None
        loop = _Loop(target or Target(first, last, code), first, last, code, error, error)
        loop.ename, loop.code_error = error_name(error), error
        in_module = loop.target.path is not None
        loop.file = loop.target.lines if in_module else lines
        loop.context = [
            ln for i, ln in enumerate(loop.file) if not loop.target.first <= i <= loop.target.last
        ] + (list(lines) if in_module else [])
        loop.bound = answer_bound(loop.target.code, self.max_tokens)
        # The names the document's code uses (Python's only): the same for every attempt.
        loop.in_code = sorted(_names_in("".join(lines))) if self.language.python else []
        return loop

    async def _ask(
        self, loop: _Loop, number: int, focus: int | None, note: str, variables: list[Variable]
    ) -> str:
        """One request to the model; ModelError or ModelCancelled otherwise."""
        messages, bound = self._messages(loop, focus, note, variables)
        what = f"attempt {number}/{self.max_attempts}"
        return await self.ports.ask(messages, what, bound, len(loop.answers))

    def _messages(
        self, loop: _Loop, focus: int | None, note: str, variables: Sequence[Variable]
    ) -> tuple[list[dict[str, str]], int]:
        """The next request, and the bound on its answer: after an answer that changed
        nothing, the failing line alone (where known); else the code to fix with all the
        request holds."""
        target, current = loop.target, loop.current
        held = loop.evidence if len(loop.answers) >= self.evidence_after else ""
        if focus is not None:
            asked = line_messages(target.code, focus, current, held, note, self.language)
            return asked, min(loop.bound, LINE_BOUND)
        hint = (
            suggestion(
                current,
                "\n".join([target.code, *(a.code for a in loop.tried[-1:])]),
                [*(v.name for v in variables), *loop.in_code],
                [str(k) for v in variables for k in (v.columns or {})],
            )
            if self.language.python
            else None
        )
        messages = fix_messages(
            target.code,
            _hinted(current, hint),
            loop.file,
            (target.first, target.last),
            variables,
            [a for a in loop.tried if a.error != IDENTICAL and not a.error.startswith(UNUSED)],
            self.budget,
            self.language,
            caller=(loop.code, None if target.path else (loop.first, loop.last))
            if loop.elsewhere
            else None,
            layout=self.layout,
            where=target.path.name if target.path is not None else None,
            evidence=held,
            note=note,
        )
        return messages, loop.bound

    def _candidate(self, loop: _Loop, reply: str, focus: int | None) -> str:
        """The code an answer proposes (the failing line's answer put in its place);
        ReplyError when it holds none that can be used."""
        if focus is None:
            return extract_code(
                reply, asked=loop.target.code, context=loop.context, language=self.language
            )
        candidate = splice_line(loop.target.code, focus, reply_block(reply, self.language))
        if self.language.python:
            candidate = extract_code(f"```python\n{candidate}```", language=PYTHON)
        return candidate

    def _from_evidence(self, loop: _Loop, error: str) -> tuple[str, str] | None:
        """A fix the kernel's evidence names, tried before any model is asked: a function
        of the file that returned None for want of a `return` returns its last expression;
        `x = items.sort()` becomes `x = sorted(items)`."""
        if loop.found is None:
            return None
        target = loop.target
        if loop.none_cause and (made := returned(target.code)) is not None:
            return made
        return sorted_instead(target.code, loop.found, error)

    async def _begin(
        self,
        lines: Sequence[str],
        first: int,
        last: int,
        code: str,
        error: str,
        target: Target | None,
        raised_at: int,
    ) -> _Loop:
        """The fix's state, with what the kernel held when the code raised; where that shows
        the cause is a function of the file that returned None, the fix goes there."""
        loop = self._loop(lines, first, last, code, error, target)
        loop.evidence = await self._evidence(lines, loop, error, raised_at, None)
        loop.failing = failing_of(loop.found, error)
        if loop.target.path is not None and not _ran_as_module(loop.found, loop.target.path):
            # code compiled under the module file's name, not that file: not fixed there
            log.info("%s did not run as that module: the fix goes where it ran", target)
            loop = self._moved(loop, lines, None)
        cause = self._cause(loop, lines, error)
        if cause is not None:
            loop = self._moved(loop, lines, cause)
            loop.none_cause = True
        return loop

    def _moved(self, loop: _Loop, lines: Sequence[str], target: Target | None) -> _Loop:
        """The fix's state aimed at `target` instead, with the evidence already read."""
        moved = self._loop(lines, loop.first, loop.last, loop.code, loop.current, target)
        moved.evidence, moved.found, moved.failing = loop.evidence, loop.found, loop.failing
        moved.ename, moved.code_error = loop.ename, loop.code_error
        return moved

    def _cause(self, loop: _Loop, lines: Sequence[str], error: str) -> Target | None:
        """Where the cause of a `None` error is, when the kernel's evidence shows it is a
        function of the document outside the code to fix (a forgotten `return`): the fix
        goes there, and the code that failed runs again as its test."""
        if self.retarget is None or not self.language.python:
            return None
        found = none_from(loop.found, error, {self.path: lines})
        if found is None or found[0] != self.path:
            return None
        line, target = found[1], loop.target
        if loop.first <= line <= loop.last or (
            target.path is None and target.first <= line <= target.last
        ):
            return None
        moved = self.retarget(line)
        if moved.holds(loop.first, loop.last) or not moved.first <= line <= moved.last:
            return None
        return replace(moved, line=None)

    async def _evidence(
        self, lines: Sequence[str], loop: _Loop, error: str, line: int, candidate: str | None
    ) -> str:
        """What the kernel held when `error` was raised, for the next request ("" where
        the kernel cannot say: another language, a kernel without runfix's helper)."""
        if not self.language.python:
            return ""
        ename = error_name(error)
        if ename is None:
            return ""
        try:
            found = loop.found = await self.ports.evidence(ename, line)
        except Exception as exc:  # the evidence helps; a fix never fails for it
            log.info("the kernel's evidence could not be read: %s", exc)
            return ""
        target = loop.target
        doc = list(lines)
        module = list(target.lines)
        if candidate is not None:  # the kernel ran the candidate where it will stand
            rows = candidate.splitlines(keepends=True)
            if target.path is None:
                doc[target.first : target.last + 1] = rows
            else:
                module[target.first : target.last + 1] = rows
        sources = {self.path: doc}
        names = {}
        if target.path is not None:
            sources[str(target.path)] = module
            names[str(target.path)] = target.path.name
        return render(found, headline(error), sources, names, self.evidence_style)

    async def _attempt(
        self, loop: _Loop, candidate: str, number: int, lines: Sequence[str]
    ) -> FixResult | None:
        """Run one candidate and judge it: the result to answer with, or None to go on."""
        outcome, defined = await _trial(self, loop, candidate)
        if outcome.status == RunStatus.CANCELLED:
            return loop.ended("cancelled", number, "cancelled")
        if outcome.status != RunStatus.OK:
            await _raised(self, loop, candidate, outcome, lines)
            return None
        flag = _flag(self, loop, candidate, outcome)
        result = FixResult("fixed", candidate, outcome, number, tried=loop.tried, flag=flag)
        result.says = says(outcome)
        result.target, result.defined = loop.target, defined
        return await _verified(self, loop, result, number)


async def _trial(
    fixer: Fixer, loop: _Loop, candidate: str, proof_only: bool = False
) -> tuple[RunOutcome, RunOutcome | None]:
    """Run one candidate where it goes (in a jail: the ports' `run`), with its test: the
    piece again when the fix goes elsewhere. (What ran, the candidate's own run there.)
    `proof_only`: in the jail or not at all, nothing asked (a round's later candidates)."""
    target, ports = loop.target, fixer.ports
    if target.path is not None and ports.fixes_modules:
        defined = outcome = await ports.redefine(target, candidate)
        if defined.status == RunStatus.OK:  # the test: the caller again
            outcome = await ports.run(loop.code, loop.first, proof_only)
        return outcome, defined
    if loop.elsewhere:
        defined = outcome = await ports.define(candidate, target.first)
        if defined.status == RunStatus.OK:
            grown = candidate.rstrip("\n").count("\n") - (target.last - target.first)
            moved = grown if target.last < loop.first else 0
            outcome = await ports.run(loop.code, loop.first + moved, proof_only)  # the caller
        return outcome, defined
    return await ports.run(candidate, loop.first, proof_only), None


async def _raised(
    fixer: Fixer, loop: _Loop, candidate: str, outcome: RunOutcome, lines: Sequence[str]
) -> None:
    """A candidate that did not run clean, kept among the attempts with what it raised."""
    failed = outcome.error
    why = error_text(failed.message, failed.text) if failed else outcome.note or "failed"
    loop.failed(candidate, why, why)
    if failed is not None:
        loop.evidence = await fixer._evidence(lines, loop, why, 0, candidate)


def _flag(fixer: Fixer, loop: _Loop, candidate: str, outcome: RunOutcome) -> str | None:
    """How a candidate that ran clean makes the error go away by removing or silencing what
    failed (None: it does not)."""
    target = loop.target
    if not fixer.language.python:
        return None
    kept = (
        still_runs(target.code, target.line - target.first + 1, candidate, loop.ename)
        if target.line is not None and target.first <= target.line <= target.last
        else None
    )
    flag = kept or deletion_style(target.code, candidate)
    if fixer.by_tests:  # the tests judge theirs: only silencing is held
        return flag if flag is not None and flag.startswith("silences") else None
    if flag is None:
        line = target.line - target.first + 1 if target.line is not None else None
        failing = loop.failing  # (what raised elsewhere, a fix of its cause need not hold)
        if failing is not None and failing.expression.strip() not in target.code:
            failing = None
        if failing is None or (failing.ename == "KeyError" and not failing.has):
            failing = missing_key(target.code, loop.code_error, loop.keys) or failing
        held = silencing(target.code, candidate, failing, said(outcome), line)
        flag = held.rule if held is not None else None
    return flag


async def _verified(fixer: Fixer, loop: _Loop, result: FixResult, number: int) -> FixResult | None:
    """A candidate that ran clean, checked against what depends on it: the result to answer
    with, or None to go on (held or breaking: kept as the best so far, the model told)."""
    assert result.code is not None and result.target is not None
    candidate, flag = result.code, result.flag
    checked = await fixer.ports.verify(candidate, result.target)
    loop.checked = checked.seconds if checked is not None else 0.0
    if checked is not None and checked.status == "cancelled":
        return loop.ended("cancelled", number, "cancelled")
    result.check = checked
    if flag is not None:
        _hold(loop, result, flag)
        return None
    if checked is None or not checked.regressions:
        return result
    if loop.best is None or len(checked.regressions) < len(loop.best.check.regressions):  # type: ignore[union-attr]
        loop.best = result
    loop.failed(candidate, checked.for_model(), checked.for_model())
    return None


def _hold(loop: _Loop, result: FixResult, flag: str) -> None:
    """A candidate that ran clean by removing or silencing what failed: offered for what it
    is if nothing better comes (the first such), and the model told why it is no fix."""
    assert result.code is not None
    loop.flagged = loop.flagged or result
    why = (
        f"It ran, but it {flag}: that only hides the error. Keep that statement, running, "
        "and fix its cause."
    )
    loop.failed(result.code, why, why)


def _module_import(target: Target, error: str) -> tuple[str, str] | None:
    """A `NameError` raised in a module file of the folder on a name a standard import
    provides: the import goes into that module, above the code that raised (in the caller's
    file it fixes nothing)."""
    found = _NAME_ERROR.search(error)
    statement = import_for(found.group(1)) if found else None
    if statement is None or target.path is None:
        return None
    return f"{statement}\n{target.code}", f"`{statement}` added to {target.path.name}"


async def _round(
    fixer: Fixer, loop: _Loop, lines: Sequence[str], variables: Sequence[Variable]
) -> FixResult | None:
    """The first attempt as a round: `fixer.candidates` answers asked at once — runfix's
    request at its own temperature, the same sampled warmer, and one asked the paste's way
    (the whole file and its traceback) — each run in its own jail; of those that ran clean,
    held by no rule, the largest group by what they print wins (`candidates.agreed`), where
    groups tie the first is offered with the disagreement said (held: never applied
    unseen). None: none ran clean, the loop goes on with what failed."""
    target = loop.target
    asked = time.perf_counter()
    try:
        codes = await _asked_round(fixer, loop, variables)
    except ModelCancelled:
        return loop.ended("cancelled", 1, "cancelled")
    except ModelError as exc:
        return loop.ended("failed", 1, str(exc))
    ran_at = time.perf_counter()
    clean: list[Ran] = []
    jailed = False  # (the first candidate ran in a jail: the others are proven there or held)
    for code, how, votes in codes:
        findings = scan(
            code, target.first + 1, language=fixer.language.unread,
            context=document_names("".join(target.lines if target.path is not None else lines)),
            modules=fixer.modules,
        )  # fmt: skip
        if findings:  # a flagged one is asked about only in the loop, one at a time
            loop.failed(code, f"It was not run: it {findings[0].message}.", loop.current)
            continue
        # Only the first may ask the user (what it tried, run it in the kernel?): a round of
        # four that each try a write asked four times.
        outcome, defined = await _trial(fixer, loop, code, proof_only=jailed)
        if outcome.status == RunStatus.CANCELLED:
            return loop.ended("cancelled", 1, "cancelled")
        jailed = jailed or in_jail(outcome)
        alone = not jailed  # no jail here: this candidate is the round's only one
        if outcome.status != RunStatus.OK:
            await _raised(fixer, loop, code, outcome, lines)
            if alone:
                break
            continue
        flag = _flag(fixer, loop, code, outcome)
        if flag is not None:
            held = FixResult("fixed", code, outcome, 1, tried=loop.tried, flag=flag)
            held.says, held.target, held.defined = says(outcome), target, defined
            _hold(loop, held, flag)
            if alone:
                break
            continue
        clean.append(Ran(code, outcome, defined, how, votes))
        if alone:
            break
    groups = grouped(clean)
    chosen = agreed(groups, target.code)
    tie = chosen is None and bool(groups)
    if tie:
        chosen = min(groups[0], key=lambda r: len(r.code))
    fixer._took(1, ran_at - asked, time.perf_counter() - asked, 0.0)
    if chosen is None:
        return None
    log.info("round: %d candidates, %d clean, groups %s", len(codes), len(clean),
             [len(g) for g in groups])  # fmt: skip
    result = FixResult("fixed", chosen.code, chosen.outcome, 1, tried=loop.tried)
    result.says, result.target, result.defined = says(chosen.outcome), target, chosen.defined
    if tie:  # said as it is, not asked again: one more answer is no judge between them
        result.flag = disagreement(groups)
        result.message = f"the candidates that ran clean disagree; the one offered {result.flag}"
        return result
    return await _verified(fixer, loop, result, 1)


async def _asked_round(
    fixer: Fixer, loop: _Loop, variables: Sequence[Variable]
) -> list[tuple[str, str, int]]:
    """The round's answers, asked at once, as candidates (the code, which way it was asked,
    how many answers were it): each new one once; what held no code is kept among the
    attempts."""
    target = loop.target
    messages, bound = fixer._messages(loop, None, "", variables)
    name = target.path.name if target.path is not None else Path(fixer.path).name or "the file"
    pasted = paste_messages(loop.file, name, loop.current, fixer.language)
    whole = answer_bound("".join(loop.file), fixer.max_tokens)
    sampled = fixer.candidates - 2
    asks = [Asking(messages, 1, bound), Asking(pasted, 1, whole, how="paste")]
    if sampled > 0:
        asks.append(Asking(messages, sampled, bound, SAMPLED_TEMPERATURE, "sampled"))
    what = f"attempt 1/{fixer.max_attempts}: {fixer.candidates} candidates"
    fixer.ports.report(f"{what}, asked at once")
    replies = await fixer.ports.ask_many(asks, what)
    codes: list[tuple[str, str, int]] = []
    for ask, answers in zip(asks, replies, strict=True):
        for reply in answers:
            try:
                if ask.how == "paste":
                    code = from_file(reply, loop.file, target.first, target.last, fixer.language)
                else:
                    code = fixer._candidate(loop, reply, None)
            except ReplyError as exc:
                loop.no_code(reply[:2000], str(exc))
                continue
            loop.answered(_normal(code))
            same = next((i for i, (c, _, _) in enumerate(codes) if _same_code(code, c)), None)
            if same is not None:  # the same code again: one more answer agreeing
                codes[same] = (codes[same][0], codes[same][1], codes[same][2] + 1)
            elif not loop.seen(code):
                codes.append((code, ask.how, 1))
    return codes


async def _screened(
    fixer: Fixer, loop: _Loop, candidate: str, lines: Sequence[str], number: int
) -> tuple[str, FixResult | None]:
    """Before a candidate runs: for the tests, one that reaches past the code the
    failure ran through (`reach`), held with the rule it broke; one the scan flags, run
    only once confirmed. (What to tell the model, not run: ""), or the fix's end."""
    if fixer.by_tests and (reach := reaches_past(loop.target.code, candidate)):
        why = f"It was not run: it {reach}."  # held with the rule (issue 68, 4)
        loop.failed(candidate, why, loop.current)
        return f"{why} Change only the code the failure ran through.", None
    findings = scan(
        candidate,
        loop.target.first + 1,
        language=fixer.language.unread,
        context=document_names(
            "".join(loop.target.lines if loop.target.path is not None else lines)
        ),
        modules=fixer.modules,
    )
    if not findings or await fixer.ports.confirm(candidate, findings):
        return "", None
    if fixer.by_tests:  # the tests judge candidates: a flagged one is one not run
        why = f"It was not run: it {findings[0].message}."
        loop.failed(candidate, why, loop.current)
        return f"{why} Answer with the corrected code only.", None
    said = (
        "the model's candidate was flagged and not confirmed, so it did not run "
        f"({findings[0].message})"
    )
    return "", loop.ended("failed", number, said)


@dataclass
class _Loop:
    """One fix's state across its attempts."""

    target: Target
    first: int
    last: int
    code: str
    current: str
    """What the next request says went wrong."""
    error: str = ""
    """The last error a candidate (or the code) raised."""
    ename: str | None = None
    """The name of the error the code raised in the first place (`KeyError`)."""
    code_error: str = ""
    """What the code raised in the first place."""
    keys: list[str] = field(default_factory=list)
    """The keys of the kernel's dicts and frames' columns (its variables), as first read."""
    tried: list[Attempt] = field(default_factory=list)
    best: FixResult | None = None
    """The candidate that broke the fewest dependents, offered if none breaks none."""
    flagged: FixResult | None = None
    """A candidate that ran clean by dropping or silencing what failed: offered for what it
    is if nothing better comes, never as a fix."""
    evidence: str = ""
    """What the kernel held when the last error was raised, for the next request."""
    found: Mapping[str, Any] | None = None
    """The kernel's answer that evidence was made from."""
    failing: Failing | None = None
    """What raised in the first place, as the kernel read it (what a candidate must still
    do: `silencing`)."""
    none_cause: bool = False
    """The target is a function of the file the evidence shows returned a None."""
    file: Sequence[str] = ()
    """The lines of the file the code to fix is in."""
    context: list[str] = field(default_factory=list)
    """The file's other lines, as shown to the model (an answer repeating them is none)."""
    in_code: list[str] = field(default_factory=list)
    """The names the document's code uses (Python's only)."""
    bound: int = 1024
    """The bound on an answer holding the whole code to fix."""
    answers: list[str] = field(default_factory=list)
    """Each answer, normalised: two the same in a row end the loop."""
    unchanged: int = 0
    """Answers that were the failing code (or an earlier attempt) again."""
    unusable: list[str] = field(default_factory=list)
    """Why answers held no code that could be used."""
    ran: int = 0
    """Candidates that ran."""
    checked: float = 0.0
    """Seconds the last candidate's check took (0: none ran)."""

    @property
    def focus(self) -> int | None:
        """The line that raised, within the code to fix (0-based), where known."""
        target = self.target
        if target.line is None or not target.first <= target.line <= target.last:
            return None
        return target.line - target.first

    def answered(self, normal: str) -> bool:
        """Record an answer; whether it is the one given just before (the model is stuck)."""
        again = bool(self.answers) and self.answers[-1] == normal
        self.answers.append(normal)
        return again

    def no_code(self, reply: str, why: str) -> None:
        self.tried.append(Attempt(reply, f"{UNUSED} {why})"))
        self.unusable.append(why)

    @property
    def elsewhere(self) -> bool:
        return not self.target.holds(self.first, self.last)

    def seen(self, candidate: str) -> bool:
        """The failing code again, or an earlier attempt again (whitespace aside)."""
        return any(
            _same_code(candidate, c) for c in [self.target.code, *(a.code for a in self.tried)]
        )

    def failed(self, code: str, said: str, current: str) -> None:
        self.tried.append(Attempt(code, said))
        if said != IDENTICAL:
            self.error = current
            self.ran += 1
        self.current = current

    def ended(self, status: str, attempts: int, message: str) -> FixResult:
        return FixResult(status, attempts=attempts, message=message, tried=self.tried)

    def stuck(self, attempts: int) -> FixResult:
        """The model gave the same answer twice in a row: asking again will not help."""
        settled = self.settled(attempts)
        if settled.status != "failed":
            return settled
        return self.ended("failed", attempts, f"{self._said()}; it gave the same answer twice")

    def _said(self) -> str:
        """What came of the answers, in the user's words."""
        raised = _last_line(self.error) or "an error"
        if self.ran:
            return f"no fix ran clean; the last one raised {raised[:200]}"
        if self.unchanged and not self.unusable:
            times = "once" if self.unchanged == 1 else f"{self.unchanged} times"
            return f"the model answered with the code unchanged ({times}), which raises {raised}"
        if self.unusable and not self.unchanged:
            return f"the model's answers held no code to use ({self.unusable[-1]})"
        return (
            "the model answered with the code unchanged or without code "
            f"({self.unusable[-1]}); it raises {raised}"
        )

    def settled(self, attempts: int) -> FixResult:
        """Out of attempts: the least bad candidate for what it is, else why none."""
        for kept, message in (
            (self.best, "no fix kept its dependents passing; the best {label}"),
            (self.flagged, "no fix kept the failing code running; one that {flag}"),
        ):
            if kept is not None:
                kept.attempts = attempts
                kept.message = message.format(label=kept.label, flag=kept.flag)
                return kept
        if self.ran:
            raised = _last_line(self.error) or "an error"
            return self.ended(
                "failed",
                attempts,
                f"no fix ran clean in {attempts} attempts; the last raised {raised[:200]}",
            )
        return self.ended("failed", attempts, f"{self._said()}; nothing was changed")


def _ran_as_module(found: Mapping[str, Any] | None, path: Path) -> bool:
    """Whether the kernel's evidence shows the frames naming the module file `path` ran as
    that module (True where it does not say: another language, no helper)."""
    named = [f for f in frames_of(found) if _same_file(f.file, path)]
    return not named or all(f.module is not False for f in named)


def _same_file(filename: str, path: Path) -> bool:
    try:
        return os.path.realpath(filename) == os.path.realpath(path)
    except (OSError, ValueError):
        return False


def _last_line(error: str) -> str:
    return error.strip().splitlines()[-1] if error.strip() else ""


def _normal(code: str) -> str:
    """Code as compared between answers: its syntax tree where it parses (whitespace and
    comments aside), else its text without spaces."""
    try:
        return ast.dump(ast.parse(without_magics(code)))
    except SyntaxError:
        return "".join(code.split())
