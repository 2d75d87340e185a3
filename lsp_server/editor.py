"""The editor as the services see it: a narrow interface with two implementations.

`lsp.editor.LspEditor` speaks LSP to a client; `cli.run.HeadlessEditor` is
`runfix run` in a terminal. The core calls only what is here: read a document, show
results (handed over whole: the editor never reads the core back), tell the user, ask to
confirm, apply an edit, report progress, ask for a line of input.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from executor.events import Stream
from executor.jupyter import Kernel
from executor.trust import Choice
from lsp_server.capabilities import ClientFeatures
from lsp_server.outputs.results import DocumentResults
from lsp_server.text.languages import Language


class Level(enum.IntEnum):
    ERROR = 1
    WARNING = 2
    INFO = 3


@dataclass(frozen=True)
class Snapshot:
    """A document's text as it stood at one version: what a run runs."""

    version: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class LineEdit:
    """Replace lines first..last (0-based, inclusive) with `code`; last < first inserts
    before `first`."""

    first: int
    last: int
    code: str


@dataclass(frozen=True)
class Place:
    """A line of a document a remark is about."""

    uri: str
    line: int | None = None


@dataclass(frozen=True)
class TrustQuestion:
    """Whether, and how, an undecided folder's code may run: asked at its first run."""

    folder: Path
    python: str
    """What would start: the interpreter (it comes with the folder, or is named by it), or
    for another language its kernelspec's command."""
    source: str
    """Where that choice came from (`the folder's .venv/`)."""
    sandbox: bool
    """Whether the sandbox (the Docker executor) can run here."""
    own: str | None = None
    """runfix's own interpreter, where choosing it starts another one than `python` (None:
    the same one would start, or the folder's code is not Python's)."""

    def said(self) -> str:
        """The question as it is put: what each answer starts."""
        own = (
            f" Or runfix's own Python ({self.own}): not the folder's interpreter, though its "
            "modules beside your code still import."
            if self.own
            else ""
        )
        return (
            f"runfix: run code from {self.folder}? Its kernel would start {self.python} "
            f"({self.source}).{own} What a folder ships (its interpreter, .pth files, modules "
            "beside your code) runs with your rights: trust it only if you trust where it "
            "came from."
        )


@dataclass(frozen=True)
class TrustAnswer:
    choice: Choice | None
    """None: nothing runs."""
    why: str = ""
    """Why nothing runs (said on the line): `Don't run`, no answer, the editor cannot ask."""


@dataclass(frozen=True)
class Shown:
    """What a document shows now, handed to the editor by the results desk (the editor never
    reads the core back for it)."""

    uri: str
    results: DocumentResults
    """All of the document's results now (an editor that draws the document's state)."""
    added: DocumentResults
    """What this change brought (a terminal that prints results as they come)."""
    setting: str | None
    """The folder's `results` setting (where results go: diagnostics, inlay hints, both)."""


class Progress(Protocol):
    def report(self, message: str, percentage: int | None = None) -> None: ...


