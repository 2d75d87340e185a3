"""Runs in flight when what runs them goes away: `shutdown` (every run is answered
`cancelled`, saying the server is shutting down, then `shutdown` itself, and `exit` ends
the server with 0) and a settings change that replaces the kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp

from tests.conftest import SERVER, SERVER_ENV, editor_like, init_params, open_doc, run


async def test_shutdown_answers_every_run_in_flight_then_itself(folder: Path) -> None:
    client: Any = pytest_lsp.make_test_lsp_client()
    editor_like(client)
    await client.start_io(*SERVER, env=SERVER_ENV)
    await client.initialize_session(init_params(folder))
    one = open_doc(client, folder / "one.py", "import time\ntime.sleep(30)\n")
    two = open_doc(client, folder / "two.py", "import time\ntime.sleep(30)\n")
    runs = [asyncio.ensure_future(run(client, uri)) for uri in (one, two)]
    await asyncio.sleep(1.5)  # the first runs, the second waits for the folder's run lock

    await asyncio.wait_for(client.shutdown_async(None), 30)

    answers = await asyncio.wait_for(asyncio.gather(*runs), 5)
    for answer in answers:
        assert answer["status"] == "cancelled", answer
        assert "shutting down" in answer["message"]
    client.exit(None)
    assert await asyncio.wait_for(client._server.wait(), 10) == 0


async def test_a_settings_change_that_replaces_the_kernel_answers_the_run_in_flight(
    client: Any, folder: Path
) -> None:
    """The interpreter (here the transport) changes mid-run: the kernel is replaced, and the
    run on the old one is answered `cancelled`, saying why, not left waiting."""
    client.set_configuration({"runfix": {"transport": "ipc"}})
    await client.initialize_session(init_params(folder))
    uri = open_doc(client, folder / "slow.py", "import time\ntime.sleep(20)\n")
    running = asyncio.ensure_future(run(client, uri))
    await asyncio.sleep(2)
    client.set_configuration({"runfix": {"transport": "tcp"}})
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))

    answer = await asyncio.wait_for(running, 10)

    assert answer["status"] == "cancelled", answer
    assert "settings changed" in answer["message"], answer
    assert (await run(client, uri, 0, 0))["status"] == "ok"  # the new kernel runs
