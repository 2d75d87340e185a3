"""The same scenarios against a real model endpoint, when one is configured.

Set `RUNFIX_TEST_MODEL_URL` (an OpenAI-compatible base URL, e.g.
http://localhost:11434/v1), `RUNFIX_TEST_MODEL` (the model name) and, if the
endpoint needs one, `RUNFIX_TEST_MODEL_KEY_ENV` (the variable holding its key).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from tests.conftest import errors, init_params, open_doc
from tests.e2e.test_e2e_model import command, generate, text

URL = os.environ.get("RUNFIX_TEST_MODEL_URL")
NAME = os.environ.get("RUNFIX_TEST_MODEL")

pytestmark = [
    pytest.mark.model,
    pytest.mark.skipif(
        not (URL and NAME), reason="set RUNFIX_TEST_MODEL_URL and RUNFIX_TEST_MODEL"
    ),
    pytest.mark.timeout(300),
]


def live_options() -> dict[str, Any]:
    model: dict[str, Any] = {"baseUrl": URL, "name": NAME, "timeout": 120}
    if key_env := os.environ.get("RUNFIX_TEST_MODEL_KEY_ENV"):
        model["apiKeyEnv"] = key_env
    return {"model": model}


async def test_live_generate_and_run(client: LanguageClient, folder: Path) -> None:
    await client.initialize_session(init_params(folder, options=live_options()))
    uri = open_doc(client, folder / "live.py", "# ai: print the sum of the squares of 1 to 10\n")
    answer = await generate(client, uri, 0, run_too=True)
    assert answer["status"] == "ok", answer
    assert answer["run"]["status"] == "ok", text(client, uri)
    assert len(text(client, uri).splitlines()) > 1


async def test_live_run_and_fix(client: LanguageClient, folder: Path) -> None:
    await client.initialize_session(init_params(folder, options=live_options()))
    uri = open_doc(client, folder / "fix.py", "values = [3, 4]\nprint(sum(valeus))\n")
    answer = await command(client, "runfix.runAndFix", {"uri": uri})
    assert answer["status"] == "fixed", answer
    assert "valeus" not in text(client, uri)
    assert errors(client, uri) == []
