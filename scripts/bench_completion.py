#!/usr/bin/env python3
"""The live kernel where you type (issue 26): completion and hover from the kernel, timed over
LSP, against a raw `complete_request` on the same kernel in the same run.

A `runfix serve` runs a document that builds a 50-column DataFrame and a nested dict; then
`df["` is completed (and `df` hovered) many times with the kernel idle, and again while
a 10 s cell runs. The baseline is jupyter_client's own `complete_request` for the same
text, sent to the same kernel process (found by its connection file) on the main shell:
idle it is what a plain Jupyter completion costs; during the run it waits for the cell.

Usage: python scripts/bench_completion.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_wire import INLAY, Wire, ms, pct
from jupyter_client.asynchronous.client import AsyncKernelClient

SETUP = (
    "import pandas as pd\n"
    "df = pd.DataFrame({f'col_{i}': range(3) for i in range(50)})\n"
    "cfg = {'a': {'x': 1, 'y': 2}}\n"
)
TYPED = 'df["'


def connection_file(server_pid: int) -> Path:
    """The connection file of the kernel the server started (its child's `-f` argument)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if parent == str(server_pid) and b"-f" in args:
            return Path(args[args.index(b"-f") + 1].decode())
    raise RuntimeError("no kernel found under the server")


async def timed(work: Any, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        await work()
        times.append(time.perf_counter() - began)
    return times


def row(label: str, times: list[float]) -> str:
    return f"{label}: p50 {ms(statistics.median(times))}, p95 {ms(pct(times, 95))}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="requests per row")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="runfix-bench-completion-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        await wire.start(folder, {}, INLAY)
        text = SETUP + TYPED + "\n" + "import time\ntime.sleep(10)\n"
        uri = wire.open(folder / "live.py", text)
        line = SETUP.count("\n")
        answer = await wire.run(uri, range=_lines(0, line - 1))
        assert answer["status"] == "ok", answer
        assert wire.proc is not None
        raw = AsyncKernelClient()
        raw.load_connection_file(str(connection_file(wire.proc.pid)))
        raw.start_channels()
        await raw.wait_for_ready(timeout=30)
        position = {"line": line, "character": len(TYPED)}
        params = {"textDocument": {"uri": uri}, "position": position}

        async def ours() -> None:
            said = await wire.request("textDocument/completion", params)
            assert said and len(said["items"]) == 50, said

        async def hover() -> None:
            said = await wire.request(
                "textDocument/hover", {**params, "position": {"line": 1, "character": 0}}
            )
            assert said and "col_0" in said["contents"]["value"], said

        async def baseline() -> None:
            reply = await raw.complete(TYPED, len(TYPED), reply=True, timeout=30)
            assert reply["content"]["status"] == "ok"

        for work in (ours, hover, baseline):  # warm
            await timed(work, 10)
        idle_ours, idle_raw = [], []
        for _ in range(runs // 10):  # interleaved, ten at a time
            idle_ours += await timed(ours, 10)
            idle_raw += await timed(baseline, 10)
        idle_hover = await timed(hover, runs)

        running = asyncio.ensure_future(wire.run(uri, range=_lines(line + 1, line + 2)))
        await asyncio.sleep(0.5)
        busy_ours = await timed(ours, runs)
        busy_hover = await timed(hover, runs // 4)
        waited = time.perf_counter()
        await baseline()  # one: it waits for the cell
        busy_raw = time.perf_counter() - waited
        left = not running.done()
        await running
        raw.stop_channels()
        await wire.stop()

    ratio = statistics.median(idle_ours) / statistics.median(idle_raw)
    print(row("completion, kernel idle", idle_ours))
    print(row("raw complete_request, idle (IPython's completer)", idle_raw))
    print(f"  ratio of medians: {ratio:.2f}x (target ≤ 1.1x; p95 target ≤ 50 ms)")
    print(row("hover on a DataFrame, idle", idle_hover))
    print(row("completion during a 10 s run (subshell)", busy_ours) + " (target p95 ≤ 100 ms)")
    print(row("hover during the run", busy_hover))
    print(f"raw complete_request during the run: {ms(busy_raw)} (it waits for the cell)")
    print(f"the run was still going after the timed requests: {left}")


def _lines(first: int, last: int) -> dict[str, Any]:
    return {"start": {"line": first, "character": 0}, "end": {"line": last + 1, "character": 0}}


if __name__ == "__main__":
    asyncio.run(main())
