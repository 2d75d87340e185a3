"""Notebooks as runfix documents (issue 49, 1): a client that syncs notebooks
(`notebookDocument/*`, as VS Code does) gets each cell's results on that cell's URI at the
cell's own lines; the dataflow, runs and fixes work across cells; a structural change
keeps every result on its cell."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import OUTPUTS, RUN_AND_FIX, RUN_DEPENDENTS
from tests.conftest import (
    API_KEY_ENV,
    command_at,
    errors,
    hints,
    init_params,
    notebook_change,
    run,
    run_args,
)
from tests.support.model_server import ModelServer, code

CODE, MARKDOWN = lsp.NotebookCellKind.Code, lsp.NotebookCellKind.Markup


def cell_uri(path: Path, index: int) -> str:
    """A cell's URI as VS Code makes them."""
    return f"vscode-notebook-cell:{path}#W{index}sZmlsZQ%3D%3D"


def open_notebook(
    client: LanguageClient, path: Path, cells: Sequence[str | tuple[str, str]]
) -> tuple[str, list[str]]:
    """Open a notebook of `cells` (code, or ("markdown", text)); its URI and its cells'."""
    notebook: dict[str, Any] = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook))
    uri = path.as_uri()
    c: Any = client
    items, documents = [], []
    for index, cell in enumerate(cells):
        kind, text = (CODE, cell) if isinstance(cell, str) else (MARKDOWN, cell[1])
        document = cell_uri(path, index)
        language = "python" if kind == CODE else "markdown"
        items.append(lsp.NotebookCell(kind, document))
        documents.append(lsp.TextDocumentItem(document, language, 1, text))
        c.texts[document], c.versions[document], c.cell_of[document] = text, 1, uri
    c.notebook_versions[uri] = 1
    client.notebook_document_did_open(
        lsp.DidOpenNotebookDocumentParams(
            lsp.NotebookDocument(uri, "jupyter-notebook", 1, items), documents
        )
    )
    return uri, [d.uri for d in documents]


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


@pytest.fixture
async def notebook_client(client: LanguageClient, folder: Path, model: ModelServer) -> Any:
    """`client` initialized as VS Code, saying it syncs notebooks; its model is `model`."""
    settings = {"model": {"baseUrl": model.url, "name": "test-model", "apiKeyEnv": API_KEY_ENV}}
    params = init_params(folder, "visual_studio_code", {"results": "both", **settings})
    sync = lsp.NotebookDocumentSyncClientCapabilities(execution_summary_support=True)
    params.capabilities.notebook_document = lsp.NotebookDocumentClientCapabilities(sync)
    result = await client.initialize_session(params)
    assert result.capabilities.notebook_document_sync is not None  # the server takes notebooks
    return client


def _on(client: LanguageClient, uri: str) -> list[tuple[int, str]]:
    return sorted((d.range.start.line, d.message) for d in client.diagnostics.get(uri, []))


async def test_a_notebook_runs_and_each_cell_shows_its_own_results(
    notebook_client: LanguageClient, folder: Path
) -> None:
    path = folder / "analysis.ipynb"
    uri, cells = open_notebook(
        notebook_client,
        path,
        [
            "prices = [3, 4, 5]\nunits = {'kg': 1, 'lb': 2}",
            ("markdown", "# The total"),
            "total = sum(prices)\ntotal",
            "def mean(xs):\n    return sum(xs) / count\n",
            "print('start')\nmean(prices)",
        ],
    )
    answer = await run(notebook_client, uri)
    assert answer["status"] == "error"

    # each result on its own cell, at the cell's own line
    assert [h.label for h in await hints(notebook_client, cells[2])] == ["→ 12"]
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[4])] == [
        (0, "→ start")
    ]
    # the error on the line that raised, in the cell whose function raised it; the call
    # from the last cell as related information, on that cell
    [error] = errors(notebook_client, cells[3])
    assert error.range.start.line == 1 and "NameError" in error.message
    related = [(r.location.uri, r.location.range.start.line) for r in error.related_information]
    assert (cells[4], 1) in related
    assert errors(notebook_client, cells[4]) == []
    assert errors(notebook_client, cells[0]) == [] and cells[1] not in notebook_client.diagnostics

    # a cell's command names the cell: run just that one
    assert (await run(notebook_client, cells[2], 0, 1))["status"] == "ok"
    assert [h.label for h in await hints(notebook_client, cells[2])] == ["→ 12"]

    # completion in a cell: what the kernel's objects hold, each edit on the cell's own line
    typed = lsp.TextDocumentContentChangePartial(
        lsp.Range(lsp.Position(1, 5), lsp.Position(1, 5)), '\nunits["'
    )
    edit = lsp.NotebookDocumentCellContentChanges(
        lsp.VersionedTextDocumentIdentifier(2, cells[2]), [typed]
    )
    notebook_change(notebook_client, uri, lsp.NotebookDocumentCellChanges(text_content=[edit]))
    completed = await notebook_client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(cells[2]), lsp.Position(2, 7))
    )
    items = completed.items if isinstance(completed, lsp.CompletionList) else completed or []
    assert sorted(i.label for i in items) == ["kg", "lb"]
    assert isinstance(items[0].text_edit, lsp.TextEdit)
    assert items[0].text_edit.range == lsp.Range(lsp.Position(2, 7), lsp.Position(2, 7))


