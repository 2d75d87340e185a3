"""The model over LSP: generate, run and fix, fix with model, safety, offline fixes.

A real `runfix serve` and a real kernel; the real `openai` client talks HTTP
to a loopback model server (`model_server.py`) whose replies each test scripts.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities

from tests.conftest import (
    API_KEY,
    API_KEY_ENV,
    WHEELS,
    apply_edits,
    errors,
    hints,
    hover_text,
    init_params,
    make_wheel,
    open_doc,
    quick_fixes,
    run,
)
from tests.support.model_server import ModelServer, Reply, code

pytestmark = pytest.mark.model


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


def options(server: ModelServer, **extra: Any) -> dict[str, Any]:
    settings = {"model": {"baseUrl": server.url, "name": "test-model", "apiKeyEnv": API_KEY_ENV}}
    for key, value in extra.items():
        if isinstance(value, dict):
            settings.setdefault(key, {}).update(value)
        else:
            settings[key] = value
    return settings


async def start(
    client: LanguageClient, folder: Path, opts: dict[str, Any], who: str = "neovim@v0.11.0"
) -> None:
    await client.initialize_session(init_params(folder, who, opts))


async def command(client: LanguageClient, name: str, arg: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=name, arguments=[arg])
    )


async def generate(client: LanguageClient, uri: str, line: int, run_too: bool = False) -> Any:
    return await command(
        client,
        "runfix.generate",
        {"uri": uri, "position": {"line": line, "character": 0}, "run": run_too},
    )


def generating(client: LanguageClient, uri: str, line: int) -> asyncio.Future[Any]:
    """Generate on the prompt at `line`, sent and not awaited (to cancel it meanwhile)."""
    params = lsp.ExecuteCommandParams(
        command="runfix.generate",
        arguments=[{"uri": uri, "position": {"line": line, "character": 0}}],
    )
    return asyncio.ensure_future(
        client.protocol.send_request_async(lsp.WORKSPACE_EXECUTE_COMMAND, params)
    )


def text(client: LanguageClient, uri: str) -> str:
    return str(client.texts[uri])


def progress_messages(client: LanguageClient) -> list[str]:
    return [
        str(r.message)
        for reports in client.progress_reports.values()
        for r in reports
        if getattr(r, "message", None)
    ]


def shown(client: LanguageClient) -> str:
    return "\n".join(m.message for m in client.messages)


# -- generate -----------------------------------------------------------------------------


async def test_generate_inserts_under_the_prompt_then_regenerates_in_place(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "x = 2\n# ai: print x squared\n\n# %%\nprint('after')\n"
    uri = open_doc(client, folder / "gen.py", source)
    reply = code("print(x ** 2)")
    reply.chunk_delay = 0.2  # long enough for progress to appear (it waits 0.3 s)
    model.script(reply)
    answer = await generate(client, uri, 1)
    assert answer["status"] == "ok"
    assert (
        text(client, uri) == "x = 2\n# ai: print x squared\nprint(x ** 2)\n\n# %%\nprint('after')\n"
    )
    assert len(client.edits) == 1
    assert "print x squared" in model.user_text()
    assert model.requests[0]["stream"] is True
    assert any(m.startswith("Generating") for m in progress_messages(client))

    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(code("y = x ** 2\nprint(y)"))
    answer = await generate(client, uri, 1, run_too=True)
    assert answer["status"] == "ok" and answer["run"]["status"] == "ok"
    assert text(client, uri) == (
        "x = 2\n# ai: print x squared\ny = x ** 2\nprint(y)\n\n# %%\nprint('after')\n"
    )
    assert len(client.edits) == 2


async def test_generation_context_holds_the_kernel_variables(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(
        client, folder / "ctx.py", "numbers = [3, 1, 2]\nname = 'ada'\n# ai: sort numbers\n"
    )
    assert (await run(client, uri, 0, 1))["status"] == "ok"
    model.script(code("numbers.sort()"))
    assert (await generate(client, uri, 2))["status"] == "ok"
    sent = model.user_text()
    assert "numbers: list len=3" in sent
    assert "name: str" in sent
    assert "sort numbers" in sent


async def prompt_actions(client: LanguageClient, uri: str, line: int) -> list[lsp.CodeAction]:
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri=uri),
            lsp.Range(lsp.Position(line, 3), lsp.Position(line, 3)),
            lsp.CodeActionContext(diagnostics=[], only=["runfix.generate"]),
        )
    )
    return [a for a in actions or [] if isinstance(a, lsp.CodeAction)]


async def test_a_prompt_line_offers_generate_then_regenerate_and_they_work(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "actions.py", "# ai: greet\n\n# %%\nprint('next')\n")
    assert await prompt_actions(client, uri, 3) == []  # not a prompt line
    offered = await prompt_actions(client, uri, 0)
    assert [a.title for a in offered] == ["Generate code", "Generate and run"]
    generate_and_run = offered[1].command
    assert generate_and_run is not None
    model.script(code("greeting = 'hello'\ngreeting"))
    answer = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(generate_and_run.command, generate_and_run.arguments)
    )
    assert answer["status"] == "ok" and answer["run"]["status"] == "ok"
    assert text(client, uri).startswith("# ai: greet\ngreeting = 'hello'\ngreeting\n")
    assert [h.label for h in await hints(client, uri)] == ["→ 'hello'"]
    assert [a.title for a in await prompt_actions(client, uri, 0)] == [
        "Regenerate code",
        "Generate and run",
    ]


async def test_auto_run_runs_what_was_generated_and_still_asks_for_flagged_code(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, autoRun=True))
    uri = open_doc(client, folder / "auto.py", "# ai: two things\n\n# %%\n# ai: a file\n")
    model.script(code("answer = 6 * 7\nanswer"), code("import os\nos.remove('keep.txt')"))
    (folder / "keep.txt").write_text("precious")
    first = await generate(client, uri, 0)  # no "run" asked: autoRun runs it
    assert first["run"]["status"] == "ok"
    assert [h.label for h in await hints(client, uri)] == ["→ 42"]
    second = await generate(client, uri, 5)  # the prompt moved down two lines
    assert "os.remove" in text(client, uri)
    [question] = client.questions
    assert "deletes files (os.remove)" in question.message
    assert second["run"]["status"] == "cancelled"  # dismissed: it did not run
    assert (folder / "keep.txt").read_text() == "precious"


async def test_prose_only_and_unparsable_replies_make_no_edit(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "# ai: do something\n"
    uri = open_doc(client, folder / "prose.py", source)
    model.script(
        Reply("I'm sorry, I can't help with that without more details."),
        code("def broken(:\n    pass"),
        Reply(""),  # an empty stream: not an answer, asked once more without streaming…
        Reply(""),  # …and that answer is empty too: called so
    )
    for why in ("prose only", "does not parse", "the model's answer was empty"):
        answer = await generate(client, uri, 0)
        assert answer["status"] == "error"
        assert why in answer["message"]
    assert client.edits == []
    assert text(client, uri) == source
    assert [r.get("stream") for r in model.requests[2:]] == [True, False]


async def test_rate_limit_then_success(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "retry.py", "# ai: say hi\n")
    model.script(
        Reply(status=429, content="slow down", headers={"retry-after": "0.2"}), code("print('hi')")
    )
    answer = await generate(client, uri, 0)
    assert answer["status"] == "ok"
    assert len(model.requests) == 2
    assert "print('hi')" in text(client, uri)


@pytest.mark.parametrize("failure", ["500s", "hang", "500s then a hang"])
async def test_failing_or_hanging_endpoint_ends_within_the_timeout(
    client: LanguageClient, folder: Path, model: ModelServer, failure: str
) -> None:
    await start(client, folder, options(model, model={"timeout": 2}))
    source = "# ai: anything\n"
    uri = open_doc(client, folder / "down.py", source)
    model.default = Reply(status=500, content="boom") if failure == "500s" else Reply(hang=30)
    if failure == "500s then a hang":  # the retry still under way when the clock runs out
        model.script(Reply(status=500, content="boom"), Reply(status=500, content="boom"))
    began = time.monotonic()
    answer = await generate(client, uri, 0)
    took = time.monotonic() - began
    assert answer["status"] == "error"
    assert took < 2 + 3  # the timeout plus a margin for the machine, never the 30s hang
    expected = "did not answer within 2s" if failure == "hang" else "kept answering 500"
    assert expected in answer["message"] and expected in shown(client)
    if failure != "hang":
        assert len(model.requests) >= 2  # it retried
    assert text(client, uri) == source


async def test_unreachable_or_unconfigured_model_says_what_to_do(
    client: LanguageClient, folder: Path
) -> None:
    closed = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    await start(client, folder, {"model": {"baseUrl": closed, "apiKeyEnv": API_KEY_ENV}})
    uri = open_doc(client, folder / "far.py", "# ai: anything\n")
    answer = await generate(client, uri, 0)
    assert answer["status"] == "error" and "Cannot reach the model" in answer["message"]
    client.set_configuration(
        {"runfix": {"model": {"baseUrl": "", "apiKeyEnv": "RUNFIX_NO_SUCH_KEY"}}}
    )
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    answer = await generate(client, uri, 0)
    assert "No model is configured: set RUNFIX_NO_SUCH_KEY" in answer["message"]
    assert API_KEY not in shown(client)


@pytest.mark.parametrize("how", ["request", "progress"])
async def test_cancel_while_streaming_stops_at_once_and_changes_nothing(
    client: LanguageClient, folder: Path, model: ModelServer, how: str
) -> None:
    await start(client, folder, options(model))
    source = "# ai: write a lot\n"
    uri = open_doc(client, folder / "cancel.py", source)
    long_code = "\n".join(f"v{i} = {i}" for i in range(200))
    model.script(Reply(f"```python\n{long_code}\n```", chunks=100, chunk_delay=0.1))
    request = generating(client, uri, 0)

    def streaming() -> list[Any]:
        return [
            token
            for token, reports in client.progress_reports.items()
            if any("v1" in str(getattr(r, "message", "")) for r in reports)
        ]

    for _ in range(100):
        await asyncio.sleep(0.05)
        if streaming():
            break
    [token] = streaming()  # the stream shows in progress as it arrives
    began = time.monotonic()
    if how == "request":
        msg_id = max(client.protocol._request_futures)  # the request just sent
        client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id=msg_id))
    else:
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    answer = await asyncio.wait_for(request, 5)
    assert answer["status"] == "cancelled"
    assert time.monotonic() - began < 2  # not the ~10 s the stream would still take
    assert isinstance(client.progress_reports[token][-1], lsp.WorkDoneProgressEnd)
    assert client.edits == [] and text(client, uri) == source
    for _ in range(40):  # the HTTP stream was closed, not left to run on
        if model.aborted:
            break
        await asyncio.sleep(0.05)
    assert model.aborted == 1


# -- run and fix --------------------------------------------------------------------------


async def test_run_and_fix_fixes_on_attempt_two_with_the_first_error_in_the_request(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "values = [4, 5]\n# %%\ntotal = sum(amounts)\nprint(total)\n"
    uri = open_doc(client, folder / "fix.py", source)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    second = code("total = sum(values)\nprint(total)")
    second.chunk_delay = 0.2  # long enough for progress to appear (it waits 0.3 s)
    model.script(code("total = sum(values) / 0\nprint(total)"), second)
    answer = await command(
        client,
        "runfix.runAndFix",
        {
            "uri": uri,
            "range": {"start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 0}},
        },
    )
    assert answer == {"status": "fixed", "attempts": 2, "says": "9"}
    assert text(client, uri) == "values = [4, 5]\n# %%\ntotal = sum(values)\nprint(total)\n"
    assert len(client.edits) == 1
    asked_first, asked_second = model.user_text(0), model.user_text(1)
    assert "NameError: name 'amounts' is not defined" in asked_first
    assert "ZeroDivisionError" in asked_second and "sum(values) / 0" in asked_second
    assert any("attempt 2/3" in m for m in progress_messages(client))
    await asyncio.sleep(0.3)
    assert errors(client, uri) == []
    # The record: the failed run, both attempts as model-written runs that name it (each
    # in the jail), then the applied fix's run in the kernel itself, as the user's code.
    runs = await command(client, "runfix.history", {"uri": uri})
    applied, fixed, tried, failed = runs[:4]
    assert (applied["origin"], applied["status"], applied["code"]) == (
        "user",
        "ok",
        "total = sum(values)\nprint(total)\n",
    )
    assert (failed["origin"], failed["status"], failed["code"]) == (
        "user",
        "error",
        "total = sum(amounts)\nprint(total)\n",
    )
    assert (tried["origin"], tried["status"], tried["fixOf"]) == ("model", "error", failed["id"])
    assert (fixed["origin"], fixed["status"], fixed["fixOf"]) == ("model", "ok", failed["id"])
    assert fixed["said"] == "→ 9" and (fixed["first"], fixed["last"]) == (2, 3)


async def test_run_and_fix_of_a_file_goes_on_with_the_cells_below_a_fixed_one(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """The same flow as `runfix run --fix`: each failing cell is fixed in turn."""
    await start(client, folder, options(model))
    source = "items = [1, 2]\n# %%\nprint(sum(things))\n# %%\nprint(len(stuff))\n"
    uri = open_doc(client, folder / "two.py", source)
    model.script(code("print(sum(items))"), code("print(len(items))"))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer == {"status": "fixed", "attempts": 2, "says": "2"}
    assert text(client, uri) == "items = [1, 2]\n# %%\nprint(sum(items))\n# %%\nprint(len(items))\n"
    assert len(client.edits) == 2
    assert "stuff" in model.user_text(1)  # the second request is about the second cell
    await asyncio.sleep(0.3)
    assert errors(client, uri) == []
    assert [h.label for h in await hints(client, uri)] == ["→ 3", "→ 2"]


async def test_run_and_fix_gives_up_after_max_attempts_leaving_the_document(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, fix={"maxAttempts": 2}))
    source = "print(undefined_thing)\n"
    uri = open_doc(client, folder / "giveup.py", source)
    model.script(code("print(still_undefined)"), code("raise ValueError('nope')"))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer["status"] == "failed" and answer["attempts"] == 2
    assert "ValueError: nope" in answer["message"]
    assert client.edits == [] and text(client, uri) == source
    assert len(model.requests) == 2
    assert "not fixed" in shown(client)


@pytest.mark.parametrize("answer", [None, "Run"])
async def test_the_fix_loop_runs_a_flagged_candidate_only_when_confirmed(
    client: LanguageClient, folder: Path, model: ModelServer, answer: str | None
) -> None:
    await start(client, folder, options(model))
    source = "open('data.txt').read()\n"
    uri = open_doc(client, folder / "flagfix.py", source)
    client.answer = answer
    model.script(
        code("import subprocess\nsubprocess.run(['touch', 'data.txt'])\nopen('data.txt').read()")
    )
    result = await command(client, "runfix.runAndFix", {"uri": uri})
    [question] = client.questions
    assert "The model's fix starts a process (subprocess.run)" in question.message
    if answer == "Run":
        ran = "CompletedProcess(args=['touch', 'data.txt'], returncode=0) / ''"
        assert result == {"status": "fixed", "attempts": 1, "says": ran}
        assert (folder / "data.txt").exists() and "subprocess.run" in text(client, uri)
    else:
        assert result["status"] == "failed" and "not confirmed" in result["message"]
        assert not (folder / "data.txt").exists()  # the candidate never ran
        assert client.edits == [] and text(client, uri) == source


async def test_run_and_fix_answers_ok_when_it_runs_clean(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "fine.py", "print('fine')\n")
    assert await command(client, "runfix.runAndFix", {"uri": uri}) == {
        "status": "ok",
        "attempts": 0,
    }
    assert model.requests == [] and client.edits == []


@pytest.mark.parametrize("who", ["visual_studio_code", "no-resolve"])
async def test_fix_with_model_offers_an_edit_only_after_it_ran_clean(
    client: LanguageClient, folder: Path, model: ModelServer, who: str
) -> None:
    params = init_params(folder, "visual_studio_code", options(model))
    if who == "no-resolve":
        caps = client_capabilities("neovim@v0.7.0")
        assert caps.text_document and caps.text_document.code_action
        caps.text_document.code_action.resolve_support = None
        params.capabilities = caps
    await client.initialize_session(params)
    source = "def half(n):\n    return n / 2\n\nprint(half('8'))\n"
    uri = open_doc(client, folder / "resolve.py", source)
    assert (await run(client, uri))["status"] == "error"
    [action] = [a for a in await quick_fixes(client, uri) if a.title == "Fix with model"]
    model.script(
        code("print(half(int('x')))"),
        code("def half(n):\n    return int(n) / 2\n\nprint(half('8'))"),
    )
    if who == "no-resolve":
        assert isinstance(action, lsp.CodeAction) and action.command is not None
        answer = await command(client, action.command.command, action.command.arguments[0])
        assert answer == {"status": "fixed", "attempts": 2, "says": "4.0"}
    else:
        assert isinstance(action, lsp.CodeAction) and action.edit is None and action.data
        resolved = await client.code_action_resolve_async(action)
        assert resolved.edit is not None and resolved.disabled is None
        [change] = resolved.edit.document_changes or []
        assert isinstance(change, lsp.TextDocumentEdit)
        assert (
            change.edits[0].new_text == "def half(n):\n    return int(n) / 2\n\nprint(half('8'))\n"
        )
        assert client.edits == [] and text(client, uri) == source  # nothing until the user applies
    assert "ValueError" in model.user_text(1)  # what attempt 1 raised went into attempt 2


async def test_fix_with_model_on_an_error_raised_in_another_cell_rewrites_that_cell(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """The call in cell 3 reaches cell 2's function, which raises: the quick fix's edit is
    of the function (where the diagnostic is), never of the call."""
    await start(client, folder, options(model), "visual_studio_code")
    source = (
        "sales = [12.5, 8.0, 19.25]\n# %%\ndef average(values):\n"
        "    return sum(values) / values.count()\n# %%\nprint(round(average(sales), 2))\n"
    )
    uri = open_doc(client, folder / "cross.py", source)
    assert (await run(client, uri))["status"] == "error"
    [error] = errors(client, uri)
    assert error.range.start.line == 3
    [action] = [a for a in await quick_fixes(client, uri) if a.title == "Fix with model"]
    model.script(code("def average(values):\n    return sum(values) / len(values)"))
    resolved = await client.code_action_resolve_async(action)
    assert resolved.edit is not None, resolved.disabled
    [change] = resolved.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit)
    [edit] = change.edits
    assert (edit.range.start.line, edit.range.end.line) == (2, 4)  # the function's lines
    assert edit.new_text == "def average(values):\n    return sum(values) / len(values)\n"
    assert "where the error was raised; line 6 ran again clean" in resolved.title
    assert "when called by this code" in model.user_text(0)


async def test_fix_with_model_on_an_error_raised_in_a_module_file_edits_that_file(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """The call reaches a function of `stats_util.py` (a module of the folder, not open):
    the quick fix's edit is of that file, the document is left as it is."""
    await start(client, folder, options(model), "visual_studio_code")
    module = folder / "stats_util.py"
    module.write_text("def mean(values):\n    return sum(values) / values.count()\n")
    source = "from stats_util import mean\n# %%\nprint(mean([1, 2, 3]))\n"
    uri = open_doc(client, folder / "job.py", source)
    assert (await run(client, uri))["status"] == "error"
    [action] = [a for a in await quick_fixes(client, uri) if a.title == "Fix with model"]
    model.script(code("def mean(values):\n    return sum(values) / len(values)"))
    resolved = await client.code_action_resolve_async(action)
    assert resolved.edit is not None, resolved.disabled
    [change] = resolved.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit)
    assert change.text_document.uri == module.as_uri() and change.text_document.version is None
    [edit] = change.edits
    assert (edit.range.start.line, edit.range.end.line) == (0, 2)
    assert edit.new_text == "def mean(values):\n    return sum(values) / len(values)\n"
    assert "at stats_util.py:1, where the error was raised" in resolved.title
    assert text(client, uri) == source and "count()" in module.read_text()  # only offered


