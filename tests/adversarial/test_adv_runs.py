"""Runs under real use: edits while code runs, restarts, odd text, hostile code.

Each drives a real `runfix serve` with pytest-lsp; where the executor matters
the test runs with the local kernel and in the Docker sandbox (`executor`)."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from tests.conftest import (
    change,
    errors,
    hints,
    hover_text,
    init_params,
    open_doc,
    run,
)


def _command(command: str, *arguments: Any) -> lsp.ExecuteCommandParams:
    return lsp.ExecuteCommandParams(command=command, arguments=list(arguments))


async def _until(what: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


EDITED_WHILE_RUNNING = """\
# %% one
import time
time.sleep(1.5)
# %% two
time.sleep(1)
# %% three
print('three ran')
# %% four
'four ran'
"""


async def test_editing_during_a_run_never_changes_what_runs(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    uri = open_doc(initialized, folder / "doc.py", EDITED_WHILE_RUNNING)
    await run(initialized, uri, 0, 0)  # the kernel is up

    running = asyncio.ensure_future(run(initialized, uri))
    await asyncio.sleep(0.5)  # cell one sleeps
    change(initialized, uri, 2, (0, 0), (0, 0), "# a comment\n# another\n")
    answer = await running

    assert answer["status"] == "ok"
    labels = {h.position.line: h.label for h in await hints(initialized, uri)}
    # Every cell ran whole, as it stood; results sit on the lines those statements moved to.
    assert labels == {8: "→ three ran", 10: "→ 'four ran'"}


async def test_a_statement_edited_during_its_run_loses_its_result_not_its_line(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "doc.py", "import time\ntime.sleep(1); print('old')\n")
    running = asyncio.ensure_future(run(initialized, uri))
    for _ in range(200):  # the run is under way (not only asked for) when the line changes
        if any(s["state"] == "busy" for s in initialized.statuses):
            break
        await asyncio.sleep(0.05)
    change(initialized, uri, 2, (1, 0), (1, 26), "print('new text')")
    assert (await running)["status"] == "ok"
    assert await hints(initialized, uri) == []


async def test_restart_during_a_run_answers_the_run(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    uri = open_doc(initialized, folder / "doc.py", "x = 1\nimport time\ntime.sleep(30)\n")
    await run(initialized, uri, 0, 0)

    running = asyncio.ensure_future(run(initialized, uri, 1, 2))
    await asyncio.sleep(1.0)
    restarted = await initialized.workspace_execute_command_async(
        _command("runfix.restart", {"uri": uri})
    )
    answer = await asyncio.wait_for(running, 20)

    assert restarted == {"restarted": 1}
    assert answer["status"] == "cancelled"
    assert "restarted" in answer.get("message", "") or any(
        "restarted" in d.message for d in initialized.diagnostics.get(uri, [])
    )
    # and the kernel is fresh and usable
    fresh = open_doc(initialized, folder / "fresh.py", "'x' in dir()\n")
    assert (await run(initialized, fresh))["status"] == "ok"
    assert [h.label for h in await hints(initialized, fresh)] == ["→ False"]


async def test_untitled_documents_run_in_the_first_folder(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = "untitled:Untitled-1"
    initialized.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text="import os\nos.getcwd()\n1/0\n"
            )
        )
    )
    actions = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    run_cell = next(a for a in actions or [] if a.title == "Run cell")
    assert isinstance(run_cell, lsp.CodeAction) and run_cell.command is not None
    answer = await initialized.workspace_execute_command_async(
        _command(run_cell.command.command, *(run_cell.command.arguments or []))
    )
    assert answer["status"] == "error"
    [hint] = await hints(initialized, uri)
    assert hint.position.line == 1
    assert repr(str(folder)) in await hover_text(initialized, uri, 1)  # its cwd
    [error] = errors(initialized, uri)
    assert error.message == "ZeroDivisionError: division by zero"
    assert error.range.start.line == 2


async def test_a_syntax_error_below_the_first_cell_quotes_the_document(
    initialized: LanguageClient, folder: Path
) -> None:
    text = "# %% one\nx = 1\n# %% two\ny = 2\nz = (1 +\n"
    path = folder / "doc.py"
    uri = open_doc(initialized, path, text)
    path.write_text("something else entirely on disk\n" * 10)  # what the editor has differs

    await run(initialized, uri)

    [error] = errors(initialized, uri)
    assert error.range.start.line == 4
    assert error.range.start.character == 4  # the "(" of `z = (1 +`
    hover = await hover_text(initialized, uri, 4)
    assert "z = (1 +" in hover
    assert "on disk" not in hover


async def test_huge_messages_and_deep_recursion_are_capped(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "big.py", "raise ValueError('x' * 10_000_000)\n")
    await run(initialized, uri)
    [error] = errors(initialized, uri)
    assert error.message.startswith("ValueError: xxxx")
    assert len(error.message) < 3_000
    assert "more characters" in error.message

    deep = open_doc(initialized, folder / "deep.py", "def f(n):\n    return f(n + 1)\n\nf(0)\n")
    await run(initialized, deep)
    [error] = errors(initialized, deep)
    assert error.message.startswith("RecursionError")
    related = error.related_information or []
    assert 1 <= len(related) <= 20
    assert any("more times" in r.message for r in related)
    assert len(await hover_text(initialized, deep, 1)) < 30_000


async def test_a_kernel_that_never_starts_is_bounded_and_cancellable(
    client: LanguageClient, folder: Path, tmp_path: Path
) -> None:
    never = tmp_path / "never-python"
    never.write_text("#!/bin/sh\nexec sleep 600\n")
    never.chmod(0o755)
    params = init_params(folder)
    params.initialization_options = {"python": str(never), "kernelStartTimeout": 3}
    await client.initialize_session(params)
    uri = open_doc(client, folder / "doc.py", "1 + 1\n")

    began = time.monotonic()
    first = asyncio.ensure_future(run(client, uri))
    await asyncio.sleep(0.3)
    second = asyncio.ensure_future(run(client, uri))  # queued behind the failing start
    answers = await asyncio.wait_for(asyncio.gather(first, second), 30)
    took = time.monotonic() - began

    assert [a["status"] for a in answers] == ["error", "error"]
    assert "did not start within 3s" in answers[0]["message"]
    assert took < 15  # one bounded start, not two

    # A run waiting for a start can be cancelled.
    waiting = asyncio.ensure_future(
        client.protocol.send_request_async(
            lsp.WORKSPACE_EXECUTE_COMMAND, _command("runfix.run", {"uri": uri}), msg_id="waiting"
        )
    )
    await asyncio.sleep(0.5)
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="waiting"))
    began = time.monotonic()
    answer = await asyncio.wait_for(waiting, 10)
    assert answer["status"] == "cancelled", answer
    assert time.monotonic() - began < 3


THREAD = """\
import threading, time
def later():
    time.sleep(1)
    print('late from the thread')