async def test_a_structural_change_keeps_every_result_on_its_cell(
    notebook_client: LanguageClient, folder: Path
) -> None:
    path = folder / "moves.ipynb"
    uri, cells = open_notebook(
        notebook_client, path, ["a = 1\na", "b = a + 1\nb", "c = b * 10\nc\nundefined_name"]
    )
    await run(notebook_client, uri)
    before = {cell: _on(notebook_client, cell) for cell in cells}
    labels = {cell: [h.label for h in await hints(notebook_client, cell)] for cell in cells}
    assert labels == {cells[0]: ["→ 1"], cells[1]: ["→ 2"], cells[2]: ["→ 20"]}

    # a markdown cell between two code cells: not code, so nothing changes
    c: Any = notebook_client
    note = cell_uri(path, 10)
    markdown = lsp.TextDocumentItem(note, "markdown", 1, "# Notes\nmore\n")
    insert = lsp.NotebookCellArrayChange(1, 0, [lsp.NotebookCell(MARKDOWN, note)])
    structure = lsp.NotebookDocumentCellChangeStructure(insert, did_open=[markdown])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    assert {cell: [h.label for h in await hints(notebook_client, cell)] for cell in cells} == labels
    assert {cell: _on(notebook_client, cell) for cell in cells} == before

    # a code cell inserted at the top, then deleted: every result stays on its cell (stale
    # once the code above it is deleted, as in a file)
    new = cell_uri(path, 9)
    c.texts[new], c.versions[new], c.cell_of[new] = "x = 0\n\n", 1, uri
    opened = lsp.TextDocumentItem(new, "python", 1, "x = 0\n\n")
    insert = lsp.NotebookCellArrayChange(0, 0, [lsp.NotebookCell(CODE, new)])
    structure = lsp.NotebookDocumentCellChangeStructure(insert, did_open=[opened])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    await notebook_client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    [hint] = await hints(notebook_client, cells[2])
    assert hint.label.startswith("→ 20") and hint.position.line == 1
    delete = lsp.NotebookCellArrayChange(0, 1, [])
    structure = lsp.NotebookDocumentCellChangeStructure(
        delete, did_close=[lsp.TextDocumentIdentifier(new)]
    )
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    now = {cell: [h.label for h in await hints(notebook_client, cell)] for cell in cells}
    assert now == {cell: [f"{label} (stale)" for label in labels[cell]] for cell in cells}
    lines = {cell: [line for line, _ in _on(notebook_client, cell)] for cell in cells}
    assert lines == {cell: [line for line, _ in before[cell]] for cell in cells}

    # Run the first cell (a = 1 again), then its dependents, asked on the cell: the
    # cells that read `a` run again, fresh
    assert (await run(notebook_client, cells[0], 0, 1))["status"] == "ok"
    answer = await command_at(notebook_client, RUN_DEPENDENTS, cells[0], 0)
    assert answer["status"] == "error"  # the last cell's undefined_name
    now = {cell: [h.label for h in await hints(notebook_client, cell)] for cell in cells}
    assert now == labels

    # an edit in the first cell: the results below it are stale; Run dependents again
    cell_version = c.versions[cells[0]] + 1
    c.versions[cells[0]] = cell_version
    edit = lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(0, 4), lsp.Position(0, 5)), text="5"
    )
    identifier = lsp.VersionedTextDocumentIdentifier(cell_version, cells[0])
    content = lsp.NotebookDocumentCellContentChanges(identifier, [edit])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(text_content=[content]))
    await notebook_client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [h.label for h in await hints(notebook_client, cells[1])] == ["→ 2 (stale)"]
    assert (await run(notebook_client, cells[0], 0, 1))["status"] == "ok"
    await command_at(notebook_client, RUN_DEPENDENTS, cells[0], 0)
    assert [h.label for h in await hints(notebook_client, cells[2])] == ["→ 60"]


