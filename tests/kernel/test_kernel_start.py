"""A kernel start on a busy machine: slow is waited for, never a failure (issue 58, S2)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor import RunRequest, RunStatus
from executor.base import ExecutorUnavailable
from executor.configs import LocalConfig
from executor.local import LocalKernel

STARTS = 30


async def test_a_read_that_timed_out_leaves_no_timeout_on_the_channel(tmp_path: Path) -> None:
    """The kernel's answer to the helper's load comes later than the last timed read of IOPub
    waited (wait_for_ready's 0.2 s): jupyter_client's poller took that read's timeout as its
    own and raised `zmq.Again` from the start (7 of 34 starts on a loaded machine)."""
    kernel = LocalKernel(tmp_path, LocalConfig(sys.executable))
    try:
        await kernel.start()
        channels = kernel._channels
        with pytest.raises(queue.Empty):
            await channels.get_iopub_msg(timeout=0.05)
        reply = await channels.execute_interactive(
            "import time; time.sleep(0.3)", silent=True, store_history=False, timeout=10
        )
        assert reply["content"]["status"] == "ok"
    finally:
        await kernel.shutdown()


def _busy() -> None:
    while True:
        pass


@pytest.fixture
def busy_cores() -> Iterator[int]:
    """A busy loop on every core (and one more), for the test's length."""
    count = (os.cpu_count() or 2) + 1
    loops = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(count)]
    for loop in loops:
        loop.start()
    try:
        yield count
    finally:
        for loop in loops:
            loop.terminate()
        for loop in loops:
            loop.join()


async def test_thirty_starts_with_every_core_busy_all_start(
    tmp_path: Path, busy_cores: int
) -> None:
    failures: list[str] = []
    for number in range(STARTS):
        kernel = LocalKernel(tmp_path, LocalConfig(sys.executable))
        try:
            await kernel.start()
            outcome = await kernel.execute(RunRequest("1 + 1", str(tmp_path / "x.py"), timeout=60))
            if outcome.status != RunStatus.OK:
                failures.append(f"start {number}: the run ended {outcome.status.value}")
        except ExecutorUnavailable as exc:
            failures.append(f"start {number}: {exc}")
        finally:
            await kernel.shutdown()
    assert failures == [], f"{len(failures)} of {STARTS} starts failed with {busy_cores} loops"
