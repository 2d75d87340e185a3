"""What a run produced, as small immutable values.

The executor turns kernel messages into these, already attributed to the
top-level statement that produced them (`Span`), so that nothing above this
layer needs to know about Jupyter messages. Lines are 1-based document lines,
as Python reports them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Span:
    """The document lines (1-based, inclusive) of one top-level statement."""

    first: int
    last: int


@dataclass(frozen=True)
class Stream:
    """Text the code printed to stdout or stderr."""

    name: str
    text: str
    span: Span | None


@dataclass(frozen=True)
class Value:
    """The value of an expression statement, as a MIME bundle."""

    data: Mapping[str, str]
    span: Span | None
    about: Mapping[str, Any] | None = None
    """Its type and shape (and a table's columns and first rows), from the kernel side."""


@dataclass(frozen=True)
class Display:
    """Something the code displayed (`display()`, a plot), as a MIME bundle."""

    data: Mapping[str, str]
    span: Span | None


@dataclass(frozen=True)
class Frame:
    """One traceback frame: the file (or cell filename), its line and function."""

    filename: str
    line: int
    name: str
    repeats: int = 0
    """How many more times this frame repeated right after itself (deep recursion)."""
    ran_as: tuple[int, int] | None = field(default=None, compare=False)
    """The execution count of the run that compiled this line, and the line from that run's
    first (IPython's `Cell In[n], line l`); None: not code a run sent."""
    call: str = field(default="", compare=False)
    """The function as IPython's traceback names it: `f(x)` (names, never values); "" for a
    module's code."""
    context: tuple[str, ...] = field(default=(), compare=False)
    """Its lines up to its own (a few), as they were when it ran."""


@dataclass(frozen=True)
class Error:
    """An exception the code raised, with frames innermost last.

    `column`/`end_line`/`end_column` are set for `SyntaxError` only (1-based
    columns in characters, as Python reports them).
    """

    ename: str
    evalue: str
    frames: tuple[Frame, ...]
    text: str
    span: Span | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None

    @property
    def message(self) -> str:
        return f"{self.ename}: {self.evalue}" if self.evalue else self.ename


Event = Stream | Value | Display | Error


@dataclass(frozen=True)
class Refusal:
    """What runfix's guard stopped model-written code doing (`executor/_kernel_guard.py`):
    its kind (write, process, network, native, unpickle, tamper, environment), what it was
    (a path, a program, an address), why, the pattern "allow always" keeps, and all that in
    a sentence (the guard's own words)."""

    kind: str
    what: str
    why: str
    pattern: str
    sentence: str

    @classmethod
    def of(cls, said: Mapping[str, Any]) -> Refusal:
        """One the guard said (`_kernel_guard.Refusal.said`)."""
        kind, what, why, pattern = (str(said.get(k)) for k in ("kind", "what", "why", "pattern"))
        return cls(kind, what, why, pattern, str(said.get("sentence") or f"{kind} ({what}): {why}"))


@dataclass(frozen=True)
class Guard:
    """The runtime guard a run of model-written code runs under (the kernel's audit hook):
    `allow` are the patterns allowed during this run (the user's "allow once", and
    "always"), `keep` those that hold afterwards wherever the functions it defined run
    ("always")."""

    allow: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()

    def said(self) -> dict[str, list[str]]:
        return {"allow": list(self.allow), "keep": list(self.keep)}


@dataclass(frozen=True)
class Jail:
    """Run model-written code first in a confined fork of the kernel (`_kernel_jail`): its
    output is the run's, the kernel's own state is left as it was. `before`: pieces that
    run first in the same fork ((code, filename, first_line): a fix's candidate before the
    cell that is its test), the request's code after them."""

    budget: float
    before: tuple[tuple[str, str, int], ...] = ()
    secrets: tuple[str, ...] = ()
    """Names the evidence of its error hides besides the usual ones (`secretNames`)."""
    through: bool = False
    """The pieces `before` run on past their errors, as cells run one after another (the
    fix check's dependents); else the first that fails ends the run, with its error."""

    @classmethod
    def within(cls, timeout: float, **more: Any) -> Jail:
        """A jail for a run of `timeout` seconds: its child is killed before the run's own
        timeout interrupts the kernel."""
        return cls(max(1.0, timeout - 2.0), **more)


@dataclass(frozen=True)
class Jailed:
    """How a run in the jail went: `how` — ran, stopped (the jail ended it for a call it
    forbids), timeout, crashed, interrupted, cut (its report did not come back),
    unavailable (`why`: no jail here); what it `tried` that the jail refused; `pieces`
    that ran of those asked; the fork's whole cost in milliseconds."""

    how: str
    tried: tuple[Refusal, ...] = ()
    why: str = ""
    pieces: int = 0
    ms: float = 0.0

    @property
    def available(self) -> bool:
        return self.how != "unavailable"

    @property
    def clean(self) -> bool:
        """It ran and tried nothing the jail refuses."""
        return self.how == "ran" and not self.tried

    def said(self) -> str:
        """What it tried, in a sentence (empty when nothing)."""
        return "; ".join(dict.fromkeys(t.sentence for t in self.tried))

    @classmethod
    def of(cls, said: Mapping[str, Any]) -> Jailed:
        """What the kernel side said (`_kernel_jail._tell`)."""
        tried = said.get("tried")
        return cls(
            how=str(said.get("how") or "cut"),
            tried=tuple(Refusal.of(t) for t in tried if isinstance(t, dict))
            if isinstance(tried, list)
            else (),
            why=str(said.get("why") or ""),
            pieces=int(said.get("pieces") or 0),
            ms=float(said.get("ms") or 0.0),
        )


class RunStatus(enum.Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    DIED = "died"


@dataclass(frozen=True)
class RunRequest:
    """One piece of code to run.

    `filename` is what tracebacks name (the document's path), `first_line` the
    document line the code starts on, so that every line number the kernel
    reports is already a document line.
    """

    code: str
    filename: str
    first_line: int = 1
    timeout: float = 120.0
    output_limit: int = 100_000
    guard: Guard | None = None
    """Model-written code: the runtime guard it runs under (None: the user's own code)."""
    jail: Jail | None = None
    """Model-written code, run in the jail (a confined fork of the kernel) instead."""


@dataclass(frozen=True)
class Usage:
    """A run's figures, measured in the kernel process (children not counted)."""

    cpu: float
    """Kernel CPU seconds (all its threads)."""
    rss_before: int | None = None
    rss_after: int | None = None
    """Resident memory in bytes before and after the run."""
    peak: int | None = None
    """The peak resident memory during the run (None where it cannot be reset per run)."""

    @property
    def change(self) -> int | None:
        if self.rss_before is None or self.rss_after is None:
            return None
        return self.rss_after - self.rss_before

    @property
    def growth(self) -> int | None:
        """How far above its start the run's memory went."""
        if self.peak is None or self.rss_before is None:
            return None
        return self.peak - self.rss_before


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended and what it produced, in order, with its figures."""

    status: RunStatus
    events: tuple[Event, ...]
    duration: float
    truncated: int = 0
    """Characters of output that were dropped at the cap."""
    state_lost: bool = False
    """The kernel was restarted during this run; earlier variables are gone."""
    note: str = ""
    """Why the run ended abnormally (timeout, death), for the user."""
    span: Span | None = None
    """The statement that was running when the run ended abnormally."""
    usage: Usage | None = None
    """CPU time and memory of the run, where the kernel could say."""
    refused: tuple[Refusal, ...] = ()
    """What the runtime guard stopped the model's code doing in this run."""
    execution_count: int | None = None
    """The kernel's count of this run (`In[n]`), where its reply said it."""
    jailed: Jailed | None = None
    """A run in the jail: how it went and what it tried (None: it ran in the kernel)."""

    @property
    def error(self) -> Error | None:
        return next((e for e in self.events if isinstance(e, Error)), None)


@dataclass(frozen=True)
class Variable:
    """A summary of one name in the kernel's namespace."""

    name: str
    type: str
    summary: str = ""
    shape: tuple[int, ...] | None = None
    length: int | None = None
    columns: Mapping[str, str] = field(default_factory=dict)
