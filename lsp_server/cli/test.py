"""`runfix test [PATH…] [-k EXPR] [--fix]`: the project's tests, run by pytest beside the
folder's kernel (its interpreter; in the sandbox, its container), each failure printed on
the line of the test that failed, with pytest's own detail of the values it compared and
the line of the project's module that raised. With `--fix`, each failure's module function
is fixed by the model (`fix.tests_fix`): written only once the failing tests pass and every
test that passed still does; a test file is never changed. Exit 0 when every test passed
(after the fixes), 1 when one failed or hung, 2 when no test could run (no pytest, no
tests, a broken conftest), 130 on Ctrl-C."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from executor.base import ExecutorUnavailable
from executor.testing import TestResult, TestRun
from executor.trust import Choice
from lsp_server.cli.run import (
    INTERRUPTED,
    HeadlessEditor,
    command_line,
    ctrl_c,
    project_folder,
    project_settings,
    terminal_log,
    write_edit,
)
from lsp_server.editor import LineEdit
from lsp_server.fix.fixing import Target
from lsp_server.flow import Flow
from lsp_server.session import Session
from lsp_server.settings import Settings
from lsp_server.testing import failures, render, summary, text_lines


def command(args: argparse.Namespace) -> int:
    terminal_log(args.verbose)
    # A test's node id (`tests/test_stats.py::test_mean`) names its file, then the test.
    named = [str(p).partition("::") for p in args.paths]
    paths = [Path(file).resolve() for file, _, _ in named]
    missing = [file for file, _, _ in named if not Path(file).exists()]
    if missing:
        print(f"runfix: error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    folder = project_folder(paths[0] if paths else Path.cwd())
    outside = [str(p) for p in paths if not p.is_relative_to(folder)]
    if outside:
        print(f"runfix: error: not in the project {folder}: {', '.join(outside)}", file=sys.stderr)
        return 2
    settings = project_settings(folder, command_line(args))
    timeout = args.timeout if args.timeout is not None else settings.timeout
    pytest_args = [
        (p.relative_to(folder).as_posix() or ".") + sep + test
        for p, (_, sep, test) in zip(paths, named, strict=True)
    ]
    if args.k:
        pytest_args += ["-k", args.k]
    try:
        return asyncio.run(_test(folder, settings, pytest_args, timeout, args.format, args.fix))
    except KeyboardInterrupt:
        print("runfix: interrupted", file=sys.stderr)
        return INTERRUPTED


async def _test(
    folder: Path, settings: Settings, args: list[str], timeout: float, kind: str, fix: bool
) -> int:
    async def read_settings(_: Path) -> Settings:
        return settings

    # A person who typed `runfix test` has decided: this session trusts the folder.
    session = Session(read_settings, lambda *_: None, decided=Choice.TRUST)
    flow = Flow(session, HeadlessEditor(str(folder), folder / "<tests>", folder, []))
    began = time.monotonic()

    def said(result: TestResult) -> None:
        if kind == "text" and result.failed:
            for failure in failures(TestRun(results=[result])):
                for line in text_lines(failure, folder):
                    print(line, flush=True)

    try:
        cancel = asyncio.Event()
        with ctrl_c(cancel) as pressed:
            run = await flow.test_folder(folder, settings, args, cancel, timeout, said)
            if fix and run.failed and run.problem() is None and not pressed():
                # what the fixes came to: with the text, else (a report on stdout) on stderr
                selected = bool(args) and args != ["."]
                say = _printer(kind == "text")
                fixes = flow.fix_folder_tests
                if await fixes(folder, settings, run, selected, cancel, timeout, _write, say):
                    run = await flow.test_folder(folder, settings, args, cancel, timeout, _quiet)
                    for failure in failures(run) if kind == "text" else ():
                        for line in text_lines(failure, folder):
                            print(line, flush=True)
    except ExecutorUnavailable as exc:
        print(f"runfix: error: cannot run the tests: {exc}", file=sys.stderr)
        return 2
    finally:
        await flow.close()
    seconds = time.monotonic() - began
    if kind != "text":
        print(render(kind, run, folder, seconds))
    if pressed():
        print(f"runfix: interrupted: {summary(run, seconds)}", file=sys.stderr)
        return INTERRUPTED
    if (problem := run.problem()) is not None:
        print(f"runfix: error: {problem}", file=sys.stderr)
        return 2
    if kind == "text":
        print(f"runfix: {summary(run, seconds)}")
    return 1 if run.failed else 0


def _quiet(result: TestResult) -> None:
    """The run after the fixes: its failures are printed once it ends."""


async def _write(target: Target, code: str, label: str) -> bool:
    """A fix written into its module file (the file read, if it still holds what was read)."""
    assert target.path is not None
    edit = LineEdit(target.first, target.last, code)
    return await asyncio.to_thread(write_edit, target.path, target.lines, edit, target.file)


def _printer(text: bool) -> Callable[[str, bool], None]:
    def say(line: str, progress: bool) -> None:
        print(line, file=sys.stdout if text and not progress else sys.stderr, flush=True)

    return say
