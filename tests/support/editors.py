"""The fake editor the core's unit tests drive the face with: one document held in memory,
what the core asked of it recorded, its edits applied at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from executor.trust import Choice
from lsp_server.capabilities import ClientFeatures
from lsp_server.editor import (
    Level,
    LineEdit,
    Place,
    Shown,
    Snapshot,
    TrustAnswer,
    TrustQuestion,
    apply_to_lines,
)
from lsp_server.outputs.results import DocumentResults
from lsp_server.text.languages import PYTHON, Language

URI = "file:///ws/doc.py"


class FakeEditor:
    """One document (`uri` in `folder`); every question answered by `answer`; each edit of
    the document applied, a module file's only where `apply_files`."""

    def __init__(
        self,
        text: str | Sequence[str],
        *,
        answer: bool = False,
        folder: Path = Path("/ws"),
        uri: str = URI,
        name: str = "doc.py",
        apply_files: bool = True,
    ) -> None:
        self.features = ClientFeatures()
        self.lines = text.splitlines(True) if isinstance(text, str) else list(text)
        self.version = 1
        self.answer, self.folder, self.uri, self.name = answer, folder, uri, name
        self.apply_files = apply_files
        self.told: list[tuple[str, Level]] = []
        self.remarks: list[str] = []
        self.asked: list[str] = []
        self.applied: list[LineEdit] = []
        self.published_results: list[DocumentResults] = []
        self.tasks: set[asyncio.Task[Any]] = set()

    def text(self, uri: str) -> Snapshot | None:
        return Snapshot(self.version, tuple(self.lines)) if uri == self.uri else None

    def open_documents(self) -> list[str]:
        return [self.uri]

    def live(self, uri: str) -> None:
        return None

    def path_of(self, uri: str) -> str:
        return str(self.folder / self.name)

    def cell_start(self, uri: str) -> tuple[str, int] | None:
        return None

    def cell_place(self, uri: str, line: int) -> tuple[str, int] | None:
        return None

    def language_of(self, uri: str) -> Language | None:
        return PYTHON

    def folder_for(self, uri: str) -> Path:
        return self.folder

    def show(self, change: Shown) -> None:
        self.published_results.append(change.added)

    def runs_done(self) -> None:
        pass

    def tell(self, message: str, level: Level, place: Place | None = None) -> None:
        self.told.append((message, level))

    def tell_once(self, message: str, level: Level) -> None:
        self.tell(message, level)

    def remark(self, place: Place, message: str) -> None:
        self.remarks.append(message)

    def line_name(self, uri: str, line: int) -> str:
        return f"line {line + 1}"

    async def confirm(self, reason: str, place: Place) -> bool:
        self.asked.append(reason)
        return self.answer

    async def choose(self, message: str, choices: Sequence[str]) -> str | None:
        self.asked.append(message)
        return choices[0] if self.answer else None

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        self.asked.append(f"trust {question.folder}")
        return TrustAnswer(Choice.TRUST if self.answer else None, "you chose Don't run")

    async def apply(self, uri: str, version: int, edit: LineEdit, label: str) -> bool:
        self.applied.append(edit)
        self.lines = apply_to_lines(self.lines, edit.first, edit.last, edit.code)
        self.version += 1
        return True

    async def apply_file(
        self,
        path: Path,
        lines: Sequence[str],
        edit: LineEdit,
        label: str,
        file: tuple[int, int] | None = None,
    ) -> bool:
        if self.apply_files:
            self.applied.append(edit)
        return self.apply_files

    @asynccontextmanager
    async def _progress(self) -> AsyncIterator[Any]:
        yield self

    def progress(self, cancel: asyncio.Event) -> Any:
        return self._progress()

    def report(self, message: str, percentage: int | None = None) -> None:
        self.remarks.append(f"progress: {message}")

    async def ask_input(self, prompt: str, password: bool, timeout: float) -> str | None:
        return None

    def kernel_state(self, folder: Path, kernel: Any) -> None:
        pass

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> None:
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
