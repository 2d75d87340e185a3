"""Several candidates asked at once, over LSP (issue 69): one request's `n` choices, one
asked the paste's way, each run in its own jail, the one applied chosen by what they print;
where they disagree the editor is told what each prints and nothing is applied. A real
`runfix serve`, a real kernel, the real `openai` client against a scripted endpoint that
answers `n`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from lsp_server.model.paste import PASTE_SYSTEM
from tests.conftest import open_doc, run
from tests.e2e.test_e2e_model import command, generate, options, shown, start, text
from tests.support.model_server import ModelServer, Reply, code

pytestmark = pytest.mark.model


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


def pasted(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"] == PASTE_SYSTEM)


def sampled(body: dict[str, Any]) -> bool:
    return not pasted(body) and (body.get("temperature") or 0) > 0


def asked(body: dict[str, Any]) -> bool:
    return not pasted(body) and not sampled(body)


def when(reply: Reply, test: Any) -> Reply:
    reply.when = test
    return reply


SOURCE = "prices = [3, 4]\n# %%\ntotal = sum(cost)\nprint(total)\n"
RANGE = {"start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 0}}


async def test_the_fix_most_candidates_agree_on_is_applied_and_n_is_one_request(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"candidates": 4}))
    uri = open_doc(client, folder / "agree.py", SOURCE)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(
        when(code("total = sum(prices) * 2\nprint(total)"), asked),
        when(code("prices = [3, 4]\n# %%\ntotal = sum(prices)\nprint(total)"), pasted),
        when(code("total = 0\nfor p in prices:\n    total += p\nprint(total)"), sampled),
        when(code("total = sum(prices)\nprint(total)"), sampled),
    )
    answer = await command(client, "runfix.runAndFix", {"uri": uri, "range": RANGE})
    assert answer == {"status": "fixed", "attempts": 1, "says": "7"}
    assert text(client, uri) == "prices = [3, 4]\n# %%\ntotal = sum(prices)\nprint(total)\n"
    assert len(model.requests) == 3  # at once: the request, the paste's, and one with n=2
    assert sorted(r.get("n", 1) for r in model.requests) == [1, 1, 2]
    [paste] = [r for r in model.requests if pasted(r)]
    assert "NameError" in paste["messages"][1]["content"] and "sum(cost)" in str(paste)


async def test_candidates_that_disagree_are_shown_and_nothing_is_applied(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"candidates": 2}))
    uri = open_doc(client, folder / "differ.py", SOURCE)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(
        when(code("total = sum(prices) * 2\nprint(total)"), asked),
        when(code("prices = [3, 4]\n# %%\ntotal = sum(prices)\nprint(total)"), pasted),
    )
    answer = await command(client, "runfix.runAndFix", {"uri": uri, "range": RANGE})
    assert answer["status"] == "failed" and answer["attempts"] == 1
    assert text(client, uri) == SOURCE and client.edits == []  # nothing without a look
    said = shown(client)
    assert "disagree on what the code prints" in said
    assert "1 prints `14`" in said and "1 prints `7`" in said
    assert len(model.requests) == 2  # not asked again: one more answer is no judge


async def test_generate_inserts_what_most_candidates_agree_prints(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"candidates": 3}))
    source = "nums = [2, 3]\n# %%\n# ai: print the sum of the squares of nums\n"
    uri = open_doc(client, folder / "gen.py", source)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(
        when(code("print(sum(nums) ** 2)"), asked),
        when(code(source + "print(sum(n * n for n in nums))"), pasted),
        when(code("print(sum([n ** 2 for n in nums]))"), sampled),
    )
    answer = await generate(client, uri, 2)
    assert answer["status"] == "ok"
    body = text(client, uri).removeprefix(source)
    assert body in ("print(sum(n * n for n in nums))\n", "print(sum([n ** 2 for n in nums]))\n")
    await asyncio.sleep(0.1)
    assert "disagree" not in shown(client)


async def test_generate_says_when_its_candidates_disagree(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, model={"candidates": 2}))
    source = "nums = [2, 3]\n# %%\n# ai: print the sum of the squares of nums\n"
    uri = open_doc(client, folder / "differ.py", source)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(
        when(code("print(sum(nums) ** 2)"), asked),
        when(code(source + "print(sum(n * n for n in nums))"), pasted),
    )
    answer = await generate(client, uri, 2)
    assert answer["status"] == "ok"  # inserted, for the user to look at
    said = shown(client)
    assert "disagree on what the code prints" in said and "look at what it prints" in said
    assert "1 prints `25`" in said and "1 prints `13`" in said