async def test_closing_a_notebook_clears_its_cells(
    notebook_client: LanguageClient, folder: Path
) -> None:
    uri, cells = open_notebook(notebook_client, folder / "gone.ipynb", ["undefined_name"])
    await run(notebook_client, uri)
    assert errors(notebook_client, cells[0])
    notebook_client.notebook_document_did_close(
        lsp.DidCloseNotebookDocumentParams(
            lsp.NotebookDocumentIdentifier(uri), [lsp.TextDocumentIdentifier(cells[0])]
        )
    )
    await notebook_client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert list(notebook_client.diagnostics.get(cells[0], [None])) == []


async def test_run_and_fix_fixes_the_cell_whose_function_raised_and_runs_the_caller(
    notebook_client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    _, cells = open_notebook(
        notebook_client,
        folder / "fix.ipynb",
        ["def mean(xs):\n    return sum(xs) / count", "print(mean([2, 4]))"],
    )
    model.script(code("def mean(xs):\n    return sum(xs) / len(xs)"))
    arg = run_args(cells[1], 0, 0)
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(RUN_AND_FIX, arg)
    )
    assert answer["status"] == "fixed", answer
    c: Any = notebook_client
    assert c.texts[cells[0]] == "def mean(xs):\n    return sum(xs) / len(xs)"  # the cell edited
    assert c.texts[cells[1]] == "print(mean([2, 4]))"  # the caller unchanged
    [edit] = c.edits
    assert [uri for uri in (edit.edit.changes or {})] + [
        d.text_document.uri for d in edit.edit.document_changes or []
    ] == [cells[0]]  # one edit, of the cell: never of the notebook's file
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[1])] == [
        (0, "→ 3.0")
    ]
    assert errors(notebook_client, cells[0]) == []


async def test_an_agents_run_of_a_cell_lands_on_that_cell(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """An agent (`runfix mcp`'s `run_cell`, the cell by its number) runs a cell of the
    notebook open in the editor: in its kernel, its result on the cell."""
    import nbformat
    from nbformat import v4

    from tests.support.agent_client import agent, tool

    path = folder / "shared.ipynb"
    _, cells = open_notebook(notebook_client, path, [("markdown", "# Shared"), "x = 20", "x + 1"])
    book = v4.new_notebook()
    book.cells = [
        v4.new_markdown_cell("# Shared"),
        v4.new_code_cell("x = 20"),
        v4.new_code_cell("x + 1"),
    ]
    nbformat.write(book, path)
    c: Any = notebook_client
    c.answer = "Allow for this session"
    async with agent("nb-agent") as session:
        first = await tool(session, "run_cell", path=str(path), cell=2)
        second = await tool(session, "run_cell", path=str(path), cell=3)
    assert first["status"] == "ok" and second["status"] == "ok", (first, second)
    assert second["output"].strip() == "21"
    assert [h.label for h in await hints(notebook_client, cells[2])] == ["→ 21"]


async def test_a_cell_inserted_above_while_a_run_is_in_flight_moves_its_result_with_it(
    notebook_client: LanguageClient, folder: Path
) -> None:
    path = folder / "slow.ipynb"
    uri, cells = open_notebook(notebook_client, path, ["import time", "time.sleep(1.0)\n6 * 7"])
    await run(notebook_client, cells[0], 0, 0)
    running = asyncio.ensure_future(run(notebook_client, cells[1], 0, 1))
    await asyncio.sleep(0.3)
    c: Any = notebook_client
    new = cell_uri(path, 7)
    c.texts[new], c.versions[new], c.cell_of[new] = "a = 1\nb = 2", 1, uri
    opened = lsp.TextDocumentItem(new, "python", 1, "a = 1\nb = 2")
    insert = lsp.NotebookCellArrayChange(1, 0, [lsp.NotebookCell(CODE, new)])
    structure = lsp.NotebookDocumentCellChangeStructure(insert, did_open=[opened])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    assert (await running)["status"] == "ok"
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[1])] == [
        (1, "→ 42")
    ]
    assert await hints(notebook_client, new) == []


