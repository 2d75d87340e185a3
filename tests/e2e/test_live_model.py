"""What runfix promises whatever the model says, against a real model (issue 35).

Qwen2.5-Coder-0.5B-Instruct served on loopback by llama-cpp-python (`scripts/model` sets
both up, cached outside the clone; `tests/support/real_model.py`), or the endpoint named by
`RUNFIX_TEST_MODEL_URL` and `RUNFIX_TEST_MODEL` (and `RUNFIX_TEST_MODEL_KEY_ENV`, the
variable holding its key). A proxy in front of it sees every request. The model's words
are not asserted — a 0.5B model may or may not fix a bug — only runfix's guarantees: the
document is never left unparsable, or with a prompt split from its body, or with runfix's
own request text in it; a fix lands where the error was, the call that reached it intact;
every request bounded; each answer within its budget; a cancel stops the stream.
"""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.text.cells import is_marker
from lsp_server.text.prompts import prompt_at
from tests.conftest import change, errors, hints, init_params, open_doc, quick_fixes, run
from tests.e2e.test_e2e_model import command, generate, generating, progress_messages, text
from tests.kernel.test_cli_fix import CROSS
from tests.support import real_model
from tests.support.agent_client import agent, tool
from tests.support.real_model import LIVE_CAP, LIVE_TIMEOUT, Live

TIMEOUT = LIVE_TIMEOUT
CAP = LIVE_CAP

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def bounded(seen: real_model.Seen, most: int = CAP) -> None:
    """Every request asked for at most `most` tokens of answer."""
    assert seen.requests, "no request reached the model"
    for request in seen.requests:
        bound = request.get("max_tokens") or request.get("max_completion_tokens")
        assert isinstance(bound, int) and 0 < bound <= most, request


