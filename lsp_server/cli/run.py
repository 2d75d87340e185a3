"""`runfix run FILE [--fix]`: the run-and-fix flow in a terminal.

`HeadlessEditor` is the editor interface for a file on disk: results print
compiler-style (`path:line:col: error|warning|note: message`), fixes are
applied to the text in memory and written back at the end, and flagged
model-written code is never run unasked (there is no one to ask; in the
sandbox the flow needs no question). Nothing here imports LSP.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import tokenize
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from executor.base import ExecutorUnavailable
from executor.events import Stream
from executor.files import replace_file
from executor.jupyter import Kernel
from executor.text import split_lines
from executor.trust import Choice
from lsp_server.capabilities import ClientFeatures
from lsp_server.cli.notebook_file import NotebookFile
from lsp_server.commands import Call, dispatch
from lsp_server.contract import (
    GENERATE,
    RUN,
    RUN_AND_FIX,
    GenerateArgs,
    Position,
    Range,
    RunArgs,
    Status,
)
from lsp_server.editor import (
    Level,
    LineEdit,
    Place,
    Progress,
    Shown,
    Snapshot,
    TrustAnswer,
    TrustQuestion,
    apply_to_lines,
    lines_match,
)
from lsp_server.fix.fixing import MODULE_LIMIT
from lsp_server.flow import Flow
from lsp_server.folder_files import read_regular, rewrite_regular, safe_target
from lsp_server.outputs.results import DocumentResults, Problem, StatementResult
from lsp_server.record.ci_formats import render
from lsp_server.record.store import FILE as RECORD_FILE
from lsp_server.runs import RunMode, Where, pieces_for
from lsp_server.services.runner import HELD
from lsp_server.services.steps import PieceRun
from lsp_server.session import Session
from lsp_server.settings import PROJECT, Settings, read_pyproject, resolve
from lsp_server.text.languages import Language, language_of
from lsp_server.text.prompts import prompt_at, prompt_lines

NOTE_LINES = 20  # output lines shown per statement; the rest is counted
_LEVELS = {Level.ERROR: "error", Level.WARNING: "warning", Level.INFO: "note"}


PROJECT_MARKS = ("pyproject.toml", ".git", ".venv", "venv", str(RECORD_FILE))
"""What makes a folder a project root: a run record counts (an editor opened on a folder
without the others keeps its record there, and `runfix run` of a file below it records
in the same one)."""


def project_folder(start: Path) -> Path:
    """The nearest folder above `start` that looks like a project root, else its own folder."""
    folder = start if start.is_dir() else start.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / m).exists() for m in PROJECT_MARKS):
            return candidate
    return folder


def project_settings(folder: Path, command_line: Mapping[str, Any] | None = None) -> Settings:
    """The project file's settings, then the command line's (`--remote`, …): without an
    editor, the one who runs the command is the user."""
    table, problem = read_pyproject(folder)
    settings = resolve((PROJECT, table), ("command line", command_line or None))
    for message in ([problem] if problem else []) + list(settings.problems):
        print(f"runfix: warning: {message}", file=sys.stderr)
    return settings


def _column(line: str) -> int:
    return len(line) - len(line.lstrip()) + 1


def format_results(
    shown: str,
    lines: Sequence[str],
    results: DocumentResults,
    printed: Mapping[int, str] | None = None,
    place: Callable[[int], str] | None = None,
) -> list[str]:
    """Compiler-style lines: `path:line:col: error|warning|note: message` (`place` names a
    0-based line otherwise: a notebook's `path:cell N:line`); what `printed` says was shown
    already (per statement's last line, 1-based) is not said again."""

    def at(line: int, col: int | None = None) -> str:
        text = lines[line] if 0 <= line < len(lines) else ""
        where = place(line) if place is not None else f"{shown}:{line + 1}"
        return f"{where}:{col if col is not None else _column(text)}"

    items: list[tuple[int, int, list[str]]] = []
    for s in results.statements:
        items.append((s.last, 0, _notes(at(s.last), s, (printed or {}).get(s.last + 1, ""))))
    for p in results.problems:
        col = p.column + 1 if p.column is not None else None
        items.append((p.first, 1, _problem(at(p.first, col), p, at)))
    return [line for _, _, out in sorted(items, key=lambda i: (i[0], i[1])) for line in out]


def _notes(where: str, result: StatementResult, printed: str = "") -> list[str]:
    whole = result.text
    if printed and whole.startswith(printed):
        whole = whole[len(printed) :]
        if not whole.strip() and not result.truncated:
            return []
    text = whole.rstrip("\n").splitlines() or [""]
    for output in result.outputs:  # where a plot or a table went, beside what it is
        if output.file is not None and (shown := output.text.strip()) in text:
            at = text.index(shown)
            text[at] = f"{shown} ({_shown_path(output.file)})"
    out = [f"{where}: note: {line}" for line in text[:NOTE_LINES]]
    if len(text) > NOTE_LINES:
        out.append(f"{where}: note: … {len(text) - NOTE_LINES} more lines")
    if result.truncated:
        out.append(f"{where}: note: … output truncated ({result.truncated:,} characters dropped)")
    return out


def _read_line(prompt: str, password: bool) -> str:
    if password:
        import getpass

        return getpass.getpass(prompt)
    return input(prompt)


def _shown_path(path: Path) -> str:
    """A stored file's path as the person at the terminal would type it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _problem(where: str, p: Problem, at: Any) -> list[str]:
    out = [f"{where}: {p.severity}: {p.message}"]
    for r in p.related:
        place = f"{r.path}:{r.line + 1}:1" if r.path else at(r.line)
        out.append(f"{place}: note: {r.name}")
    return out


class _Quiet:
    def report(self, message: str, percentage: int | None = None) -> None:
        pass


def write_edit(
    path: Path, lines: Sequence[str], edit: LineEdit, file: tuple[int, int] | None
) -> bool:
    """The edit written into the module file read as `file`, if it still holds `lines`:
    never through a link, into a FIFO, or into a file swapped in since (`rewrite_regular`)."""

    def fixed(data: bytes) -> bytes | None:
        try:
            now = split_lines(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        if not lines_match(now, lines):
            return None
        return "".join(apply_to_lines(now, edit.first, edit.last, edit.code)).encode("utf-8")

    return rewrite_regular(path, file, MODULE_LIMIT, fixed)


class HeadlessEditor:
    """One file, in a terminal."""

    def __init__(
        self,
        shown: str,
        path: Path,
        folder: Path,
        lines: list[str],
        out: TextIO | None = None,
        notebook: NotebookFile | None = None,
    ) -> None:
        # At a terminal the code's input() and getpass() ask there; without one they raise
        # (and a note says why).
        self.features = ClientFeatures(input=sys.stdin.isatty())
        self._partial: dict[tuple[str, int], str] = {}
        self._streamed: dict[int, str] = {}
        """What was printed live, per statement's last line (1-based): not printed again."""
        self.shown, self.path, self.folder, self.out = shown, path, folder, out
        self.uri = path.as_uri()
        self.lines = lines
        self.version = 1
        self.changed = False
        self.report = "text"
        """text: each result as it comes; github, sarif, json: all of them at the end."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.notebook = notebook
        """The notebook the document is (its code cells), when it is one."""
        self.ran: list[PieceRun] = []
        """The pieces a plain run ran (what a notebook's cells get as outputs)."""

    def place(self, line: int) -> str:
        """How a 0-based line of the document is named: `path:line`, a notebook's
        `path:cell N:line` (both from 1)."""
        if self.notebook is not None:
            return f"{self.shown}:{self.notebook.place(line, self.lines)}"
        return f"{self.shown}:{line + 1}"

    def _say(self, line: str) -> None:
        print(line, file=self.out or sys.stdout, flush=True)

    def note(self, line: str) -> None:
        """A line about the run, not a result: with a machine format (`--format json`…),
        stdout holds the document alone, so it goes to stderr."""
        if self.report == "text":
            self._say(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _where(self, place: Place) -> str:
        return self.shown if place.line is None else f"{self.place(place.line)}:1"

    def text(self, uri: str) -> Snapshot | None:
        return Snapshot(self.version, tuple(self.lines)) if uri == self.uri else None

    def open_documents(self) -> list[str]:
        return [self.uri]

    def path_of(self, uri: str) -> str:
        return str(self.path)

    def cell_start(self, uri: str) -> tuple[str, int] | None:
        return None  # (no notebook is open as cells here)

    def cell_place(self, uri: str, line: int) -> tuple[str, int] | None:
        return None

    def language_of(self, uri: str) -> Language | None:
        if self.notebook is not None:
            return self.notebook.language
        return language_of(None, str(self.path))

    def folder_for(self, uri: str) -> Path:
        return self.folder

    def live(self, uri: str) -> Callable[[Stream], None] | None:
        """With text output, what the code prints is shown line by line as it comes, on its
        statement's line (a long cell is not silent until it ends)."""
        return self._print_live if self.report == "text" else None

    def _print_live(self, stream: Stream) -> None:
        if stream.span is None:
            return  # not a statement's: said with the results
        line = stream.span.last
        key = (stream.name, line)
        pending = self._partial.pop(key, "") + stream.text
        *complete, rest = pending.split("\n")
        if rest:
            self._partial[key] = rest
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        for done in complete:
            self._say(f"{self.place(line - 1)}:{_column(text)}: note: {done}")
            self._streamed[line] = self._streamed.get(line, "") + done + "\n"

    def show(self, change: Shown) -> None:
        """What the run added is printed (what the document showed before was printed)."""
        added = change.added
        if not self.features.input and any(
            p.message.startswith("StdinNotImplementedError") for p in added.problems
        ):
            self.note(f"{self.shown}: note: input() asks at a terminal; stdin is not one here")
        if self.report != "text":
            return  # said once, in that format, when the run ends
        streamed = {s.last + 1: self._streamed.pop(s.last + 1, "") for s in added.statements}
        self._partial.clear()
        for line in format_results(self.shown, self.lines, added, streamed, self.place):
            self._say(line)

    def runs_done(self) -> None:
        pass

    def tell(self, message: str, level: Level, place: Place | None = None) -> None:
        if place is None:
            print(message, file=sys.stderr, flush=True)
            return
        self.note(f"{self._where(place)}: {_LEVELS[level]}: {message.removeprefix('runfix: ')}")

    def tell_once(self, message: str, level: Level) -> None:
        self.tell(message, level)

    def remark(self, place: Place, message: str) -> None:
        self.note(f"{self._where(place)}: note: {message}")

    def line_name(self, uri: str, line: int) -> str:
        if self.notebook is not None:
            return self.notebook.layout.name(line)
        return f"line {line + 1}"

    async def confirm(self, reason: str, place: Place) -> bool:
        self.note(
            f"{self._where(place)}: warning: {reason.rstrip('.')}; not run headless "
            "(review it, or run it in the editor)"
        )
        return False

    async def choose(self, message: str, choices: Sequence[str]) -> str | None:
        self.note(f"{self.shown}: warning: {message.removeprefix('runfix: ')} (not asked headless)")
        return None

    async def ask_trust(self, question: TrustQuestion) -> TrustAnswer:
        """Never asked: `runfix run` typed in a terminal is the user's decision."""
        return TrustAnswer(Choice.TRUST)

    async def apply(self, uri: str, version: int, edit: LineEdit, label: str) -> bool:
        if uri != self.uri or version != self.version:
            return False
        self.lines = apply_to_lines(self.lines, edit.first, edit.last, edit.code)
        self.version += 1
        self.changed = True
        return True

    async def apply_file(
        self,
        path: Path,
        lines: Sequence[str],
        edit: LineEdit,
        label: str,
        file: tuple[int, int] | None = None,
    ) -> bool:
        """A module file is written at once (as the fixed document is at the end), if it
        still holds what was read and is the file read."""
        try:
            if not await asyncio.to_thread(write_edit, path, lines, edit, file):
                return False
        except OSError as exc:
            self.note(f"{self.shown}: warning: could not write the fix into {path}: {exc}")
            return False
        self.note(f"{path}:{edit.first + 1}:1: note: {label.removeprefix('runfix: ')}")
        return True

    @asynccontextmanager
    async def _progress(self) -> AsyncIterator[Progress]:
        yield _Quiet()

    def progress(self, cancel: asyncio.Event) -> Any:
        return self._progress()

    async def ask_input(self, prompt: str, password: bool, timeout: float) -> str | None:
        """The line typed at the terminal (hidden for `getpass`); None at its end (Ctrl-D)."""
        try:
            return await asyncio.to_thread(_read_line, prompt, password)
        except EOFError:
            return None

    def kernel_state(self, folder: Path, kernel: Kernel) -> None:
        pass

    def spawn(self, work: Coroutine[Any, Any, Any], what: str) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


INTERRUPTED = 130
"""The exit status of a run stopped with Ctrl-C (as a shell's 128 + SIGINT)."""


def terminal_log(verbose: bool) -> None:
    """What runfix logs, in a terminal: its warnings as `runfix: warning: …` lines on stderr
    (a model's stream cut short, a kernel that would not stop); with `verbose`, what the
    model was asked and said too (`ModelClient.said`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("runfix: %(message)s"))
    warnings = logging.StreamHandler(sys.stderr)
    warnings.setFormatter(logging.Formatter("runfix: warning: %(message)s"))
    warnings.setLevel(logging.WARNING)
    for name in ("lsp_server", "executor"):
        logging.getLogger(name).addHandler(warnings)
    if verbose:
        said = logging.getLogger("lsp_server.model")
        handler.addFilter(lambda record: record.levelno < logging.WARNING)  # (`warnings`')
        said.addHandler(handler)
        said.setLevel(logging.DEBUG)  # each answer whole


def command(args: argparse.Namespace) -> int:
    terminal_log(args.verbose)
    try:
        code = run_file(
            args.file,
            args.cell,
            args.timeout,
            args.fix,
            args.format,
            command_line(args),
            args.dependents_of,
            args.above,
            args.generate,
            args.line,
            args.inplace,
        )
    except KeyboardInterrupt:  # the kernel is stopped by then; one line, not a traceback
        code = INTERRUPTED
    if code == INTERRUPTED:
        print("runfix: interrupted", file=sys.stderr)
    return code


@contextmanager
def ctrl_c(cancel: asyncio.Event) -> Iterator[Callable[[], bool]]:
    """While a run goes: Ctrl-C cancels it as an editor's cancel does (the kernel is
    interrupted, what ran is shown and recorded, then runfix exits 130); a second Ctrl-C
    stops runfix at once. Yields whether it was pressed."""
    loop = asyncio.get_running_loop()
    pressed = False

    def press() -> None:
        nonlocal pressed
        pressed = True
        cancel.set()
        loop.remove_signal_handler(signal.SIGINT)  # the next one raises KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, press)
    except (NotImplementedError, RuntimeError):  # no signal handlers here (Windows)
        yield lambda: pressed
        return
    try:
        yield lambda: pressed
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def command_line(args: argparse.Namespace) -> dict[str, Any]:
    """Settings given on the command line (`--remote`…): the user's own, like an editor's."""
    remote = {
        key: value
        for key, value in (
            ("url", args.remote),
            ("tokenEnv", args.token_env),
            ("kernelName", args.kernel_name),
        )
        if value is not None
    }
    return {"executor": "remote", "remote": remote} if args.remote else {}


def run_file(
    path: Path,
    cell: int | None,
    timeout: float | None,
    fix: bool = False,
    report: str = "text",
    command_line: Mapping[str, Any] | None = None,
    dependents_of: int | None = None,
    above: bool = False,
    generate: bool = False,
    line: int | None = None,
    inplace: bool = False,
) -> int:
    """Run the file's cells (or one, with the cells `above` it first; or, `dependents_of` a
    line from 1, the cells up to the one holding it and the cells below that depend on it;
    or, to `generate`, the cells above each empty prompt and then the body the model writes
    for it — only the prompt on `line` with one), printing results; 0 clean, 1 failed, 2
    could not run. A notebook (`.ipynb`) runs as its code cells; `inplace` writes their
    outputs into it."""
    shown = str(path)
    writes = fix or generate or line is not None or inplace
    if writes and (why := safe_target(path)) is not None:  # as `notebook write` refuses
        print(f"runfix: error: {why}: run it by its own name", file=sys.stderr)
        return 2
    path = path.resolve()
    read = _read(path, shown, inplace)
    if isinstance(read, int):
        return read
    source, encoding, lines, notebook = read
    folder = project_folder(path)
    settings = project_settings(folder, command_line)
    if timeout is not None:
        settings = replace(settings, timeout=timeout)
    if above and cell is None:
        print("runfix: error: --above goes with --cell N", file=sys.stderr)
        return 2
    chosen = _chosen_cell(lines, notebook, settings, shown, cell, above)
    if isinstance(chosen, int):
        return chosen
    line_range, cells = chosen
    editor = HeadlessEditor(shown, path, folder, lines, notebook=notebook)
    editor.report = report
    if dependents_of is not None and cell is not None:
        print("runfix: error: --cell and --dependents-of do not go together", file=sys.stderr)
        return 2
    if dependents_of is not None and not 1 <= dependents_of <= len(lines):
        print(f"runfix: error: {shown} has {len(lines)} lines", file=sys.stderr)
        return 2
    at = dependents_of - 1 if dependents_of is not None else None
    prompts = None
    if generate or line is not None:
        found = _prompts(lines, settings, line)
        if isinstance(found, str):
            print(f"runfix: error: {shown}: {found}", file=sys.stderr)
            return 2
        prompts = found
    code = asyncio.run(_run(editor, settings, line_range, fix, at, cells, prompts))
    plain = prompts is None and not fix and report == "text"
    _say_empty_prompts(editor, settings, line_range, plain)
    if code == 1 and cell is not None and cell > 1 and not above:
        first = line_range.start.line if line_range is not None else 0
        above_it = "cell 1 above it" if cell == 2 else f"cells 1–{cell - 1} above it"
        editor.note(
            f"{editor.place(first)}:1: note: {above_it} did not run (a fresh kernel); "
            "--above runs them first"
        )
    if notebook is not None:
        return _write_notebook(editor, notebook, code, inplace, bool(prompts))
    if editor.changed and "".join(editor.lines) != source:  # (code held was taken out again)
        return _write_file(editor, source, encoding, bool(prompts), code) or code
    return code


def _chosen_cell(
    lines: list[str],
    notebook: NotebookFile | None,
    settings: Settings,
    shown: str,
    cell: int | None,
    above: bool,
) -> tuple[Range | None, tuple[tuple[int, int], ...] | None] | int:
    """What `--cell N` (`--above`) runs: the cell's lines, or the lines of each cell up to
    it; else the exit status, said. A notebook's N counts every cell it shows, as its
    results name them (`NB.ipynb:cell 4:…`)."""
    if cell is None:
        return None, None
    if notebook is not None:
        found = notebook.code_cell(cell)
        if isinstance(found, str):
            print(f"runfix: error: --cell {cell}: {found}", file=sys.stderr)
            return 2
        cell = found
    pieces = pieces_for(lines, None, settings.prompt_markers)
    if not 1 <= cell <= len(pieces):
        print(f"runfix: error: {shown} has {len(pieces)} cells with code", file=sys.stderr)
        return 2
    if above:
        return None, tuple((p.first, p.first) for p in pieces[:cell])
    return Range.lines(pieces[cell - 1].first, pieces[cell - 1].last), None


def _write_file(
    editor: HeadlessEditor, source: str, encoding: str, generated: bool, code: int = 0
) -> int:
    """The file written with what was fixed (or `generated`), if it still reads `source`:
    renamed into place (a link put there meanwhile is replaced, never written through); 0
    when written, else the exit status. `code`: the run's, not 0 when an error stayed."""
    path, shown = editor.path, editor.shown
    if not _still_reads(path, source, encoding):  # saved while the model answered
        editor.note(
            f"{shown}: warning: the file changed while runfix ran (saved elsewhere?); the "
            "fixes were not written over it: run again"
        )
        return 1
    try:
        mode = path.stat().st_mode & 0o777
        replace_file(path, "".join(editor.lines).encode(encoding), mode)
    except OSError as exc:
        editor.note(f"{shown}: error: the file was not written: {exc}")
        return 2
    what = "generated code" if generated else "fixes"
    if code:  # each written change ran clean; an error it did not reach stays, said as such
        editor.note(f"{shown}: note: wrote the {what} that ran clean; the error above is not fixed")
    else:
        editor.note(f"{shown}: note: wrote the {what}")
    return 0


def _read(
    path: Path, shown: str, inplace: bool
) -> tuple[str, str, list[str], NotebookFile | None] | int:
    """The file's text, its encoding and lines (a notebook's: its code cells as one
    document, and the notebook), or the exit status saying it cannot be run (2)."""
    if path.suffix == ".ipynb":
        try:
            notebook = NotebookFile.read(path)
        except ValueError as exc:
            print(f"runfix: error: cannot run {shown}: {exc}", file=sys.stderr)
            return 2
        return "", "utf-8", notebook.lines(), notebook
    if inplace:
        print("runfix: error: --inplace writes a notebook's outputs: name one", file=sys.stderr)
        return 2
    try:
        with tokenize.open(path) as f:  # the coding cookie (or BOM) decides, as for Python
            source, encoding = f.read(), f.encoding
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        print(f"runfix: error: cannot read {shown}: {exc}", file=sys.stderr)
        return 2
    return source, encoding, split_lines(source), None


def _write_notebook(
    editor: HeadlessEditor, notebook: NotebookFile, code: int, inplace: bool, generated: bool
) -> int:
    """The notebook written back: its fixed (or generated) cells' code, and with `inplace`
    each code cell's outputs from its latest run; `code` (the run's exit status) unless it
    could not be written."""
    if not editor.changed and not inplace:
        return code
    shown = editor.shown
    sources = notebook.sources(editor.lines) if editor.changed else None
    if editor.changed and sources is None:
        editor.note(f"{shown}: warning: the cells no longer split as the notebook's; not written")
        return 1
    outputs = notebook.outputs(editor.folder, editor.lines, editor.ran) if inplace else None
    try:
        written = notebook.write(sources, outputs)
    except Exception as exc:  # nbformat's ValidationError, an OSError: nothing was written
        editor.note(f"{shown}: error: the notebook was not written: {exc}")
        return 2
    if not written:
        editor.note(
            f"{shown}: warning: the notebook changed while runfix ran (saved elsewhere?); "
            "nothing was written over it: run again"
        )
        return 1
    said = []
    if sources is not None:
        said.append("the generated code" if generated else "the fixes")
    if outputs is not None:
        said.append(f"the outputs of {len(outputs)} cell{'s' if len(outputs) != 1 else ''}")
    editor.note(f"{shown}: note: wrote {' and '.join(said)}")
    return code


def _prompts(lines: Sequence[str], settings: Settings, line: int | None) -> list[str] | str:
    """The prompt lines `--generate` writes the bodies of: each prompt without one, or the
    prompt on `line` (from 1); a message when there is none to write."""
    markers = settings.prompt_markers
    if line is not None:
        prompt = prompt_at(lines, line - 1, markers) if 1 <= line <= len(lines) else None
        if prompt is None:
            return f"line {line} is not a prompt (`# ai: …`)"
        return [lines[line - 1]]
    empty = [lines[i] for i in _empty_prompts(lines, markers)]
    return empty or "no prompt without code under it (`# ai: …`); --line N writes one again"


def _say_empty_prompts(
    editor: HeadlessEditor, settings: Settings, line_range: Range | None, plain: bool
) -> None:
    """A note on each prompt with no code under it in what a `plain` run ran (it skips
    them; --generate and --fix say what they do)."""
    if not plain:
        return
    lines = editor.lines
    start, end = (line_range.start.line, line_range.end.line) if line_range else (0, len(lines))
    for i in _empty_prompts(lines, settings.prompt_markers):
        if start <= i <= end:
            editor.note(
                f"{editor.place(i)}:1: note: a prompt with no code yet; --generate writes it"
            )


def _empty_prompts(lines: Sequence[str], markers: Sequence[str]) -> list[int]:
    """The lines of the prompts with no code under them yet."""
    return [
        i
        for i in prompt_lines(lines, markers)
        if (found := prompt_at(lines, i, markers)) is not None and not found.has_body
    ]


async def _generate(
    flow: Flow, editor: HeadlessEditor, where: Where, prompts: Sequence[str], cancel: asyncio.Event
) -> bool:
    """Each prompt in turn: the cells above it that have not run, then its body written by
    the model and run. Whether every one was written and ran clean."""
    markers = where.settings.prompt_markers
    ran_to = -1
    ok = True
    for text in prompts:
        where = flow.now(where)
        lines = where.text.lines
        at = next((i for i in prompt_lines(lines, markers) if lines[i] == text and i > ran_to), -1)
        if at < 0:
            continue
        mode = RunMode(after=ran_to, before=at, say_stop=False)
        ran = await dispatch(flow, RUN, Call(RunArgs(where.uri), cancel, where, mode))
        if ran.status == Status.CANCELLED:
            return False
        asked = GenerateArgs(where.uri, Position(at), run=True)
        answer = await dispatch(flow, GENERATE, Call(asked, cancel, flow.now(where)))
        if answer.status == Status.CANCELLED:
            return False
        written = answer.range
        said = answer.run.message if answer.run is not None else None
        if written is not None and said is not None and said.startswith(HELD):
            # held in the jail: a terminal cannot ask, so the file keeps no code of it
            now = flow.now(where)
            undo = LineEdit(written.start.line, written.end.line, "")
            await editor.apply(where.uri, now.text.version, undo, "runfix: held")
            editor.remark(Place(where.uri, at), f"{said} Nothing was written under the prompt.")
            ok = False
            ran_to = at
            continue
        ok = ok and written is not None and (answer.run is None or answer.run.status == Status.OK)
        if written is not None:
            count = written.end.line - written.start.line
            said = f"wrote {count} line{'s' if count != 1 else ''} under the prompt"
            editor.remark(Place(where.uri, at), said)
        found = prompt_at(flow.now(where).text.lines, at, markers)
        ran_to = found.body_last if found is not None and found.has_body else at
    return ok


def _still_reads(path: Path, source: str, encoding: str) -> bool:
    """Whether the file still says what runfix read from it at the start (read as it was
    then: its encoding, newlines translated), read as the fix flow reads a module file: a
    regular file only, never waiting on a FIFO swapped in meanwhile."""
    try:
        now = read_regular(path).decode(encoding)
    except (OSError, UnicodeDecodeError, LookupError):
        return False
    return now.replace("\r\n", "\n").replace("\r", "\n") == source


async def _run(
    editor: HeadlessEditor,
    settings: Settings,
    line_range: Range | None,
    fix: bool,
    dependents_of: int | None = None,
    cells: tuple[tuple[int, int], ...] | None = None,
    prompts: list[str] | None = None,
) -> int:
    """`cells`: only the cells starting at these lines' spans (--cell N --above); `prompts`:
    the text of the prompt lines to write the bodies of (--generate)."""

    async def read_settings(folder: Path) -> Settings:
        return settings

    # A person who typed `runfix run` has decided: this session trusts the folder.
    session = Session(read_settings, editor.kernel_state, decided=Choice.TRUST)
    flow = Flow(session, editor)
    try:
        where = await flow.where(editor.uri)
        try:
            if where.language is None:
                raise ExecutorUnavailable(f"runfix does not know the language of {editor.shown}")
            kernel = await flow.open_kernel(where)  # (the session trusts the folder)
            if kernel is not None:
                await kernel.start()
        except ExecutorUnavailable as exc:
            editor.note(f"{editor.shown}:1:1: error: {exc}")
            return 2
        cancel = asyncio.Event()
        with ctrl_c(cancel) as pressed:
            if prompts is not None:
                ok = await _generate(flow, editor, where, prompts, cancel)
            elif dependents_of is not None:
                ran = await flow.run_dependents(where, dependents_of, cancel, with_above=True)
                ok = ran.status == Status.OK
            elif fix:
                call = Call(RunArgs(where.uri, line_range), cancel, where, ran=editor.ran)
                fixed = await dispatch(flow, RUN_AND_FIX, call)
                ok = fixed.status in (Status.OK, Status.FIXED)
            else:
                mode = RunMode(within=cells)
                call = Call(RunArgs(where.uri, line_range), cancel, where, mode, editor.ran)
                ran = await dispatch(flow, RUN, call)
                ok = ran.status == Status.OK
        return INTERRUPTED if pressed() else 0 if ok else 1
    finally:
        if editor.report != "text":
            found = flow.results(editor.uri)
            editor._say(render(editor.report, editor.shown, editor.lines, found, editor.folder))
        await flow.close()
