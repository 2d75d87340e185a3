"""Fixes: offline ones read from an error, and the model's, proven by running them.

`Fixer` is the loop: ask the model for a candidate, scan it, run it, and keep
going with each failure in the next request, up to `fix.maxAttempts`. It knows
nothing of LSP: the server and `runfix run --fix` hand it the ways to ask, to
run, to confirm and to report.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from executor.events import RunOutcome, RunStatus, Variable
from executor.safety import Finding, scan
from lsp_server.cells import is_marker
from lsp_server.fixcheck import Check, deletion_style
from lsp_server.model.client import ModelCancelled, ModelError
from lsp_server.model.context import Attempt, ReplyError, error_text, extract_code, fix_messages

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
    marker and `from __future__` imports."""
    header = 0
    for i, line in enumerate(lines):
        text = line.strip()
        if (i == 0 and is_marker(line)) or (text.startswith("#") and not is_marker(line)):
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


# -- the model's fixes --------------------------------------------------------------------


@dataclass
class FixResult:
    status: str
    """fixed | failed | cancelled"""
    code: str | None = None
    """The candidate that ran clean."""
    outcome: RunOutcome | None = None
    """The run of that candidate."""
    attempts: int = 0
    message: str = ""
    tried: list[Attempt] = field(default_factory=list)
    check: Check | None = None
    """How the candidate fared against the cells that depend on it (None: not checked)."""
    flag: str | None = None
    """How it makes the error go away by removing what failed (`deletion_style`), if so."""

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


Ask = Callable[[list[dict[str, str]], str], Awaitable[str]]
Run = Callable[[str], Awaitable[RunOutcome]]
Confirm = Callable[[str, list[Finding]], Awaitable[bool]]
Verify = Callable[[str], Awaitable[Check | None]]


@dataclass
class Fixer:
    """One failing piece of code at lines first..last of a document, and how to fix it."""

    ask: Ask
    """(messages, what-for) → the reply's text; raises ModelError or ModelCancelled."""
    run: Run
    """Runs a candidate where the piece stands; never raises for what the code did."""
    variables: Callable[[], Awaitable[list[Variable]]]
    confirm: Confirm
    """Asked before a flagged candidate runs; False: it does not run."""
    report: Callable[[str], None]
    max_attempts: int
    budget: int
    verify: Verify | None = None
    """Checks a candidate that ran clean against the cells that depend on it (`fixcheck`);
    one that breaks a passing cell goes back to the model with what it broke."""

    async def fix(
        self, lines: Sequence[str], first: int, last: int, code: str, error: str
    ) -> FixResult:
        """`error`: what the piece raised, traceback included (see `context.error_text`)."""
        current = error
        tried: list[Attempt] = []
        best: FixResult | None = None
        """The candidate that broke the fewest dependents, offered if none breaks none."""
        for number in range(1, self.max_attempts + 1):
            headline = current.strip().splitlines()[-1] if current.strip() else "error"
            self.report(f"attempt {number}/{self.max_attempts}: {headline[:80]}")
            variables = await self.variables()
            messages = fix_messages(
                code, current, lines, (first, last), variables, tried, self.budget
            )
            try:
                reply = await self.ask(messages, f"attempt {number}/{self.max_attempts}")
            except ModelCancelled:
                return FixResult("cancelled", attempts=number, message="cancelled", tried=tried)
            except ModelError as exc:
                return FixResult("failed", attempts=number, message=str(exc), tried=tried)
            try:
                candidate = extract_code(reply)
            except ReplyError as exc:
                tried.append(Attempt(reply[:2000], f"(not used: {exc})"))
                current = error_text(str(exc), "")
                continue
            findings = scan(candidate, first + 1)
            if findings and not await self.confirm(candidate, findings):
                return FixResult(
                    "failed",
                    attempts=number,
                    message="the model's candidate was flagged and not confirmed, so it did "
                    f"not run ({findings[0].message})",
                    tried=tried,
                )
            outcome = await self.run(candidate)
            if outcome.status == RunStatus.OK:
                checked = await self.verify(candidate) if self.verify is not None else None
                if checked is not None and checked.status == "cancelled":
                    return FixResult("cancelled", attempts=number, message="cancelled", tried=tried)
                flag = deletion_style(code, candidate)
                result = FixResult("fixed", candidate, outcome, number, tried=tried)
                result.check, result.flag = checked, flag
                if checked is None or not checked.regressions:
                    return result
                if best is None or len(checked.regressions) < len(best.check.regressions):  # type: ignore[union-attr]
                    best = result
                current = checked.for_model()
                tried.append(Attempt(candidate, current))
                continue
            if outcome.status == RunStatus.CANCELLED:
                return FixResult("cancelled", attempts=number, message="cancelled", tried=tried)
            failed = outcome.error
            current = (
                error_text(failed.message, failed.text) if failed else outcome.note or "failed"
            )
            tried.append(Attempt(candidate, current))
        if best is not None:  # every candidate that ran clean broke a dependent: the least bad
            best.attempts = self.max_attempts
            best.message = f"no fix kept its dependents passing; the best {best.label}"
            return best
        last_error = current.strip().splitlines()[-1] if current.strip() else "error"
        return FixResult(
            "failed",
            attempts=self.max_attempts,
            message=f"no fix ran clean in {self.max_attempts} attempts; the last raised "
            f"{last_error[:200]}",
            tried=tried,
        )