async def test_a_reply_that_opens_a_cell_is_written_into_the_prompts_body(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """A small model starts its answer with `# %% <the prompt>`: written as is, the prompt
    and its code would be two cells and Regenerate would find no body."""
    await start(client, folder, options(model))
    source = "xs = [1, 2, 3]\n# %%\n# ai: print the mean of xs\n"
    uri = open_doc(client, folder / "mean.py", source)
    model.script(
        "```python\n# %% print the mean of xs\n# ai: print the mean of xs\n"
        "print(sum(xs) / len(xs))\n```"
    )
    assert (await generate(client, uri, 2))["status"] == "ok"
    assert text(client, uri) == source + "print(sum(xs) / len(xs))\n"
    model.script(code("import statistics\nprint(statistics.mean(xs))"))
    assert (await generate(client, uri, 2))["status"] == "ok"  # Regenerate finds the body
    assert text(client, uri) == source + "import statistics\nprint(statistics.mean(xs))\n"


async def test_every_request_is_bounded_and_progress_says_the_prompt_is_being_read(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"maxTokens": 400}))
    uri = open_doc(client, folder / "b.py", "# ai: print 1\n")
    slow = code("print(1)")
    slow.hang = 0.6  # the model reading a long prompt: nothing comes for a while
    model.script(slow)
    assert (await generate(client, uri, 0))["status"] == "ok"
    assert model.requests[0]["max_tokens"] == 400  # Generate's bound (600) within the cap
    assert any("the model is reading the prompt (~" in m for m in progress_messages(client))
    source = "def half(n):\n    return n / 2\n\nprint(half('8'))\n"
    fix_uri = open_doc(client, folder / "f.py", source)
    model.script(code("def half(n):\n    return int(n) / 2\n\nprint(half('8'))"))
    answer = await command(client, "runfix.runAndFix", {"uri": fix_uri})
    assert answer["status"] == "fixed", answer
    assert model.requests[1]["max_tokens"] == 256  # from the size of the code to fix


