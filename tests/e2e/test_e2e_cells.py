"""Run cells above, run a cell and those below, restart and run to here: what a notebook user
reaches for when a later cell's state comes from earlier ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import RESTART_AND_RUN_TO, RUN_ABOVE, RUN_BELOW, RUN_DEPENDENTS
from tests.conftest import change, command_at, hints, hover_text, open_doc, run

CELLS = """\
# %% a
log = ["a"]
# %% b
log.append("b")
# %% c
log.append("c")
log
"""


async def test_run_above_below_and_restart_and_run_to_here(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "cells.py", CELLS)

    assert (await command_at(initialized, RUN_ABOVE, uri, 5))["status"] == "ok"  # a, b: not c
    assert [h.label for h in await hints(initialized, uri)] == []
    assert (await command_at(initialized, RUN_BELOW, uri, 3))["status"] == "ok"  # b again, then c
    assert [h.label for h in await hints(initialized, uri)] == ["→ ['a', 'b', 'b', 'c']"]

    # A fresh kernel, then a and b: c alone then sees exactly their state.
    assert (await command_at(initialized, RESTART_AND_RUN_TO, uri, 2))["status"] == "ok"
    answer = await run(initialized, uri, 4, 6)
    assert answer["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ ['a', 'b', 'c']"]


async def test_a_cells_command_needs_a_position(initialized: LanguageClient, folder: Path) -> None:
    uri = open_doc(initialized, folder / "cells.py", CELLS)
    with pytest.raises(Exception, match="expected a position"):
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams(RUN_ABOVE, [{"uri": uri}])
        )
    with pytest.raises(Exception, match="past the end"):
        await command_at(initialized, RUN_BELOW, uri, 99)


@pytest.mark.settings({"results": "both"})
@pytest.mark.parametrize("client_name", ["visual_studio_code"])
async def test_results_below_an_edit_are_stale_until_they_run_again(
    initialized: LanguageClient, folder: Path
) -> None:
    text = "# %% a\nrate = 2\n# %% b\nrate * 10\n"
    uri = open_doc(initialized, folder / "stale.py", text)
    assert (await run(initialized, uri))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 20"]

    change(initialized, uri, 2, (1, 7), (1, 8), "3")  # rate = 3: the result below is from before
    await initialized.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [h.label for h in await hints(initialized, uri)] == ["→ 20 (stale)"]
    [info] = [d for d in initialized.diagnostics[uri] if d.message.startswith("→")]
    assert list(info.tags or []) == [lsp.DiagnosticTag.Unnecessary]  # shown faded
    assert "stale: line 2 was edited at" in info.message
    assert "*stale: line 2 was edited at" in await hover_text(initialized, uri, 3)

    assert (await run(initialized, uri, 3, 3))["status"] == "ok"  # b again, on the old state
    assert [h.label for h in await hints(initialized, uri)] == ["→ 20"]
    assert (await command_at(initialized, RUN_ABOVE, uri, 3))["status"] == "ok"  # a ran again
    assert [h.label for h in await hints(initialized, uri)] == ["→ 20 (stale)"]
    assert (await command_at(initialized, RUN_BELOW, uri, 3))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 30"]


FLOW = """\
# %% a
rate = 2
# %% b
rate * 10
# %% c
try:
    count += 1
except NameError:
    count = 1
count
# %% d
print(rate + 1)
"""


@pytest.mark.settings({"results": "both"})
@pytest.mark.parametrize("client_name", ["visual_studio_code"])
async def test_an_edit_marks_only_its_readers_stale_and_run_dependents_runs_exactly_them(
    initialized: LanguageClient, folder: Path
) -> None:
    """Issue 28: b and d read `rate` from a; c reads nothing of a's (it counts its runs)."""
    uri = open_doc(initialized, folder / "flow.py", FLOW)
    assert (await run(initialized, uri))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 20", "→ 1", "→ 3"]

    change(initialized, uri, 2, (1, 7), (1, 8), "3")  # rate = 3
    await initialized.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert [h.label for h in await hints(initialized, uri)] == [
        "→ 20 (stale)",
        "→ 1",  # c does not read what a defines
        "→ 3 (stale)",
    ]
    why = await hover_text(initialized, uri, 3)
    assert "line 2 was edited at" in why and "depends on `rate` from the cell at line 1" in why

    actions = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions or []]
    assert "Run dependents (2 cells)" in titles, titles
    assert (await run(initialized, uri, 1, 1))["status"] == "ok"  # a, edited, runs
    assert (await command_at(initialized, RUN_DEPENDENTS, uri, 1))["status"] == "ok"
    # b and d ran with the new rate; c did not run again (its count would be 2).
    assert [h.label for h in await hints(initialized, uri)] == ["→ 30", "→ 1", "→ 4"]
    assert (await command_at(initialized, RUN_DEPENDENTS, uri, 5))["status"] == "ok"  # none
    assert [h.label for h in await hints(initialized, uri)] == ["→ 30", "→ 1", "→ 4"]
