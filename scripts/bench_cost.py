#!/usr/bin/env python3
"""runfix's own cost per run: a kernel that answers at once (`null_kernel.py`, over the
same ZeroMQ transport as every kernel) run through `runfix serve` over LSP (JSON-RPC on
its stdio, as an editor speaks it) and through raw jupyter_client on the same kernelspec,
interleaved in blocks in the same run.

Printed: each side's median and p95 per trivial run, what runfix adds over raw async
jupyter_client, and beside it a bare JSON-RPC echo's round trip through the same client
(`echo_server.py`: what any server over this framing costs) with the ratio (target:
added ≤ 2× the echo); and where a run's time goes — from the request to the kernel
having the code, and from the kernel's idle to the answer — read from the kernel's own
clock (the machine's monotonic clock, shared by every process). `--profile`: then a `runfix serve`
under cProfile for the same runs, its functions called at least once per run, by their
own time per run (cProfile slows small functions; the order is what it is for), and the
run's steps — the command's context, each step around the run of a document's cells
(`lsp_server/services/range_steps.py`: admission, the lock, progress, …), the kernel, and each
step around a piece's run (`lsp_server/services/steps.py`) — by cumulative time per run.

Usage: python scripts/bench_cost.py [--blocks N] [--size N] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_wire import SERVER, Wire, pct, raw_async, raw_sync, stop_raw
from jupyter_client.manager import AsyncKernelManager, KernelManager

sys.path.insert(0, str(Path(__file__).parents[1]))
from executor.jupyter import JupyterKernel
from lsp_server.flow import Flow
from lsp_server.services import range_steps, steps
from lsp_server.services.desk import Desk
from lsp_server.services.gate import Gate
from lsp_server.services.queue import FolderQueue

NULL = "null"
ECHO = "echo_server.py"
PHASES: tuple[tuple[str, Any], ...] = (
    ("the command's context (Flow.where)", Flow.where),
    ("range step: Admitted (Gate.admit)", Gate.admit),
    ("range step: Published", range_steps.Published.around.__wrapped__),  # type: ignore[attr-defined]
    ("range step: Locked (FolderQueue.locked)", FolderQueue.locked),
    ("range step: Progressed", range_steps.Progressed.around.__wrapped__),  # type: ignore[attr-defined]
    ("range step: Progressed, each cell", range_steps.Progressed.before),
    ("range step: Confirmed, each cell", range_steps.Confirmed.before),
    ("range step: StopSaid, each cell", range_steps.StopSaid.after),
    ("the kernel's execute", JupyterKernel.execute),
    ("step: Announced", steps.Announced.before),
    ("step: Shaped", steps.Shaped.after),
    ("step: Kept", steps.Kept.after),
    ("step: Recorded", steps.Recorded.after),
    ("step: LateOutputs", steps.LateOutputs.before),
    ("the editor's redraw (Desk.done)", Desk.done),
)
"""The run's path, as (what, function), read from the profile by cumulative time."""
CODE = "x = 1"


def write_spec(root: Path) -> None:
    """The null kernel's kernelspec under `root/kernels/` (a Jupyter data folder)."""
    folder = root / "kernels" / NULL
    folder.mkdir(parents=True)
    argv = [sys.executable, str(Path(__file__).with_name("null_kernel.py")), "-f"]
    spec = {"argv": [*argv, "{connection_file}"], "display_name": NULL, "language": "lua"}
    (folder / "kernel.json").write_text(json.dumps(spec))


class Clock:
    """The null kernel's times file: each execute's arrival and answer."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, 0

    def since(self) -> list[tuple[float, float]]:
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        new, self.seen = lines[self.seen :], len(lines)
        return [(float(a), float(b)) for a, b in (line.split() for line in new)]


class Side:
    """One way of running: each run's total, and its time before the kernel had the code
    and after the kernel answered; how many executes the kernel saw per run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.total: list[float] = []
        self.before: list[float] = []
        self.after: list[float] = []
        self.executes = 0

    def add(self, began: float, ended: float, seen: list[tuple[float, float]]) -> None:
        self.total.append(ended - began)
        self.executes += len(seen)
        if seen:
            self.before.append(seen[0][0] - began)
            self.after.append(ended - seen[-1][1])

    def row(self) -> str:
        med, p95 = statistics.median(self.total), pct(self.total, 0.95)
        split = ""
        if self.before:
            before, after = statistics.median(self.before), statistics.median(self.after)
            split = f"  (to the kernel {us(before)}, back {us(after)})"
        per = self.executes / max(1, len(self.total))
        return f"  {self.name:<28} median {us(med)}  p95 {us(p95)}{split}  executes/run {per:.1f}"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:7.0f} µs"