async def test_a_notebook_of_ten_thousand_cells_opens_and_edits(
    notebook_client: LanguageClient, folder: Path
) -> None:
    many = [f"x{i} = {i}" for i in range(10_000)]
    uri, cells = open_notebook(notebook_client, folder / "big.ipynb", many)
    c: Any = notebook_client
    cell = cells[-1]
    c.versions[cell] += 1
    edit = lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), text="y = 1\n"
    )
    identifier = lsp.VersionedTextDocumentIdentifier(c.versions[cell], cell)
    content = lsp.NotebookDocumentCellContentChanges(identifier, [edit])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(text_content=[content]))
    answer = await run(notebook_client, cell, 0, 1)
    assert answer["status"] == "ok"
    assert [h.label for h in await hints(notebook_client, cell)] == []  # assignments only
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.run", run_args(cell, 0, 0))
    )
    assert answer["status"] == "ok"


async def test_twenty_structural_edits_keep_every_result_on_its_cell(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """Cells inserted (code and markdown), deleted and moved (as VS Code sends a move: the
    span between the two places, in its new order), twenty times: every result and error
    stays on its cell at the cell's own line, the same as a fresh run of the notebook says."""
    import random

    path = folder / "edits.ipynb"
    codes = [f"v{i} = {i} * 10\nv{i}" for i in range(6)] + ["print('last')\nundefined_name"]
    uri, originals = open_notebook(notebook_client, path, codes)
    await run(notebook_client, uri)
    c: Any = notebook_client

    async def seen() -> dict[str, tuple[list[str], list[tuple[int, str]]]]:
        out = {}
        for cell in originals:
            labels = [h.label.removesuffix(" (stale)") for h in await hints(notebook_client, cell)]
            out[cell] = (
                labels,
                [(ln, m) for ln, m in _on(notebook_client, cell) if not m.startswith("→")],
            )
        return out

    expected = await seen()
    assert expected[originals[3]][0] == ["→ 30"] and expected[originals[6]][1]
    order: list[tuple[str, Any]] = [(cell, CODE) for cell in originals]
    rng = random.Random(49)
    made = 0

    def send(structure: lsp.NotebookDocumentCellChangeStructure) -> None:
        notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))

    for step in range(20):
        kind = ("insert-code", "insert-markdown", "delete", "move")[step % 4]
        if kind.startswith("insert"):
            made += 1
            new = cell_uri(path, 100 + made)
            code = kind == "insert-code"
            text = f"unrun_{made} = {made}" if code else f"# note {made}"
            c.texts[new], c.versions[new], c.cell_of[new] = text, 1, uri
            item = lsp.TextDocumentItem(new, "python" if code else "markdown", 1, text)
            at = rng.randrange(len(order) + 1)
            cell_kind = CODE if code else MARKDOWN
            change = lsp.NotebookCellArrayChange(at, 0, [lsp.NotebookCell(cell_kind, new)])
            send(lsp.NotebookDocumentCellChangeStructure(change, did_open=[item]))
            order.insert(at, (new, cell_kind))
        elif kind == "delete":
            added = [i for i, (cell, _) in enumerate(order) if cell not in originals]
            at = rng.choice(added)
            gone = order.pop(at)[0]
            change = lsp.NotebookCellArrayChange(at, 1, [])
            send(
                lsp.NotebookDocumentCellChangeStructure(
                    change, did_close=[lsp.TextDocumentIdentifier(gone)]
                )
            )
        else:
            src = rng.choice([i for i, (cell, _) in enumerate(order) if cell in originals])
            dst = rng.randrange(len(order))
            first, last = min(src, dst), max(src, dst)
            span = order[first : last + 1]
            moving = order[src]
            span.remove(moving)
            span.insert(dst - first, moving)
            cells_now = [lsp.NotebookCell(k, cell) for cell, k in span]
            change = lsp.NotebookCellArrayChange(first, last - first + 1, cells_now)
            send(lsp.NotebookDocumentCellChangeStructure(change))
            order[first : last + 1] = span
    await asyncio.sleep(0.5)
    assert await seen() == expected

    # a fresh run of the notebook as it stands now says the same on every cell
    await run(notebook_client, uri)
    assert await seen() == expected


