"""Issue 60's bad input and limits, through `runfix dap` against a real `runfix serve` and
ipykernel: a breakpoint outside the folder, a debugged cell that loops for ever (pause, then
stop), a run asked for while the kernel is stopped (it waits, and runs once the session
lets go), the kernel restarted under a stop: each a clear word, no hang, the kernel's state
kept where it can be."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from tests.conftest import SERVER_ENV, hints, open_doc, run
from tests.e2e.test_debug import DOC, debugged
from tests.support.dap_client import dap


async def test_a_breakpoint_outside_the_folder_says_so(
    initialized: Any, folder: Path, tmp_path: Path
) -> None:
    _, path = await debugged(initialized, folder)
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("x = 1\n")
    async with dap(SERVER_ENV) as client:
        await client.start(path, 10)
        placed = await client.request(
            "setBreakpoints", source={"path": str(elsewhere)}, breakpoints=[{"line": 1}]
        )
        [point] = placed["breakpoints"]
        assert not point["verified"] and "outside project" in point["message"], point


LOOP = "# %% setup\nn = 0\n# %% spin\nwhile True:\n    n += 1\n"


async def test_a_cell_that_loops_for_ever_pauses_and_stops_and_the_kernel_keeps_its_state(
    initialized: Any, folder: Path
) -> None:
    path = folder / "spin.py"
    uri = open_doc(initialized, path, LOOP)
    assert (await run(initialized, uri, 0, 1))["status"] == "ok"
    async with dap(SERVER_ENV) as client:
        await client.start(path, 4)
        await client.request("configurationDone")
        await asyncio.sleep(1.0)
        await client.request("pause", threadId=1)
        stop = await client.stopped()
        assert stop["reason"] == "pause" and stop["frame"]["line"] in (4, 5), stop
        await client.request("terminate")
        await client.event("terminated", stop["at"])
    probe = open_doc(initialized, folder / "probe.py", "n > 0\n")
    assert (await run(initialized, probe))["status"] == "ok"
    assert str((await hints(initialized, probe))[0].label) == "→ True"  # state kept


async def test_a_run_asked_for_during_a_stop_waits_and_runs_once_the_session_lets_go(
    initialized: Any, folder: Path
) -> None:
    _, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        await client.stop_at(path, 10, path, 5)
        other = open_doc(initialized, folder / "other.py", "21 * 2\n")
        waiting = asyncio.ensure_future(run(initialized, other))
        await asyncio.sleep(1.5)
        assert not waiting.done()  # behind the stopped run, in the folder's queue
        await client.request("disconnect")
        answer = await asyncio.wait_for(waiting, 30)
    assert answer["status"] == "ok"
    assert str((await hints(initialized, other))[0].label) == "→ 42"
    # Meanwhile the queued run said what it waited for.
    said = [str(r.message) for rs in initialized.progress_reports.values() for r in rs]
    assert any("stopped in a debugger" in m for m in said), said


async def test_a_restart_under_a_stop_ends_the_session_without_a_hang(
    initialized: Any, folder: Path
) -> None:
    uri, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        stop = await client.stop_at(path, 10, path, 5)
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="runfix.restart", arguments=[{"uri": uri}])
        )
        await client.event("terminated", stop["at"])
        said = [e["body"]["output"] for e in client.events if e["event"] == "output"]
        assert any("restarted" in s or "cancelled" in s for s in said), said
    assert (await run(initialized, uri))["status"] == "ok"  # the kernel runs again, fresh


__all__ = ["DOC"]
