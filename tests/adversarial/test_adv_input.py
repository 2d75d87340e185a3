"""`input()` and `getpass()` in a run: asked through the client when it can ask
(`experimental.runfixInput`), a clear error when it cannot."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.conftest import errors, hints, init_params, open_doc, run

ASKS = """\
name = input('Your name? ')
from getpass import getpass
secret = getpass('Key: ')
(name, len(secret))
"""


def _asking(client: LanguageClient, answers: list[str | None]) -> list[Any]:
    """Answer `runfix/input` from `answers`, in order; the requests seen."""
    asked: list[Any] = []

    @client.feature("runfix/input")
    async def answer(params: Any) -> Any:
        asked.append(params)
        await asyncio.sleep(0.2)  # a person takes a moment
        value = answers.pop(0)
        return None if value is None else {"value": value}

    return asked


def _can_ask(folder: Path, options: dict[str, Any] | None = None) -> lsp.InitializeParams:
    params = init_params(folder, options=options)
    params.capabilities = attrs.evolve(params.capabilities, experimental={"runfixInput": True})
    return params


async def test_input_and_getpass_are_asked_through_the_client(
    client: LanguageClient, folder: Path, executor: str
) -> None:
    asked = _asking(client, ["Ada", "s3cret"])
    await client.initialize_session(_can_ask(folder, {"executor": executor, "timeout": 1}))
    uri = open_doc(client, folder / "ask.py", ASKS)

    answer = await run(client, uri)

    assert answer["status"] == "ok", client.diagnostics.get(uri)
    assert [(a.prompt, a.password) for a in asked] == [("Your name? ", False), ("Key: ", True)]
    # The time spent answering does not count against the 1 s timeout.
    assert [h.label for h in await hints(client, uri)] == ["→ ('Ada', 6)"]


async def test_a_declined_input_cancels_the_run(client: LanguageClient, folder: Path) -> None:
    _asking(client, [None])
    await client.initialize_session(_can_ask(folder))
    uri = open_doc(client, folder / "ask.py", "x = input('Continue? ')\n")
    answer = await run(client, uri)
    assert answer["status"] == "cancelled"
    assert errors(client, uri) == []


async def test_a_client_that_cannot_ask_gets_a_clear_error(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "ask.py", "x = input('Name? ')\n")
    answer = await run(initialized, uri)
    assert answer["status"] == "error"
    [error] = errors(initialized, uri)
    assert error.message.startswith("StdinNotImplementedError")


async def test_an_input_nobody_answers_ends_its_run_and_frees_the_folder(
    client: LanguageClient, folder: Path
) -> None:
    away = asyncio.Event()  # the user is away until the test ends

    @client.feature("runfix/input")
    async def never(params: Any) -> Any:
        await away.wait()

    await client.initialize_session(_can_ask(folder, {"inputTimeout": 2}))
    uri = open_doc(client, folder / "ask.py", "x = input('Continue? ')\n")
    other = open_doc(client, folder / "other.py", "6 * 7\n")
    asking = asyncio.ensure_future(run(client, uri))
    await asyncio.sleep(0.5)
    queued = asyncio.ensure_future(run(client, other))

    answer = await asyncio.wait_for(asking, 15)

    assert answer["status"] == "cancelled"
    assert (await asyncio.wait_for(queued, 15))["status"] == "ok"  # the folder is free again
    assert any("no answer to input() within 2 s" in m.message for m in client.messages)
    # Meanwhile the queued run said what it waited for.
    said = [str(r.message) for rs in client.progress_reports.values() for r in rs if r.message]
    assert any("it waits for input() at" in m and "ask.py:1" in m for m in said), said
    away.set()


async def test_an_answer_of_the_wrong_shape_is_a_refusal_not_a_traceback(
    client: LanguageClient, folder: Path
) -> None:
    @client.feature("runfix/input")
    async def odd(params: Any) -> Any:
        return {"value": 42}

    await client.initialize_session(_can_ask(folder))
    uri = open_doc(client, folder / "ask.py", "x = input('Name? ')\n")
    answer = await run(client, uri)
    assert answer["status"] == "cancelled"
    assert not any("could not be handled" in m.message for m in client.log_messages)


async def test_a_wrong_typed_answer_says_so_not_that_the_kernel_was_interrupted(
    client: LanguageClient, folder: Path
) -> None:
    """Issue 36, S3 14."""

    @client.feature("runfix/input")
    async def odd(params: Any) -> Any:
        return {"value": ["not", "text"]}

    await client.initialize_session(_can_ask(folder))
    uri = open_doc(client, folder / "ask.py", "x = input('Name? ')\n")
    answer = await run(client, uri)
    assert answer["status"] == "cancelled"
    assert "input() got no answer" in answer["message"], answer
    assert any(
        "answered input() with something that is not text" in m.message for m in client.messages
    )


async def test_an_answer_after_the_timeout_is_dropped_without_a_traceback(
    client: LanguageClient, folder: Path
) -> None:
    """Issue 36, S3 14: the user answers after `inputTimeout`."""

    @client.feature("runfix/input")
    async def late(params: Any) -> Any:
        await asyncio.sleep(2.5)
        return {"value": "too late"}

    await client.initialize_session(_can_ask(folder, {"inputTimeout": 1}))
    uri = open_doc(client, folder / "ask.py", "x = input('Name? ')\n")
    assert (await run(client, uri))["status"] == "cancelled"
    await asyncio.sleep(2.5)  # the late answer arrives
    other = open_doc(client, folder / "other.py", "6 * 7\n")
    assert (await run(client, other))["status"] == "ok"
    logged = "\n".join(m.message for m in client.log_messages)
    assert "Traceback" not in logged and "InvalidStateError" not in logged, logged