class Editor(Protocol):
    """What the flow asks of an editor: its documents, questions, edits, results, progress."""

    features: ClientFeatures

    def text(self, uri: str) -> Snapshot | None:
        """The document as it is now; None once it is closed."""
        ...

    def open_documents(self) -> list[str]:
        """The URIs of the documents open now."""
        ...

    def path_of(self, uri: str) -> str:
        """What tracebacks call the document: its path, or its URI when it has no file."""
        ...

    def folder_for(self, uri: str) -> Path:
        """The workspace folder the document's code runs in."""
        ...

    def cell_start(self, uri: str) -> tuple[str, int] | None:
        """A notebook cell's notebook (its URI) and the line (0-based) of its notebook's
        document its first line is on; None where `uri` is no open notebook's cell."""
        ...

    def cell_place(self, uri: str, line: int) -> tuple[str, int] | None:
        """The notebook document `uri`'s `line` (0-based) as its cell's URI and its line
        there; None where `uri` is no open notebook, or the line is on no code cell."""
        ...

    def language_of(self, uri: str) -> Language | None:
        """The document's language (its `languageId`, else its extension; None: one runfix
        does not know)."""
        ...

    def show(self, change: Shown) -> None:
        """The document's results changed: show them (an editor draws `results`, a terminal
        prints `added`)."""
        ...

    def live(self, uri: str) -> Callable[[Stream], None] | None:
        """Where what a run prints goes as it comes (None: only with the run's results)."""
        ...

    def runs_done(self) -> None:
        """A run ended: a client that draws results lazily may redraw them."""
        ...

    def tell(self, message: str, level: Level, place: Place | None = None) -> None:
        """Show the user a message; with a place, it is about that line."""
        ...

    def tell_once(self, message: str, level: Level) -> None:
        """Like `tell`, but a message already shown in this session only goes to the log."""
        ...

    def remark(self, place: Place, message: str) -> None:
        """A note about a place that is worth a line in a terminal, not a popup."""
        ...

    def line_name(self, uri: str, line: int) -> str:
        """How messages name the document's 0-based `line`: "line 17", or in a notebook
        "cell 4, line 2" (a notebook has cells and lines within them)."""
        ...

    async def confirm(self, reason: str, place: Place) -> bool:
        """Whether flagged model-written code may run in the local kernel (no answer = no)."""
        ...

    async def choose(self, message: str, choices: Sequence[str]) -> str | None:
        """One of `choices`, asked with `message` (None: no answer, which is no)."""
        ...

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        """How the undecided folder's code may run (no answer: it does not)."""
        ...

    async def apply(self, uri: str, version: int, edit: LineEdit, label: str) -> bool:
        """Apply one edit to the document as it was at `version` (one undo step)."""
        ...

    async def apply_file(
        self,
        path: Path,
        lines: Sequence[str],
        edit: LineEdit,
        label: str,
        file: tuple[int, int] | None = None,
    ) -> bool:
        """Apply one edit to another file of the folder (a module a fix goes into), if it
        still holds `lines` (as read when the fix began) and, where runfix writes it
        itself, is still the file read then (`file`: its device and inode); open in the
        editor or not."""
        ...

    def progress(self, cancel: asyncio.Event) -> AbstractAsyncContextManager[Progress]:
        """Progress for a long piece of work; cancelling it (where the editor can) sets
        `cancel`."""
        ...

    async def ask_input(self, prompt: str, password: bool, timeout: float) -> str | None:
        """A line the user types for the code's `input()` (None: they declined, or gave no
        answer within `timeout` seconds)."""
        ...

    def kernel_state(self, folder: Path, kernel: Kernel) -> None:
        """The folder's kernel changed state (for status bars)."""
        ...

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> None:
        """Run in the background, keeping a reference and logging a failure."""
        ...


def lines_match(a: Sequence[str], b: Sequence[str]) -> bool:
    """The same lines, whatever their line endings."""
    return len(a) == len(b) and all(
        x.rstrip("\r\n") == y.rstrip("\r\n") for x, y in zip(a, b, strict=True)
    )


def apply_to_lines(lines: Sequence[str], first: int, last: int, code: str) -> list[str]:
    """The lines after replacing lines first..last with `code` (as `edits.replace_lines` does)."""
    new = [line + "\n" for line in code.rstrip("\n").split("\n")] if code.strip() else []
    out = list(lines[:first]) + new + list(lines[last + 1 :] if last >= first else lines[first:])
    if out and lines and not lines[-1].endswith("\n") and out[-1].endswith("\n"):
        out[-1] = out[-1][:-1]
    return out


KERNEL_RESTARTED = "runfix: kernel restarted; its state was cleared."
"""What the user is told once a kernel restarted on their command."""

SHOWN_TEXT = 80
"""Characters of streamed text shown in progress."""
STREAM_REPORTS = 0.1
"""Seconds between progress reports of streamed text."""


def streamed(progress: Progress, prefix: str) -> Callable[[str], None]:
    """Show the model's text as it streams in: the tail of its last line, now and then."""
    last = 0.0

    def on_text(text: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < STREAM_REPORTS:
            return
        last = now
        tail = text.rstrip().rsplit("\n", 1)[-1][-SHOWN_TEXT:]
        progress.report(f"{prefix}: {tail}" if tail else prefix)

    return on_text
