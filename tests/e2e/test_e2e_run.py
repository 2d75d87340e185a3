"""End to end: a real `runfix serve` with a real kernel, driven over LSP by pytest-lsp.

The slice's run tests take `executor`: each runs with the local kernel and again
with `executor: "docker"` (a kernel in the sandbox container, on a real engine)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.conftest import (
    CLIENTS,
    change,
    errors,
    hints,
    hover_text,
    infos,
    init_params,
    open_doc,
    run,
)

DOC = """\
# %% setup
import math
prices = {"tea": 3.5, "cake": 4.2}
print("total", sum(prices.values()))

# %% a helper
def price_of(d, item):
    return d[item]

# %% the failing call
math.pi * 6
price_of(prices, "coffee")
"""


@pytest.mark.parametrize("client_name", CLIENTS)
async def test_run_file_puts_error_on_the_raising_line(
    initialized: LanguageClient, folder: Path, client_name: str, executor: str
) -> None:
    uri = open_doc(initialized, folder / "doc.py", DOC)

    answer = await run(initialized, uri)

    assert answer["status"] == "error"
    assert answer["durationMs"] > 0
    [error] = errors(initialized, uri)
    assert error.source == "runfix"
    assert error.message == "KeyError: 'coffee'"
    assert error.range.start == lsp.Position(7, 4)  # `return d[item]`, in an earlier cell
    assert error.range.end == lsp.Position(7, 18)
    [call_site] = error.related_information or []
    assert call_site.location.uri == uri
    assert call_site.location.range.start.line == 11
    if client_name == "neovim@v0.11.0":  # inlay hints supported: results come as hints
        labels = {h.position.line: h.label for h in await hints(initialized, uri)}
        assert labels == {3: "→ total 7.7", 10: "→ 18.8495…"}
        assert infos(initialized, uri) == []
        assert initialized.inlay_refreshes >= 1
    else:  # no inlay hints: results come as Information diagnostics
        messages = {d.range.start.line: d.message for d in infos(initialized, uri)}
        assert messages == {3: "→ total 7.7", 10: "→ 18.8495…"}


async def test_hover_shows_full_output_and_traceback(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "for i in range(3):\n    print('line', i)\n1/0\n"
    uri = open_doc(initialized, folder / "doc.py", text)
    await run(initialized, uri)

    [hint] = await hints(initialized, uri)
    assert hint.position == lsp.Position(1, len("    print('line', i)"))
    assert hint.label == "→ line 0 …"
    assert hint.tooltip is None  # this client resolves tooltips: the output comes on resolve
    resolved = await initialized.inlay_hint_resolve_async(hint)
    assert isinstance(resolved.tooltip, lsp.MarkupContent) and "line 2" in resolved.tooltip.value
    shown = await hover_text(initialized, uri, 0)
    assert "line 0\nline 1\nline 2" in shown
    on_error = await hover_text(initialized, uri, 2)
    assert "ZeroDivisionError: division by zero" in on_error
    assert "Traceback" in on_error
    assert await hover_text(initialized, uri, 5) == ""


@pytest.mark.parametrize(
    ("client_name", "hint_column", "error_column"),
    [("neovim@v0.11.0", 20, 19), ("visual_studio_code", 17, 15)],
    ids=["utf-8 (neovim 0.11 asks for it)", "utf-16"],
)
@pytest.mark.settings({"results": "both"})
async def test_non_ascii_positions_follow_the_position_encoding(
    initialized: LanguageClient, folder: Path, client_name: str, hint_column: int, error_column: int
) -> None:
    text = 's = "héllo 🐍"; s\nbad = "🐍🐍" + )\n'
    uri = open_doc(initialized, folder / "doc.py", text)

    answer = await run(initialized, uri, 0, 0)
    assert answer["status"] == "ok"
    [info] = infos(initialized, uri)
    assert info.message == "→ 'héllo 🐍'"
    assert info.range.end == lsp.Position(0, hint_column)
    if client_name == "neovim@v0.11.0":
        [hint] = await hints(initialized, uri)
        assert hint.position == lsp.Position(0, hint_column)

    answer = await run(initialized, uri, 1, 1)
    assert answer["status"] == "error"
    [error] = errors(initialized, uri)
    assert error.message.startswith("SyntaxError")
    # the `)` after two snakes: code-point column 13, 19 in UTF-8, 15 in UTF-16
    assert error.range.start == lsp.Position(1, error_column)


async def test_range_runs_exactly_its_lines(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "a = 1\nb = 2\nprint('b is', b)\nraise SystemExit('not me')\n"
    uri = open_doc(initialized, folder / "doc.py", text)

    answer = await run(initialized, uri, 1, 2)

    assert answer["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ b is 2"]
    variables = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.variables", arguments=[{"uri": uri}])
    )
    assert {v["name"] for v in variables} == {"b"}


@pytest.mark.settings({"timeout": 1.5})
async def test_timeout_interrupts_and_keeps_state(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "x = 41\nimport time\ntime.sleep(60)\nx + 1\n"
    uri = open_doc(initialized, folder / "doc.py", text)

    answer = await run(initialized, uri)

    assert answer["status"] == "timeout"
    [warning] = initialized.diagnostics[uri]
    assert warning.severity == lsp.DiagnosticSeverity.Warning
    assert warning.range.start.line == 2
    assert "Timed out after 1.5s" in warning.message and "state is kept" in warning.message
    assert (await run(initialized, uri, 3, 3))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 42"]


async def test_killed_kernel_is_restarted(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = (
        "x = 1\n"
        "import os, signal, time\n"
        "print('dying'); time.sleep(0.3); os.kill(os.getpid(), signal.SIGKILL)\n"
        "print('after')\n"
    )
    uri = open_doc(initialized, folder / "doc.py", text)
    await run(initialized, uri, 0, 0)

    answer = await run(initialized, uri, 1, 2)

    assert answer["status"] == "error"
    [error] = errors(initialized, uri)
    assert error.range.start.line == 2
    assert "kernel died" in error.message and "state was lost" in error.message
    assert (await run(initialized, uri, 3, 3))["status"] == "ok"
    labels = {h.position.line: h.label for h in await hints(initialized, uri)}
    assert labels == {2: "→ dying", 3: "→ after"}
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.variables", arguments=[{"uri": uri}])
    )
    assert answer == []  # x went with the old kernel


@pytest.mark.settings({"outputLimit": 1000})
async def test_output_flood_is_capped_and_server_stays_responsive(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "for i in range(2_000_000):\n    print(i)\nprint('x' * 100_000_000)\n"
    uri = open_doc(initialized, folder / "doc.py", text)

    running = asyncio.ensure_future(run(initialized, uri))
    await asyncio.sleep(0.5)
    answered_during_run = []
    while not running.done():
        await hover_text(initialized, uri, 0)
        answered_during_run.append(not running.done())
        await asyncio.sleep(0.1)
    answer = await running

    assert answer["status"] == "ok"
    assert answered_during_run and answered_during_run[0]
    # The head (the loop's first lines) and the tail (what the last statement printed).
    first, last = await hints(initialized, uri)
    assert first.label.startswith("→ 0") and last.label.endswith("(truncated)")
    shown = await hover_text(initialized, uri, 2)
    assert "Output truncated" in shown and "characters of output dropped" in shown
    assert len(shown) < 5000


async def test_cancel_request_interrupts_the_kernel(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "y = 'kept'\nimport time\ntime.sleep(60)\ny\n"
    uri = open_doc(initialized, folder / "doc.py", text)
    await run(initialized, uri, 0, 0)

    params = lsp.ExecuteCommandParams(command="runfix.run", arguments=[{"uri": uri}])
    pending = asyncio.ensure_future(
        initialized.protocol.send_request_async(
            lsp.WORKSPACE_EXECUTE_COMMAND, params, msg_id="run-to-cancel"
        )
    )
    await asyncio.sleep(1.0)
    initialized.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="run-to-cancel"))
    answer = await asyncio.wait_for(pending, 10)

    assert answer["status"] == "cancelled"
    assert (await run(initialized, uri, 3, 3))["status"] == "ok"  # interrupted, not restarted
    assert [h.label for h in await hints(initialized, uri)] == ["→ 'kept'"]


async def test_progress_cancel_interrupts_the_kernel(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    text = "# %%\nimport time\n# %%\ntime.sleep(60)\n"
    uri = open_doc(initialized, folder / "doc.py", text)

    running = asyncio.ensure_future(run(initialized, uri))

    def reported(token: object) -> list[str | None]:
        return [getattr(r, "message", None) for r in initialized.progress_reports[token]]

    for _ in range(100):  # cancel once the second cell (the sleep) is running
        tokens = [t for t in initialized.progress_reports if "Running cell 2/2" in reported(t)]
        if tokens:
            break
        await asyncio.sleep(0.1)
    [token] = tokens
    begin = initialized.progress_reports[token][0]
    assert isinstance(begin, lsp.WorkDoneProgressBegin) and begin.cancellable
    initialized.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    answer = await asyncio.wait_for(running, 10)

    assert answer["status"] == "cancelled"
    assert isinstance(initialized.progress_reports[token][-1], lsp.WorkDoneProgressEnd)


async def test_results_move_with_edits_and_drop_when_edited(
    client: LanguageClient, folder: Path, executor: str
) -> None:
    await client.initialize_session(init_params(folder, "neovim@v0.7.0", {"executor": executor}))
    text = "print('one')\nprint('two')\n{}['missing']\n"
    uri = open_doc(client, folder / "doc.py", text)
    await run(client, uri)
    assert {d.range.start.line for d in client.diagnostics[uri]} == {0, 1, 2}

    change(client, uri, 2, (0, 0), (0, 0), "# header\n\n")  # two lines above everything
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert {d.range.start.line for d in client.diagnostics[uri]} == {2, 3, 4}
    [error] = errors(client, uri)
    assert error.range.start.line == 4

    change(client, uri, 3, (3, 7), (3, 10), "TWO")  # edit the second statement
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert {d.range.start.line: d.message for d in client.diagnostics[uri]} == {
        2: "→ one",
        4: "KeyError: 'missing'",
    }

    change(client, uri, 4, (2, 12), (2, 12), "\n")  # Enter at the end of a statement
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert {d.range.start.line for d in client.diagnostics[uri]} == {2, 5}

    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri))
    )
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert not client.diagnostics[uri]


@pytest.mark.settings({"results": "both", "outputLimit": 200})
async def test_initialization_options_are_honoured(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "doc.py", "print('a' * 1000)\n")
    await run(initialized, uri)

    [info] = infos(initialized, uri)
    [hint] = await hints(initialized, uri)
    assert hint.label == info.message
    assert info.message.endswith("(truncated)")
    assert "801 characters dropped" in await hover_text(initialized, uri, 0)


@pytest.mark.settings({"timeout": "soon", "colour": 1})
async def test_bad_settings_fall_back_with_one_message(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "doc.py", "1 + 1\n")
    answer = await run(initialized, uri)

    assert answer["status"] == "ok"
    texts = [m.message for m in initialized.messages]
    assert any("timeout = 'soon'" in t for t in texts)
    assert any("unknown setting 'colour'" in t for t in texts)


async def test_pyproject_settings_sit_below_client_settings(
    client: LanguageClient, folder: Path
) -> None:
    (folder / "pyproject.toml").write_text("[tool.runfix]\ntimeout = 1\noutputLimit = 150\n")
    await client.initialize_session(init_params(folder, options={"timeout": 30}))
    uri = open_doc(client, folder / "doc.py", "import time\ntime.sleep(2)\nprint('b' * 400)\n")
    answer = await run(client, uri)

    assert answer["status"] == "ok"  # timeout 30 from the client beats 1 from pyproject
    assert "251 characters dropped" in await hover_text(
        client, uri, 2
    )  # outputLimit from pyproject


async def test_an_error_a_cell_made_in_another_cells_function_goes_when_it_runs_again(
    initialized: LanguageClient, folder: Path
) -> None:
    """Issue 39: the old ZeroDivisionError on `return a / b` stayed, unmarked, after its
    caller was fixed and run again, until the function's cell itself ran."""
    source = "# %%\ndef ratio(a, b):\n    return a / b\n\n# %%\nratio(1, 0)\n"
    uri = open_doc(initialized, folder / "ratio.py", source)
    assert (await run(initialized, uri))["status"] == "error"
    [error] = errors(initialized, uri)
    assert error.range.start.line == 2 and "ZeroDivisionError" in error.message
    change(initialized, uri, 2, (5, 9), (5, 10), "2")  # ratio(1, 2)
    assert (await run(initialized, uri, 5, 5))["status"] == "ok"
    assert errors(initialized, uri) == []
    assert any("0.5" in str(h.label) for h in await hints(initialized, uri))


async def test_a_second_document_of_a_folder_is_told_it_shares_the_kernel(
    initialized: LanguageClient, folder: Path
) -> None:
    """Issue 70, 8: one kernel per folder was never said; a notebook's `def` replaced a
    file's function of the same name, silently. The first run of a second document says
    it, once; the first document's runs never do."""
    first = open_doc(initialized, folder / "sales.py", "def area(r):\n    return r * r\n")
    second = open_doc(initialized, folder / "other.py", "def area(r):\n    return 2 * r\n")
    assert (await run(initialized, first))["status"] == "ok"
    assert (await run(initialized, first))["status"] == "ok"
    assert not [m for m in initialized.messages if "same kernel" in m.message]
    assert (await run(initialized, second))["status"] == "ok"
    assert (await run(initialized, second))["status"] == "ok"
    [said] = [m.message for m in initialized.messages if "same kernel" in m.message]
    assert said == (
        f"runfix: other.py runs in the same kernel as sales.py: one kernel per folder "
        f"({folder.name}), so what one defines, the other sees (and a name defined again "
        "replaces the first)."
    )