async def test_live_generate_keeps_the_prompt_with_its_body_and_an_agent_runs_it(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    source = "xs = [3, 1, 2]\n# %%\n# ai: print xs sorted\n"
    path = folder / "gen.py"
    path.write_text(source)
    uri = open_doc(client, path, source)
    began = time.monotonic()
    answer = await generate(client, uri, 2, run_too=True)
    assert time.monotonic() - began < TIMEOUT + 30
    after = text(client, uri)
    assert parses(after), after
    assert "<<<" not in after and "lines left out" not in after
    assert sum(is_marker(line) for line in after.splitlines()) == 1  # no cell was added
    bounded(seen, 600)
    if answer["status"] != "ok":
        assert after == source, answer  # nothing half-written
        return
    lines = after.splitlines(keepends=True)
    prompt = prompt_at(lines, 2, ["ai:"])
    assert prompt is not None and prompt.has_body and prompt.body_last == len(lines) - 1
    assert any("the model is reading the prompt" in m for m in progress_messages(client))
    # An agent runs the generated cell in the same kernel (consent given in the editor).
    client.answer = "Allow for this session"
    path.write_text(after)
    async with agent("live-agent") as session:
        ran = await asyncio.wait_for(
            tool(session, "run_lines", path=str(path), first=4, last=len(lines)), TIMEOUT
        )
    assert ran.get("status") in ("ok", "error"), ran


async def test_live_run_and_fix_lands_where_the_error_was(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    uri = open_doc(client, folder / "cross.py", CROSS)
    began = time.monotonic()
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert time.monotonic() - began < 3 * (TIMEOUT + 30)
    after = text(client, uri)
    assert parses(after), after
    lines, was = after.splitlines(), CROSS.splitlines()
    # The call that reached the bug is never rewritten; the cells around are as they were.
    assert lines[:2] == was[:2] and lines[-2:] == was[-2:], after
    assert "<<<" not in after
    bounded(seen, 256)  # the function is short: so is every answer asked for
    if answer["status"] == "fixed":
        assert errors(client, uri) == []
        assert lines[2] == "def average(values):" or lines[2].startswith("def average(")
    else:
        assert after == CROSS, answer


R_CROSS = "# %%\nhalf <- function(n) {\n  stop('not written yet: ', n)\n}\n# %%\ny <- 8\nhalf(y)\n"


async def test_live_run_and_fix_in_r_asks_in_r_and_keeps_the_caller(
    r_kernel: None, client: LanguageClient, folder: Path, live_model: Live
) -> None:
    """Issue 38: an R document's fix is asked for in R, lands in the function R says raised,
    and leaves the call that reached it as it was; every request bounded."""
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    uri = open_doc(client, folder / "cross.R", R_CROSS, language="r")
    client.answer = "Run"  # model-written R is run once looked at: the test looks
    began = time.monotonic()
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert time.monotonic() - began < 3 * (TIMEOUT + 30)
    after = text(client, uri)
    lines, was = after.splitlines(), R_CROSS.splitlines()
    assert lines[-3:] == was[-3:], after  # the calling cell, untouched
    assert sum(is_marker(line) for line in lines) == 2 and lines[0] == "# %%", after
    assert "<<<" not in after and "```" not in after and "lines left out" not in after
    bounded(seen, 256)
    system = seen.requests[0]["messages"][0]["content"]
    assert "You fix R code" in system and "```r" in system
    if answer["status"] == "fixed":
        assert errors(client, uri) == []
    else:
        assert after == R_CROSS, answer


async def test_live_run_and_fix_on_a_selection_keeps_the_failing_statement(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    source = 'import math\n# %%\nside = math.root(16)\nprint("side", side)\n'
    uri = open_doc(client, folder / "side.py", source)
    selection = {"start": {"line": 1, "character": 0}, "end": {"line": 3, "character": 19}}
    answer = await command(client, "runfix.runAndFix", {"uri": uri, "range": selection})
    after = text(client, uri)
    assert parses(after), after
    assert after.startswith("import math\n") and "<<<" not in after
    bounded(seen)
    if answer["status"] == "fixed":  # fixed means the failing code is there and ran
        assert "side =" in after and 'print("side", side)' in after, after
        assert [h.label for h in await hints(client, uri)] or errors(client, uri) == []
    else:
        assert after == source, answer


FIXCHECK_DOC = """\
# %% load
rows = [{"item": "tea", "price": 3.5, "qty": 2}, {"item": "jam", "price": 5.0, "qty": 4}]
# %% table
table = {r["item"]: r["price"] * r["qty"] for r in rows}
# %% report
print(table["tea"])
# %% seen
seen = globals().get("seen", 0) + 1
seen
"""
TABLE = 3
BROKEN = 'table = {r["name"]: r["price"] * r["qty"] for r in rows}'


async def test_live_fix_check_offers_what_it_checked_and_never_touches_the_users_kernel(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    seen = live_model.proxy.watch()
    params = init_params(
        folder, "visual_studio_code", live_model.options(fix={"maxAttempts": 2}, results="both")
    )
    await client.initialize_session(params)
    uri = open_doc(client, folder / "sales.py", FIXCHECK_DOC)
    assert (await run(client, uri))["status"] == "ok"
    old = FIXCHECK_DOC.splitlines()[TABLE]
    change(client, uri, 2, (TABLE, 0), (TABLE, len(old)), BROKEN)
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert (await run(client, uri, TABLE, TABLE))["status"] == "error"
    [action] = [a for a in await quick_fixes(client, uri) if a.title == "Fix with model"]
    resolved = await client.code_action_resolve_async(action)
    if resolved.edit is not None:
        assert any(
            word in resolved.title for word in ("verified", "breaks", "not checked", "checked")
        ), resolved.title
    else:
        assert resolved.disabled is not None and "not fixed" in resolved.disabled.reason
    assert BROKEN in text(client, uri)  # resolving offers; it applies nothing
    probe = open_doc(client, folder / "probe.py", "seen\n")
    assert (await run(client, probe))["status"] == "ok"
    assert [h.label for h in await hints(client, probe)] == ["→ 1"]  # the checks ran elsewhere
    bounded(seen)


async def test_live_cancel_stops_the_stream_at_once(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    source = "# ai: define 40 functions f1 to f40, each returning its number, one per line\n"
    uri = open_doc(client, folder / "long.py", source)
    request = generating(client, uri, 0)

    def streaming() -> list[Any]:
        return [
            token
            for token, reports in client.progress_reports.items()
            if any(
                str(getattr(r, "message", "")).startswith("Generating: ")
                and "reading" not in str(getattr(r, "message", ""))
                for r in reports
            )
        ]

    deadline = time.monotonic() + TIMEOUT
    while not streaming() and time.monotonic() < deadline and not request.done():
        await asyncio.sleep(0.05)
    if request.done():
        pytest.skip("the model answered before it could be cancelled")
    [token] = streaming()
    began = time.monotonic()
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    answer = await asyncio.wait_for(request, 10)
    assert answer["status"] == "cancelled", answer
    assert time.monotonic() - began < 3
    assert text(client, uri) == source
    for _ in range(200):  # the proxy sees the client hang up on the stream
        if seen.aborted:
            break
        await asyncio.sleep(0.05)
    assert seen.aborted == 1
    bounded(seen, 600)


FRESH = {
    # issue 45's kinds, as the live bench's fresh tasks have them
    "index": (
        "def pairs(xs):\n    return [(xs[i], xs[i + 1]) for i in range(len(xs))]\n# %%\n"
        "print(pairs([1, 2, 3]))\n",
        "`xs[i + 1]`: the index `i + 1` is 3, but `xs` has 3 items (indexes 0 to 2).",
    ),
    "plus": (
        'def describe(name, age):\n    return name + " is " + age + " years old"\n# %%\n'
        'print(describe("Ada", 36))\n',
        '`name + " is " + age`: `age` is an int (36).',
    ),
    "none": (
        "def normalise(xs):\n    total = sum(xs)\n    out = [x / total for x in xs]\n# %%\n"
        "weights = normalise([1, 1, 2])\nprint(sorted(range(3), key=lambda i: weights[i]))\n",
        "`normalise` (line 1) has no `return` of a value, so it returns None.",
    ),
}


@pytest.mark.parametrize("kind", sorted(FRESH))
async def test_live_the_fix_request_carries_what_the_kernel_held(
    client: LanguageClient, folder: Path, live_model: Live, kind: str
) -> None:
    """Issue 45: a fresh task of each kind against the real model. What runfix promises,
    whatever the model answers: the request says what the kernel held, the fix lands in the
    function (the calling cell untouched), every request is bounded, and a fix that is
    reported ran clean; the document is otherwise left as it was."""
    source, fact = FRESH[kind]
    seen = live_model.proxy.watch()
    await client.initialize_session(init_params(folder, options=live_model.options()))
    uri = open_doc(client, folder / f"{kind}.py", source)
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    after = text(client, uri)
    assert parses(after), after
    assert fact in "\n".join(m["content"] for m in seen.requests[0]["messages"])
    calling = source.split("# %%\n")[1]
    assert after.endswith("# %%\n" + calling), after  # the calling cell, untouched
    assert "<<<" not in after and "```" not in after
    bounded(seen, 256)
    assert len(seen.requests) <= 3
    if answer["status"] == "fixed":
        assert errors(client, uri) == []
    else:
        assert after == source, answer
        assert "Reply" not in answer.get("message", "")  # the user's words, not the model's


async def test_live_a_request_with_n_gets_n_choices_at_once(live_model: Live) -> None:
    """Issue 69: the local model answers one request's `n` (llama.cpp's server, its slots),
    sampled: that is what a fix's candidates are asked as."""
    seen = live_model.proxy.watch()
    answer = await asyncio.to_thread(
        real_model.chat_choices,
        live_model.proxy.url,
        live_model.name,
        [{"role": "user", "content": "Write a Python expression that adds 2 and 3."}],
        32,
        3,
    )
    assert len(answer) == 3 and all(isinstance(a, str) for a in answer)
    assert len(seen.requests) == 1 and seen.requests[0]["n"] == 3


async def test_live_run_and_fix_with_candidates_at_once_keeps_every_promise(
    client: LanguageClient, folder: Path, live_model: Live
) -> None:
    """Four candidates in one round (the request, the paste's, two sampled): whatever they
    say, the fix lands where the error was, the caller intact, every request bounded (the
    paste's by the whole file), and what is applied ran clean."""
    seen = live_model.proxy.watch()
    options = live_model.options()
    options["model"] = {**options["model"], "candidates": 4}
    await client.initialize_session(init_params(folder, options=options))
    uri = open_doc(client, folder / "cross.py", CROSS)
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    after = text(client, uri)
    assert parses(after), after
    lines, was = after.splitlines(), CROSS.splitlines()
    assert lines[:2] == was[:2] and lines[-2:] == was[-2:], after
    bounded(seen, CAP)
    assert any(r.get("n") == 2 for r in seen.requests)  # the sampled ones: one request
    if answer["status"] == "fixed":
        assert errors(client, uri) == []
    else:
        assert after == CROSS, answer