async def test_a_cell_moved_while_its_run_is_in_flight_keeps_its_result(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """The running cell moved above another while the kernel works (as VS Code sends a move:
    the span in its new order): its result lands on it, where it stands now; the cell it
    passed shows nothing of it."""
    path = folder / "moving.ipynb"
    uri, cells = open_notebook(
        notebook_client, path, ["import time", "other = 1\nother", "time.sleep(1.0)\n6 * 7"]
    )
    await run(notebook_client, cells[0], 0, 0)
    await run(notebook_client, cells[1], 0, 1)
    running = asyncio.ensure_future(run(notebook_client, cells[2], 0, 1))
    await asyncio.sleep(0.3)
    c: Any = notebook_client
    moved = [lsp.NotebookCell(CODE, cells[2]), lsp.NotebookCell(CODE, cells[1])]
    structure = lsp.NotebookDocumentCellChangeStructure(lsp.NotebookCellArrayChange(1, 2, moved))
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    assert (await running)["status"] == "ok"
    await asyncio.sleep(0.3)
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[2])] == [
        (1, "→ 42")
    ]
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[1])] == [
        (1, "→ 1")
    ]


async def test_new_outputs_are_told_of_each_cell_and_printed_text_is_told_from_values(
    client: LanguageClient, folder: Path
) -> None:
    """`runfix/outputs` (what VS Code's notebook kernel hears to show a run it did not start:
    an agent's, Run and Fix's) names each cell that got results, its rich lines at the
    cell's own lines; the outputs of a cell say what was printed and what was a value."""
    params = init_params(folder, "visual_studio_code")
    sync = lsp.NotebookDocumentSyncClientCapabilities()
    params.capabilities.notebook_document = lsp.NotebookDocumentClientCapabilities(sync)
    params.capabilities.experimental = {"runfixOutputs": True}
    await client.initialize_session(params)
    plot = "import matplotlib.pyplot as plt\nx = 1\nplt.plot([1, 3, 2])"
    uri, cells = open_notebook(client, folder / "told.ipynb", ["print('hi')\n6 * 7", "y = 2", plot])
    assert (await run(client, uri))["status"] == "ok"
    for _ in range(200):
        if len(client.outputs_changed) >= 2:
            break
        await asyncio.sleep(0.05)
    told = sorted(client.outputs_changed, key=lambda t: cells.index(t["uri"]))
    assert told == [{"uri": cells[0], "rich": []}, {"uri": cells[2], "rich": [2]}]
    shown = await command_at(client, OUTPUTS, cells[0], -1)
    assert [(o["text"], o.get("printed", False)) for o in shown["outputs"]] == [
        ("hi\n", True),
        ("42\n", False),
    ]


def _edit_cell(c: Any, notebook: str, cell: str, at: tuple[int, int, int, int], text: str) -> None:
    """A cell's text edited (lines and columns: start, end), as VS Code sends it."""
    c.versions[cell] += 1
    start, end = lsp.Position(at[0], at[1]), lsp.Position(at[2], at[3])
    edit = lsp.TextDocumentContentChangePartial(range=lsp.Range(start, end), text=text)
    identifier = lsp.VersionedTextDocumentIdentifier(c.versions[cell], cell)
    content = lsp.NotebookDocumentCellContentChanges(identifier, [edit])
    notebook_change(c, notebook, lsp.NotebookDocumentCellChanges(text_content=[content]))