threading.Thread(target=later).start()
"""


async def test_output_of_an_old_thread_never_lands_on_another_run(
    initialized: LanguageClient, folder: Path
) -> None:
    first = open_doc(initialized, folder / "first.py", THREAD)
    other = open_doc(
        initialized, folder / "other.py", "import time\ntime.sleep(2)\nprint('mine')\n"
    )
    await run(initialized, first)
    await run(initialized, other)
    labels = [h.label for h in await hints(initialized, other)]
    assert labels == ["→ mine"]
    assert "late" not in await hover_text(initialized, other, 1)


async def test_form_feeds_and_unicode_line_separators_keep_lines(
    initialized: LanguageClient, folder: Path
) -> None:
    text = "a = 1\n\x0c\nb = 'x\u2028y'\nlen(b)\n1/0\n"
    uri = open_doc(initialized, folder / "ff.py", text)
    await run(initialized, uri)
    [error] = errors(initialized, uri)
    assert error.range.start.line == 4
    assert [(h.position.line, h.label) for h in await hints(initialized, uri)] == [(3, "→ 3")]


async def test_top_level_await_and_cell_magics_run_as_in_jupyter(
    initialized: LanguageClient, folder: Path
) -> None:
    text = (
        "# %% await\nimport asyncio\nawait asyncio.sleep(0.01)\n"
        "async def two():\n    return 2\nawait two()\n"
        "# %% magic\n%%bash\necho from bash\n"
    )
    uri = open_doc(initialized, folder / "nb.py", text)
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", initialized.diagnostics.get(uri)
    labels = {h.position.line: h.label for h in await hints(initialized, uri)}
    assert labels[5] == "→ 2"
    assert any("from bash" in label for label in labels.values())


async def test_exit_and_keyboard_interrupt_say_what_happened(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "exit.py", "x = 1\nexit()\n")
    await run(initialized, uri)
    [note] = initialized.diagnostics[uri]
    assert note.range.start.line == 1
    assert "exit()" in note.message and "state was lost" in note.message

    raised = open_doc(initialized, folder / "kbd.py", "raise KeyboardInterrupt('by the code')\n")
    answer = await run(initialized, raised)
    assert answer["status"] == "error"
    [error] = errors(initialized, raised)
    assert error.message == "KeyboardInterrupt: by the code"


async def test_progress_bars_show_their_last_frame_without_control_codes(
    initialized: LanguageClient, folder: Path
) -> None:
    text = (
        "import sys\n"
        "for i in range(0, 101, 25):\n"
        "    sys.stdout.write(f'\\r\\x1b[32m{i:3d}%\\x1b[0m |' + '#' * (i // 25))\n"
        "print()\n"
    )
    uri = open_doc(initialized, folder / "bar.py", text)
    await run(initialized, uri)
    [hint] = await hints(initialized, uri)
    assert hint.label == "→ 100% |####"


async def test_bom_latin1_cookie_and_lone_surrogates(
    initialized: LanguageClient, folder: Path
) -> None:
    bom = open_doc(initialized, folder / "bom.py", "\ufeffx = 'bom'\nx\n")
    assert (await run(initialized, bom))["status"] == "ok"
    assert [h.label for h in await hints(initialized, bom)] == ["→ 'bom'"]

    cookie = open_doc(initialized, folder / "latin.py", "# -*- coding: latin-1 -*-\ns = 'é'\ns\n")
    assert (await run(initialized, cookie))["status"] == "ok"
    assert [h.label for h in await hints(initialized, cookie)] == ["→ 'é'"]

    lone = open_doc(
        initialized, folder / "lone.py", "print('a\\ud800')\nraise ValueError('\\ud800')\n"
    )
    answer = await run(initialized, lone)
    assert answer["status"] == "error"
    [error] = errors(initialized, lone)
    assert error.message == "ValueError: \\ud800"
    assert [h.label for h in await hints(initialized, lone)] == ["→ a\\ud800"]


async def test_deleting_the_helper_does_not_break_later_runs(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(
        initialized, folder / "del.py", "import sys\ndel sys.modules['_runfix_kernel']\n"
    )
    await run(initialized, uri)
    after = open_doc(initialized, folder / "after.py", "40 + 2\n")
    assert (await run(initialized, after))["status"] == "ok"
    assert [h.label for h in await hints(initialized, after)] == ["→ 42"]


async def test_printed_fences_do_not_close_the_hover(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "fence.py", "print('  ```  \\nafter the fence')\n")
    await run(initialized, uri)
    hover = await hover_text(initialized, uri, 0)
    assert hover.startswith("````text\n  ```  \nafter the fence\n````\n")  # the longer fence
    assert hover.count("````") == 2


async def test_runs_of_unopened_documents_and_ranges_past_the_end_are_refused(
    initialized: LanguageClient, folder: Path
) -> None:
    on_disk = folder / "never_opened.py"
    on_disk.write_text("open('ran', 'w').write('yes')\n")
    with pytest.raises(JsonRpcInvalidParams, match="not open"):
        await initialized.workspace_execute_command_async(
            _command("runfix.run", {"uri": on_disk.as_uri()})
        )
    assert not (folder / "ran").exists()

    uri = open_doc(initialized, folder / "short.py", "print('last line')\n")
    past = {"start": {"line": 5, "character": 0}, "end": {"line": 6, "character": 0}}
    with pytest.raises(JsonRpcInvalidParams, match="past the end"):
        await initialized.workspace_execute_command_async(
            _command("runfix.run", {"uri": uri, "range": past})
        )
    assert await hints(initialized, uri) == []


@pytest.mark.settings({"transport": "tcp"})
async def test_the_tcp_transport_runs_on_loopback_with_a_key(
    initialized: LanguageClient, folder: Path
) -> None:
    text = (
        "import json\nfrom ipykernel import get_connection_info\n"
        "info = json.loads(get_connection_info())\n"
        "(info['transport'], info['ip'], len(info['key']) >= 32)\n"
    )
    uri = open_doc(initialized, folder / "tcp.py", text)
    assert (await run(initialized, uri))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ ('tcp', '127.0.0.1', True)"]


def test_a_bad_timeout_is_refused_by_runfix_run(folder: Path) -> None:
    import subprocess

    (folder / "a.py").write_text("print(1)\n")
    for bad in ("-1", "0", "nan", "inf"):
        done = subprocess.run(
            [sys.executable, "-m", "lsp_server", "run", str(folder / "a.py"), "--timeout", bad],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2, bad
        assert "expected a number of seconds" in done.stderr


async def test_completion_and_hover_at_odd_places_and_after_the_kernel_died(
    initialized: LanguageClient, folder: Path
) -> None:
    """Positions past the end, inside strings, on a name whose value is gone with a dead
    kernel: every request is answered (empty), none fails, and completion never restarts
    the kernel (the next run does)."""
    uri = open_doc(initialized, folder / "odd.py", 'cfg = {"a": 1}\ns = "cfg["\n')
    assert (await run(initialized, uri))["status"] == "ok"
    doc = lsp.TextDocumentIdentifier(uri)
    for line, character in ((99, 0), (0, 999), (1, 8)):
        where = lsp.Position(line, character)
        answer = await initialized.text_document_completion_async(lsp.CompletionParams(doc, where))
        assert not answer or not answer.items
        await initialized.text_document_hover_async(lsp.HoverParams(doc, where))
        await initialized.text_document_signature_help_async(lsp.SignatureHelpParams(doc, where))
    change(initialized, uri, 2, (2, 0), (2, 0), "import os; os._exit(1)\n")
    died = await run(initialized, uri, 2)
    assert died["status"] in ("died", "error")
    change(initialized, uri, 3, (3, 0), (3, 0), "cfg['\n")
    where = lsp.Position(3, 5)
    after = await initialized.text_document_completion_async(lsp.CompletionParams(doc, where))
    assert not after or not after.items  # the new kernel holds no `cfg`
    assert (await run(initialized, uri, 0))["status"] == "ok"
    again = await initialized.text_document_completion_async(lsp.CompletionParams(doc, where))
    assert again and [i.label for i in again.items] == ["a"]