async def measure(folder: Path, blocks: int, size: int) -> list[Side]:
    clock = Clock(folder / "times")
    os.environ["NULL_KERNEL_TIMES"] = str(clock.path)
    sync_km = KernelManager(kernel_name=NULL)
    sync_kc = raw_sync(sync_km)
    async_km = AsyncKernelManager(kernel_name=NULL)
    async_kc = await raw_async(async_km)
    wire, echo = Wire(), Wire()
    await wire.start(folder, {}, {})
    await echo.start(folder, {}, {}, [sys.executable, str(Path(__file__).with_name(ECHO))])
    uri = wire.open(folder / "trivial.lua", CODE + "\n", "lua")
    sides = [Side("raw jupyter_client (sync)"), Side("raw jupyter_client (async)")]
    sides += [Side("runfix.run over LSP"), Side("runfix.status over LSP (no kernel)")]
    sides += [Side("bare JSON-RPC echo")]
    status = {"command": "runfix.status"}

    def quiet(message: object) -> None:
        pass

    async def once(which: int, counted: bool = True) -> None:
        began = time.perf_counter()
        if which == 0:
            sync_kc.execute_interactive(CODE, store_history=False, output_hook=quiet)
        elif which == 1:
            await async_kc.execute_interactive(CODE, store_history=False, output_hook=quiet)
        elif which == 2:
            answer = await wire.run(uri)
            assert answer["status"] == "ok", answer
        elif which == 3:  # the LSP round trip alone: a request answered without the kernel
            await wire.request("workspace/executeCommand", status)
        else:  # any server's round trip over this framing, through the same client
            await echo.request("workspace/executeCommand", status)
        ended, seen = time.perf_counter(), clock.since()
        if counted:
            sides[which].add(began, ended, seen)

    try:
        for which in (0, 1, 2, 2, 2, 3, 4):  # the first of runfix's starts its kernel
            await once(which, counted=False)
        for _ in range(blocks):
            for which in range(len(sides)):
                for _ in range(size):
                    await once(which)
    finally:
        await wire.stop()
        await echo.stop()
        await stop_raw((sync_km, sync_kc), (async_km, async_kc))
    return sides


def record_write(folder: Path, runs: int) -> float:
    """Seconds one run's entry takes to be written to a folder's run record, as runfix
    writes it before it answers the run (one commit, SQLite's WAL): the median of `runs`."""
    from executor.events import RunOutcome, RunStatus, Value
    from lsp_server.outputs.results import build
    from lsp_server.record.store import RunRecord, entry

    record = RunRecord(folder / "record", 10_000)
    (folder / "record").mkdir()
    outcome = RunOutcome(RunStatus.OK, (Value({"text/plain": "1"}, None),), 0.001)
    results = build(outcome, path="t.py", lines=(CODE + "\n",), fallback_line=0, folder=None)
    seconds = []
    for _ in range(runs):
        began = time.perf_counter()
        record.add(entry("t.py", (0, 0), CODE, "user", outcome, results))
        record.flush()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds)


async def profile(folder: Path, runs: int) -> None:
    """A `runfix serve` profiled over `runs` runs (after its first ones: not its start):
    its functions called at least once per run, by own time per run."""
    stats = folder / "serve.prof"
    server = [sys.executable, str(Path(__file__).with_name("profiled_serve.py")), str(stats)]
    wire = Wire()
    await wire.start(folder, {}, {}, [*server, *SERVER[3:]])
    assert wire.proc is not None
    uri = wire.open(folder / "profiled.lua", CODE + "\n", "lua")
    try:
        for _ in range(5):
            await wire.run(uri)
        wire.proc.send_signal(signal.SIGUSR1)
        await asyncio.sleep(0.2)
        for _ in range(runs):
            await wire.run(uri)
        wire.proc.send_signal(signal.SIGUSR2)
        for _ in range(200):  # until the stats are written (a signal has no answer)
            if stats.exists():
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
    finally:
        await wire.stop()
    table = pstats.Stats(str(stats)).stats  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_, calls, own, _cum, _) in table.items():
        if calls >= runs:
            rows.append((own / runs, calls / runs, f"{short(path)}:{line}({name})"))
    rows.sort(reverse=True)
    print(f"the run's path, per run (cProfile, {runs} runs; cumulative, a step's callees in):")
    for what, function in PHASES:
        code = function.__code__
        key = (code.co_filename, code.co_firstlineno, code.co_name)
        cumulative = table[key][3] if key in table else 0.0
        print(f"  {us(cumulative / runs)}  {what}")
    total = sum(own for own, _, _ in rows)
    print(f"where runfix serve's time goes, per run (cProfile, {runs} runs; ", end="")
    print(f"functions called each run: {us(total).strip()} of own time):")
    for own, calls, where in rows[:25]:
        print(f"  {us(own)}  ×{calls:<5.1f} {where}")


def short(path: str) -> str:
    for mark in ("site-packages/", "lib/python3", str(Path(__file__).parent.parent) + "/"):
        if mark in path:
            return path.split(mark, 1)[1]
    return path


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--size", type=int, default=100, help="runs per block")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-cost-") as tmp:
        folder = Path(tmp)
        write_spec(folder / "jupyter")
        os.environ["JUPYTER_PATH"] = str(folder / "jupyter")
        sides = await measure(folder, args.blocks, args.size)
        print(f"a trivial run on a kernel that answers at once, {args.blocks}×{args.size} each:")
        for side in sides:
            print(side.row())
        ours, raw = sides[2].total, sides[1].total
        added = statistics.median(ours) - statistics.median(raw)
        tail = pct(ours, 0.95) - pct(raw, 0.95)
        plain = statistics.median(ours) - statistics.median(sides[0].total)
        print(f"runfix adds {us(added).strip()} median, {us(tail).strip()} at p95 ", end="")
        print(f"over raw async jupyter_client; {us(plain).strip()} over sync")
        floor = statistics.median(sides[3].total)
        print("an LSP request's own round trip (runfix.status, no kernel) is ", end="")
        print(f"{us(floor).strip()}: the editor's side of any LSP server")
        echo = statistics.median(sides[4].total)
        print(f"a bare JSON-RPC echo's round trip is {us(echo).strip()}: runfix adds ", end="")
        print(f"{added / echo:.1f}× the echo (target <= 2×)")
        written = record_write(folder, 200)
        floor = floor + written
        print(
            f"its floor: the LSP hop ({us(statistics.median(sides[3].total)).strip()}) and ", end=""
        )
        print(f"the record's write before the answer ({us(written).strip()}) = ", end="")
        print(f"{us(floor).strip()}, {floor / echo:.1f}× the echo, before any other work")
        if args.profile:
            await profile(folder, args.blocks * args.size)


if __name__ == "__main__":
    asyncio.run(main())