async def test_a_split_and_a_join_keep_the_results_of_the_lines_they_take_along(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """VS Code sends a split as the cut of a cell's lines, then a new cell of them; a join as
    the lines added to a cell, then the cell they came from deleted: the results of those
    lines go with them both ways (marked stale: code above them changed), and lines typed
    again are not taken for them."""

    async def shown(cell: str) -> list[tuple[int, str]]:
        found = await hints(notebook_client, cell)
        return [(h.position.line, h.label.removesuffix(" (stale)")) for h in found]

    path = folder / "split.ipynb"
    uri, cells = open_notebook(notebook_client, path, ["total = 6 * 7\ntotal", "other = 1\nother"])
    await run(notebook_client, uri)
    c: Any = notebook_client
    # split at the second line
    _edit_cell(c, uri, cells[0], (1, 0, 1, 5), "")
    new = cell_uri(path, 9)
    c.texts[new], c.versions[new], c.cell_of[new] = "total", 1, uri
    opened = lsp.TextDocumentItem(new, "python", 1, "total")
    insert = lsp.NotebookCellArrayChange(1, 0, [lsp.NotebookCell(CODE, new)])
    structure = lsp.NotebookDocumentCellChangeStructure(insert, did_open=[opened])
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    await asyncio.sleep(0.3)
    assert await shown(new) == [(0, "→ 42")]
    assert await shown(cells[1]) == [(1, "→ 1")]
    # join them again
    _edit_cell(c, uri, cells[0], (1, 0, 1, 0), "total")
    delete = lsp.NotebookCellArrayChange(1, 1, [])
    closed = [lsp.TextDocumentIdentifier(new)]
    structure = lsp.NotebookDocumentCellChangeStructure(delete, did_close=closed)
    notebook_change(c, uri, lsp.NotebookDocumentCellChanges(structure=structure))
    await asyncio.sleep(0.3)
    assert await shown(cells[0]) == [(1, "→ 42")]
    # the line deleted by hand and typed again elsewhere: not the line that ran
    _edit_cell(c, uri, cells[1], (1, 0, 1, 5), "")
    _edit_cell(c, uri, cells[1], (1, 0, 1, 0), "oth")
    await asyncio.sleep(0.3)
    assert await hints(notebook_client, cells[1]) == []


async def test_generate_in_a_one_line_prompt_cell_writes_the_body_into_that_cell(
    notebook_client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """A notebook user's prompt is a cell of one line (issue 61, 1): the body goes under
    it in the same cell, between cells and in the last one, and is run there."""
    _, cells = open_notebook(
        notebook_client,
        folder / "gen.ipynb",
        ["units = [3, 4]", "# ai: the total of units", "print('after')", "# ai: twice the total"],
    )
    c: Any = notebook_client
    await run(notebook_client, cells[0])
    model.script(code("total = sum(units)\nprint(total)"))
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            "runfix.generate",
            [{"uri": cells[1], "position": {"line": 0, "character": 0}, "run": True}],
        )
    )
    assert answer["status"] == "ok", answer
    assert c.texts[cells[1]] == "# ai: the total of units\ntotal = sum(units)\nprint(total)"
    assert c.texts[cells[2]] == "print('after')"  # the next cell untouched
    model.script(code("print(2 * total)"))
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            "runfix.generate",
            [{"uri": cells[3], "position": {"line": 0, "character": 0}, "run": True}],
        )
    )
    assert answer["status"] == "ok", answer
    assert c.texts[cells[3]] == "# ai: twice the total\nprint(2 * total)"
    assert errors(notebook_client, cells[3]) == []
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[3])] == [
        (1, "→ 14")
    ]


async def _actions(
    client: LanguageClient, cell: str, line: int, only: list[str] | None = None
) -> list[lsp.CodeAction]:
    here = lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
    shown = [d for d in client.diagnostics.get(cell, []) if d.range.start.line == line]
    params = lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(cell), here, lsp.CodeActionContext(shown, only=only)
    )
    found = await client.text_document_code_action_async(params) or []
    return [a for a in found if isinstance(a, lsp.CodeAction)]


async def test_the_preferred_fix_of_a_name_a_cell_above_defines_runs_that_cell_no_model(
    notebook_client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """Issue 61, 2: the NameError whose cause is a cell above that had not run is fixed by
    its preferred quick fix offline — the model is never asked (it took ~50 s and failed)."""
    _, cells = open_notebook(notebook_client, folder / "above.ipynb", ["total = 3", "total * 2"])
    await run(notebook_client, cells[1], 0, 0)  # the cell alone, in a fresh kernel
    assert [m for _, m in _on(notebook_client, cells[1])] == [
        "NameError: name 'total' is not defined"
    ]
    [preferred] = [
        a for a in await _actions(notebook_client, cells[1], 0, ["quickfix"]) if a.is_preferred
    ]
    assert preferred.title == "Fix: run the cells above that define `total` (no model)"
    assert preferred.command is not None
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(preferred.command.command, preferred.command.arguments)
    )
    assert answer["status"] == "fixed", answer
    assert model.requests == []
    assert errors(notebook_client, cells[1]) == []
    assert [(h.position.line, h.label) for h in await hints(notebook_client, cells[1])] == [
        (0, "→ 6")
    ]