async def test_a_stream_past_the_timeout_is_stopped_and_said_so(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"timeout": 2}))
    source = "# ai: anything\n"
    uri = open_doc(client, folder / "ramble.py", source)
    model.script(Reply("x = 1\n" * 200, chunk_delay=0.3, chunks=40))  # 12 s of text
    began = time.monotonic()
    answer = await generate(client, uri, 0)
    assert time.monotonic() - began < 2 + 3
    assert answer["status"] == "error" and "answer was stopped after 2s" in answer["message"]
    assert text(client, uri) == source


# -- safety -------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [None, "Don't run", "Run"])
async def test_flagged_model_code_runs_only_when_confirmed(
    client: LanguageClient, folder: Path, model: ModelServer, answer: str | None
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "flag.py", "# ai: make a file\n")
    client.answer = answer
    model.script(code("import subprocess\nsubprocess.run(['touch', 'ran.txt'])"))
    result = await generate(client, uri, 0, run_too=True)
    assert result["status"] == "ok"
    assert "subprocess.run" in text(client, uri)  # shown in the document either way
    [question] = client.questions
    assert "starts a process (subprocess.run)" in question.message
    # one sentence, no diagnostic's words pasted inside it (issue 47, S3 8)
    assert "code at line 3 starts a process (subprocess.run). Run it" in question.message
    assert "runfix safety" not in question.message
    # the progress says what it waits for, not only "Running" (issue 70, 3)
    assert any("waiting for your answer: " in m for m in progress_messages(client))
    warnings = [d for d in client.diagnostics[uri] if d.severity == lsp.DiagnosticSeverity.Warning]
    assert [d.range.start.line for d in warnings] == [2]
    if answer == "Run":
        assert result["run"]["status"] == "ok" and (folder / "ran.txt").exists()
    else:
        assert result["run"]["status"] == "cancelled"
        assert not (folder / "ran.txt").exists()


