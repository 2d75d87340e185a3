""" "Fixed" a person can trust, in the editor (issue 59): Run and fix holds a candidate that
silences the error — the document unchanged, the message naming the rule with the change as
a diff to apply by hand — and a real fix says what the fixed code now prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from tests.conftest import open_doc, run
from tests.e2e.test_e2e_model import command, options, shown, start, text
from tests.support.model_server import ModelServer, code

pytestmark = pytest.mark.model

SOURCE = 'unique = set(["c", "a", "b", "a"])\n# %%\nprint("first", unique[0])\n'


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


async def test_a_silencing_candidate_is_held_and_shown_as_a_diff(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model, fix={"maxAttempts": 1}))
    uri = open_doc(client, folder / "first.py", SOURCE)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(code('print("first", unique)'))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer["status"] == "failed", answer
    assert text(client, uri) == SOURCE and client.edits == []
    said = shown(client)
    assert "removes the operation that raised (`unique[0]`)" in said, said
    assert "--- a/first.py\n+++ b/first.py\n" in said
    assert '\n-print("first", unique[0])\n+print("first", unique)' in said


async def test_a_fix_says_what_the_fixed_code_now_prints(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    uri = open_doc(client, folder / "first.py", SOURCE)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    model.script(code('print("first", sorted(unique)[0])'))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer == {"status": "fixed", "attempts": 1, "says": "first a"}
    assert 'print("first", sorted(unique)[0])' in text(client, uri)
    logged = [m.message for m in client.log_messages]
    assert any("fixed on attempt 1; it now prints `first a`" in m for m in logged), logged