async def test_run_and_fix_on_the_error_line_of_a_defining_cell_fixes_it(
    notebook_client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """Issue 61, 2: the error shows on the line of the cell that defines the function;
    Run and fix asked there runs the cell whose run raised (the defining cell alone raises
    nothing), and the fix goes into the defining cell."""
    _, cells = open_notebook(
        notebook_client,
        folder / "where.ipynb",
        ["def mean(xs):\n    return sum(xs) / count", "print(mean([2, 4]))"],
    )
    await run(notebook_client, cells[0])
    await run(notebook_client, cells[1])
    assert [m for _, m in _on(notebook_client, cells[0])] == [
        "NameError: name 'count' is not defined"
    ]
    actions = await _actions(notebook_client, cells[0], 1, ["runfix.run.fix"])
    [fix] = [a for a in actions if a.command and a.command.command == RUN_AND_FIX]
    assert fix.title == "Run and fix the cell whose run raised this"
    model.script(code("def mean(xs):\n    return sum(xs) / len(xs)"))
    answer = await notebook_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(RUN_AND_FIX, fix.command.arguments if fix.command else [])
    )
    assert answer["status"] == "fixed", answer
    c: Any = notebook_client
    assert c.texts[cells[0]] == "def mean(xs):\n    return sum(xs) / len(xs)"
    assert errors(notebook_client, cells[0]) == []
    # a notebook's places are its cells and their lines, in the log too (issue 61, 4)
    logged = "\n".join(m.message for m in notebook_client.log_messages)
    assert (
        "where.ipynb, cell 1, line 1: fixed on attempt 1 (in `def mean(xs):` at cell 1, "
        "line 1, where the error was raised; cell 2, line 1 ran again clean"
    ) in logged, logged


async def test_a_notebooks_cells_get_no_run_lens_beside_the_editors_run_button(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """Issue 61, 8: VS Code shows its own run button on each cell; a "▶ Run cell" lens
    beside it said the same twice. A prompt's lens stays, in plain text."""
    _, cells = open_notebook(notebook_client, folder / "lens.ipynb", ["x = 1", "# ai: a chart"])
    titles = []
    for cell in cells:
        found = await notebook_client.text_document_code_lens_async(
            lsp.CodeLensParams(lsp.TextDocumentIdentifier(cell))
        )
        titles += [(cell, lens.command.title) for lens in found or [] if lens.command]
    assert (cells[1], "Generate") in titles, titles
    assert not [t for _, t in titles if t.startswith("▶")], titles


async def test_a_cells_outputs_name_what_jupyter_saves_in_it_the_kernels_own_bundles(
    notebook_client: LanguageClient, folder: Path
) -> None:
    """Issue 61, 3: what VS Code writes into a cell (and so into the .ipynb) is what
    Jupyter would save: pandas' text/html of a 6-row DataFrame with its text/plain (not
    runfix's 5-row markdown summary), the execution count, the last value only."""
    frame = "import pandas as pd\ndf = pd.DataFrame({'units': range(6)})\nlen(df)\ndf"
    _, cells = open_notebook(notebook_client, folder / "saved.ipynb", [frame])
    await run(notebook_client, cells[0], 0, 3)
    shown = await command_at(notebook_client, OUTPUTS, cells[0], -1)
    cell = Path(shown["cell"])
    assert cell.parent == Path(shown["outputsDir"])
    kept = json.loads(cell.read_text())
    [value] = kept["outputs"]
    assert value["output_type"] == "execute_result" and kept["execution_count"] == 1
    assert value["execution_count"] == 1
    assert '<table border="1" class="dataframe">' in value["data"]["text/html"]
    assert value["data"]["text/plain"].splitlines()[-1].split() == ["5", "5"]  # the sixth row
