"""Issue 58 in the editor: what the editor's Run and fix and Generate send the model hides
every secret, and the model's code they run runs first in the jail, which asks "Run it in
the kernel / Don't run it" where the code tried something (issue 68) (a real `runfix serve`, a real
kernel, the real `openai` client against scripted replies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from tests.conftest import STRIPE_KEY, open_doc, run
from tests.e2e.test_e2e_model import command, generate, options, start, text
from tests.support.model_server import ModelServer, code

pytestmark = pytest.mark.model

CELL = (
    "import os\n"
    'api_key = os.environ["STRIPE_KEY"]\n'
    'password = "hunter2-xyz"\n'
    'token = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"\n'
    'headers = {"Authorization": "Bearer " + token}\n'
)
GITHUB = "ghp_0123456789abcdefghijklmnopqrstuvwxyz"
SECRETS = (STRIPE_KEY, "hunter2-xyz", GITHUB, GITHUB[4:20])


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


def leaked(model: ModelServer) -> list[str]:
    sent = json.dumps(model.requests)
    return [s for s in SECRETS if s in sent]


async def test_run_and_fix_sends_no_secret_and_its_fix_keeps_the_line_that_holds_one(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = CELL + "# %%\nprint(len(api_key) + quantity, password)\n"
    uri = open_doc(client, folder / "keys.py", source)
    assert (await run(client, uri, 0, 4))["status"] == "ok"
    # the model repeats the placeholder it was shown for the line's literal: put back
    model.script(code("print(len(api_key) + 1, password)"))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer == {"status": "fixed", "attempts": 1, "says": "33 hunter2-xyz"}
    assert leaked(model) == [], model.user_text(0)
    assert "<hidden: " in model.user_text(0) and "headers" in model.user_text(0)
    assert text(client, uri) == CELL + "# %%\nprint(len(api_key) + 1, password)\n"


async def test_generate_sends_no_secret(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    await start(client, folder, options(model))
    source = CELL + "# %% ai: print how long the key is\n"
    uri = open_doc(client, folder / "gen.py", source)
    assert (await run(client, uri, 0, 4))["status"] == "ok"
    model.script(code("print(len(api_key))"))
    await generate(client, uri, 5)
    assert leaked(model) == [], model.user_text(0)
    assert "password" in model.user_text(0)  # the name is still said


async def test_run_and_fix_stops_a_candidate_the_scan_let_through_and_asks(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """`random._os.spawnlp` (issue 58, S2): stopped where it acts; the user is asked; not
    allowed, the model is told why and its next candidate fixes the cell."""
    await start(client, folder, options(model))
    marker = folder / "spawned"
    source = "items = [1, 2]\n# %%\nprint(sum(things))\n"
    uri = open_doc(client, folder / "spawn.py", source)
    evil = (
        f"import random\nrandom._os.spawnlp(random._os.P_WAIT, 'touch', 'touch', {str(marker)!r})"
        "\nprint(sum(items))"
    )
    model.script(code(evil), code("print(sum(items))"))
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert not marker.exists()
    [question] = client.questions
    assert "the model's code (spawn.py:3) tried starting a process" in question.message
    assert "runfix's jail refused it, and it has not run in your kernel" in question.message
    assert [a.title for a in question.actions or []] == ["Run it in the kernel", "Don't run it"]
    assert "runfix held the model's code: it tried starting a process" in model.user_text(1)
    assert answer == {"status": "fixed", "attempts": 2, "says": "3"}
    assert text(client, uri) == "items = [1, 2]\n# %%\nprint(sum(items))\n"


@pytest.mark.parametrize("allowed", [False, True])
async def test_generate_and_run_holds_what_the_scan_let_through_unless_run_in_the_kernel(
    client: LanguageClient, folder: Path, model: ModelServer, allowed: bool
) -> None:
    """`typing.get_type_hints` of a string annotation that calls `os.system`: stopped, and
    run again once the user allows it once."""
    await start(client, folder, options(model))
    marker = folder / "made-by-a-hint"
    uri = open_doc(client, folder / "hints.py", "# ai: the hints of f\n")
    body = (
        "import typing\n"
        f"def f(x: \"__import__('os').system('touch {marker}')\"): pass\n"
        "typing.get_type_hints(f)"
    )
    model.script(code(body))
    client.answer = "Run it in the kernel" if allowed else None
    result = await generate(client, uri, 0, run_too=True)
    assert "typing.get_type_hints(f)" in text(client, uri)  # shown in the document either way
    [question] = client.questions
    assert "starting a process (touch)" in question.message
    assert marker.exists() == allowed
    assert result["run"]["status"] == ("ok" if allowed else "error"), result
