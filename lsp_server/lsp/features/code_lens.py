"""Code lens "▶ Run cell" over each `# %%` marker (line 0 of a file without markers) —
not on a notebook's cells, which have the editor's own run button — and "Generate" (or
"Regenerate") over each prompt (`# ai: …`, `# %% ai: …`): plain text, which every editor
font has (an emoji showed as a box without an emoji font).

The lenses of a document are made once per text and prompt markers
(`prepared.Memo`) and sent as the JSON they already are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from lsp_server.contract import (
    DEBUG_CELL,
    GENERATE,
    RUN,
    RUN_TESTS,
    GenerateArgs,
    Position,
    Range,
    RunArgs,
    TestsArgs,
    to_json,
)
from lsp_server.lsp.prepared import Memo, Prepared
from lsp_server.lsp.server import RunfixServer
from lsp_server.testing import is_test_file, tests_in
from lsp_server.text.cells import split_cells
from lsp_server.text.languages import is_python
from lsp_server.text.prompts import prompt_at, prompt_lines

TITLE = "▶ Run cell"
DEBUG_TITLE = "Debug cell"
TESTS_TITLE, TEST_TITLE = "▶ Run tests", "▶ Run test"
GENERATE_TITLE, REGENERATE_TITLE = "Generate", "Regenerate"


def test_lenses(uri: str, lines: Sequence[str]) -> list[dict[str, Any]]:
    """In a test file: "▶ Run tests" over its first line (the file's tests) and "▶ Run test"
    over each test function or class."""
    at = {"line": 0, "character": 0}
    argument = to_json(TestsArgs(uri))
    command = {"title": TESTS_TITLE, "command": RUN_TESTS, "arguments": [argument]}
    out = [{"range": {"start": at, "end": at}, "command": command}]
    for line, _ in tests_in(lines):
        at = {"line": line, "character": 0}
        argument = to_json(TestsArgs(uri, Position(line, 0)))
        command = {"title": TEST_TITLE, "command": RUN_TESTS, "arguments": [argument]}
        out.append({"range": {"start": at, "end": at}, "command": command})
    return out


def lenses(
    uri: str, lines: Sequence[str], markers: Sequence[str], debug: bool = False, run: bool = True
) -> list[dict[str, Any]]:
    """A lens over the first line of each cell with code, running that cell's code (not
    with `run` False: a notebook's cells have the editor's own); and, for a client that
    debugs (`debug`), one debugging it (the editor's own command)."""
    out = []
    for cell in split_cells(lines, markers):
        if cell.code_first > cell.last and cell.has_marker:
            continue
        at = {"line": cell.first, "character": 0}
        argument = to_json(RunArgs(uri, Range.lines(cell.code_first, cell.last)))
        command = {"title": TITLE, "command": RUN, "arguments": [argument]}
        if run:
            out.append({"range": {"start": at, "end": at}, "command": command})
        if debug:
            where = {"uri": uri, "line": cell.code_first}
            command = {"title": DEBUG_TITLE, "command": DEBUG_CELL, "arguments": [where]}
            out.append({"range": {"start": at, "end": at}, "command": command})
    for line in prompt_lines(lines, markers):
        prompt = prompt_at(lines, line, markers)
        title = REGENERATE_TITLE if prompt is not None and prompt.has_body else GENERATE_TITLE
        at = {"line": line, "character": 0}
        argument = to_json(GenerateArgs(uri, Position(line, 0), False))
        command = {"title": title, "command": GENERATE, "arguments": [argument]}
        out.append({"range": {"start": at, "end": at}, "command": command})
    return out


def register(server: RunfixServer) -> None:
    made: Memo[Prepared] = Memo()

    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: RunfixServer, params: lsp.CodeLensParams) -> Prepared:
        uri = params.text_document.uri
        if uri not in ls.workspace.text_documents:
            return Prepared.of([])  # never opened: nothing to run from here
        lines = ls.workspace.get_text_document(uri).lines
        if is_test_file(Path(ls.editor.path_of(uri))):
            return made.get(uri, (lines, ()), lambda: Prepared.of(test_lenses(uri, lines)))
        markers = ls.flow.display_settings(ls.editor.folder_for(uri)).prompt_markers
        debug = ls.editor.features.debug and is_python(ls.editor.language_of(uri))
        run = uri not in ls.editor.notebooks.open  # (a notebook's cells have a run button)
        return made.get(
            uri,
            (lines, markers, debug, run),
            lambda: Prepared.of(lenses(uri, lines, markers, debug, run)),
        )