async def test_the_kernel_cannot_read_the_api_key(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    probe = (
        "import os\n"
        f"print(sorted(k for k in ({API_KEY_ENV!r}, 'OPENAI_API_KEY') if k in os.environ))\n"
        "print(any('canary' in v for v in os.environ.values()))\n"
    )
    uri = open_doc(client, folder / "key.py", probe)
    assert (await run(client, uri))["status"] == "ok"
    assert "[]" in await hover_text(client, uri, 1)
    assert "False" in await hover_text(client, uri, 2)


async def test_the_key_goes_only_to_the_model_endpoint(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "auth.py", "# ai: hi\n")
    model.script(code("print('hi')"))
    assert (await generate(client, uri, 0))["status"] == "ok"
    assert model.headers[0]["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in model.user_text()
    assert all(API_KEY not in m.message for m in client.log_messages)


async def test_a_project_file_cannot_send_the_key_to_its_own_server(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    (folder / "pyproject.toml").write_text(
        f'[tool.runfix]\nautoRun = true\nmodel = {{ baseUrl = "{model.url}", apiKeyEnv = '
        f'"{API_KEY_ENV}" }}\n'
    )
    await start(client, folder, {"model": {"timeout": 2}})
    source = "# ai: anything\n"
    uri = open_doc(client, folder / "cloned.py", source)
    model.script(code("print('hi')"))
    answer = await generate(client, uri, 0)
    assert answer["status"] == "error" and text(client, uri) == source
    assert model.requests == [] and model.headers == []  # the repository's server got nothing
    told = shown(client)
    assert "model.baseUrl is ignored: it decides where your API key is sent" in told
    assert "autoRun is ignored" in told and "model.apiKeyEnv is ignored" in told


# -- offline fixes ------------------------------------------------------------------------


async def test_add_import_inserts_it_with_the_imports_and_runs_it(
    client: LanguageClient, folder: Path
) -> None:
    await start(client, folder, {})
    source = '"""Doc."""\nimport os\n\n# %%\nprint(math.sqrt(16), os.sep)\n'
    uri = open_doc(client, folder / "imp.py", source)
    assert (await run(client, uri))["status"] == "error"
    [fix] = [a for a in await quick_fixes(client, uri) if a.title.startswith("Add")]
    assert fix.title == "Add `import math`" and fix.edit is not None and fix.command is not None
    [(edit_uri, edits)] = (fix.edit.changes or {}).items()
    apply_edits(client, edit_uri, edits)  # the user picks the action: the editor applies its edit…
    assert (
        text(client, uri)
        == '"""Doc."""\nimport os\nimport math\n\n# %%\nprint(math.sqrt(16), os.sep)\n'
    )
    await command(client, fix.command.command, fix.command.arguments[0])  # …then runs its command
    assert (await run(client, uri, 5, 5))["status"] == "ok"


def _project_venv(folder: Path) -> Path:
    """A venv for the project that sees the test environment's packages (ipykernel, pip)
    but installs into itself (from `WHEELS` only: see the server's environment)."""
    venv = folder / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = list(venv.glob("lib/python*/site-packages"))
    (site / "_runfix_tests_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "python"


async def test_install_the_missing_package_then_rerun(client: LanguageClient, folder: Path) -> None:
    make_wheel(WHEELS, "runfix_canary_pkg", "VALUE = 42\n")
    python = _project_venv(folder)
    await start(client, folder, {"python": str(python)})
    uri = open_doc(
        client, folder / "dep.py", "import runfix_canary_pkg\nprint(runfix_canary_pkg.VALUE)\n"
    )
    assert (await run(client, uri))["status"] == "error"
    [install] = [a for a in await quick_fixes(client, uri) if a.title.startswith("Install")]
    # No published package provides it: offered as a question, and asked before installing.
    assert install.title == "Install `runfix-canary-pkg`? (no known package provides it)"
    assert install.command is not None and not install.is_preferred
    client.answer = None  # dismissed: nothing is installed
    answer = await command(client, install.command.command, install.command.arguments[0])
    assert answer["status"] == "cancelled", answer
    assert "someone else's" in client.questions[-1].message
    assert not list((folder / ".venv").glob("lib/python*/site-packages/runfix_canary_pkg"))
    client.answer = "Install"
    answer = await command(client, install.command.command, install.command.arguments[0])
    assert answer["status"] == "ok", answer
    assert any(m.startswith("Installing runfix-canary-pkg") for m in progress_messages(client))
    assert "runfix: installed runfix-canary-pkg." in shown(client)
    assert answer["run"]["status"] == "ok"
    assert errors(client, uri) == []
    assert list((folder / ".venv").glob("lib/python*/site-packages/runfix_canary_pkg"))


# -- other languages (issue 38) -----------------------------------------------------------


async def test_generate_in_an_r_document_asks_for_r_and_runs_it_in_r_once_looked_at(
    r_kernel: None, client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "# %%\nx <- c(3, 4, 5)\n# ai: ten times the mean of x\n"
    uri = open_doc(client, folder / "analysis.R", source, language="r")
    assert (await run(client, uri, 0, 1))["status"] == "ok"
    model.script(Reply("Here it is:\n\n```r\nmean(x) * 10\n```\n"))
    client.answer = "Run"  # runfix cannot read R: model-written R runs once the user looked
    answer = await generate(client, uri, 2, run_too=True)
    assert answer["status"] == "ok", answer
    assert text(client, uri) == source + "mean(x) * 10\n"
    system, asked = model.requests[0]["messages"][0]["content"], model.user_text(0)
    assert "You write R code" in system and "```r block" in system
    assert "```r\n" in asked and "x <- c(3, 4, 5)" in asked and "```python" not in asked
    [question] = client.questions
    assert "is R code, which runfix cannot check" in question.message
    shown_hints = [(h.position.line, str(h.label)) for h in await hints(client, uri)]
    assert any(line == 3 and "[1] 40" in label for line, label in shown_hints), shown_hints


async def test_a_python_reply_in_an_r_document_is_not_inserted(
    r_kernel: None, client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "# ai: the squares of 1 to 3\n"
    uri = open_doc(client, folder / "squares.R", source, language="r")
    model.script(code("[n * n for n in range(1, 4)]"))
    answer = await generate(client, uri, 0)
    assert answer["status"] == "error" and "is python, not R" in answer["message"], answer
    assert text(client, uri) == source and client.edits == []


async def test_run_and_fix_in_r_fixes_the_function_where_r_raised_and_reruns_its_caller(
    r_kernel: None, client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "# %%\nhalf <- function(n) stop('not yet: ', n)\n# %%\ny <- 8\nhalf(y)\n"
    uri = open_doc(client, folder / "fix.R", source, language="r")
    model.script(Reply("```r\nhalf <- function(n) n / 2\n```"))
    client.answer = "Run"
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer == {"status": "fixed", "attempts": 1}, answer
    assert text(client, uri) == source.replace("stop('not yet: ', n)", "n / 2")
    system, asked = model.requests[0]["messages"][0]["content"], model.user_text(0)
    assert "You fix R code" in system
    assert "Error in half(y): not yet: 8" in asked and "```r\nhalf <- function" in asked
    assert "half(y)" in asked  # the caller, as the test the fix must pass
    await asyncio.sleep(0.3)
    assert errors(client, uri) == []
    shown_hints = [(h.position.line, str(h.label)) for h in await hints(client, uri)]
    assert any(line == 4 and "[1] 4" in label for line, label in shown_hints), shown_hints


async def test_generate_in_typescript_writes_under_a_slash_prompt(
    deno_kernel: None, client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = "// %%\nconst xs = [1, 2, 3];\n// ai: the sum of xs\n"
    uri = open_doc(client, folder / "main.ts", source, language="typescript")
    model.script(Reply("```ts\nxs.reduce((a, b) => a + b, 0)\n```"))
    answer = await generate(client, uri, 2)
    assert answer["status"] == "ok", answer
    assert text(client, uri) == source + "xs.reduce((a, b) => a + b, 0)\n"
    system = model.requests[0]["messages"][0]["content"]
    assert "You write TypeScript code" in system and "```typescript" in system
    assert "// … (" not in model.user_text(0) or "# … (" not in model.user_text(0)


async def test_a_module_open_with_unsaved_changes_is_named_when_its_fix_is_not_applied(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """Issue 47, S3 8: the fix is made for the module file as it is on disk; the editor
    holds it with other, unsaved text: the fix is not applied over those changes, and the
    message says why (not "the editor did not apply the fix")."""
    await start(client, folder, options(model), "visual_studio_code")
    (folder / "lib").mkdir()
    module = folder / "lib" / "stats_util.py"
    broken = "def mean(values):\n    return sum(values) / values.count()\n"
    open_doc(client, module, broken + "\n# the user's unsaved note\n")
    module.write_text(broken)  # (open_doc saved the note: it is unsaved now)
    source = "from lib.stats_util import mean\n# %%\nprint(mean([1, 2, 3]))\n"
    uri = open_doc(client, folder / "job.py", source)
    model.script(code("def mean(values):\n    return sum(values) / len(values)"))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer["status"] == "error", answer
    assert answer["message"] == (
        "runfix: the fix was not applied: lib/stats_util.py is open in the editor with "
        "changes that are not in the file it was made for (save or revert them, then fix "
        "again)."
    )
    assert module.read_text() == broken and text(client, uri) == source
