#!/usr/bin/env python3
"""What the runtime guard costs a run of model-written code (issue 58), measured in one run.

The fix bench's tasks (`fix_live_tasks.FIX_TASKS`: each a folder whose `job.py` cells raise
somewhere), each run cell by cell in a kernel of its folder twice per round — as the model's
code (under the guard: `RunRequest.guard`) and as the user's (no guard) — alternating which
goes first; the ratio is of the rounds' medians. Two more rows bound the guard's own work: a
trivial run (`1 + 1`: arming and disarming, what a run of model code always pays), and a
run of 2,000 file opens (each an audit event the hook judges). Target: ≤ 1.05× on the tasks
(a fix's time is the model's; a run is milliseconds).

Usage: python scripts/bench_guard.py [--rounds N] [--tasks N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fix_live_tasks import FIX_TASKS

from executor.configs import LocalConfig
from executor.events import Guard, RunRequest
from executor.local import LocalKernel
from lsp_server.text.cells import split_cells

OPENS = (
    "import os\nfor i in range(2000):\n    with open('probe.txt', 'w') as f:\n"
    "        f.write('x')\nos.remove('probe.txt')\n"
)


def cells(source: str) -> list[tuple[int, str]]:
    """The file's cells as (first line from 1, code)."""
    lines = source.splitlines(keepends=True)
    return [(c.first + 1, "".join(lines[c.first : c.last + 1])) for c in split_cells(lines)]


async def timed(kernel: LocalKernel, pieces: list[tuple[int, str]], guarded: bool) -> float:
    path = str(kernel.folder / "job.py")
    began = time.perf_counter()
    for first, code in pieces:
        guard = Guard() if guarded else None
        await kernel.execute(RunRequest(code, path, first, timeout=60, guard=guard))
    return time.perf_counter() - began


async def compare(
    kernel: LocalKernel, pieces: list[tuple[int, str]], rounds: int
) -> tuple[float, float]:
    """(median seconds without the guard, with it), alternating which goes first."""
    plain: list[float] = []
    guarded: list[float] = []
    await timed(kernel, pieces, False)  # warm: imports, the first compile
    await timed(kernel, pieces, True)
    for n in range(rounds):
        order = (False, True) if n % 2 == 0 else (True, False)
        for guard in order:
            (guarded if guard else plain).append(await timed(kernel, pieces, guard))
    return statistics.median(plain), statistics.median(guarded)


def row(name: str, plain: float, guarded: float) -> str:
    return f"{name:<34} {plain * 1000:9.2f} {guarded * 1000:9.2f} {guarded / plain:7.3f}x"


async def main(rounds: int, count: int) -> None:
    print(f"{'':<34} {'plain ms':>9} {'guard ms':>9} {'ratio':>8}")
    totals = [0.0, 0.0]
    with tempfile.TemporaryDirectory(prefix="runfix-bench-guard-") as root:
        for task in FIX_TASKS[:count]:
            folder = Path(root) / task.name
            folder.mkdir()
            for name, text in task.files.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(text)
            kernel = LocalKernel(folder, LocalConfig(sys.executable))
            await kernel.start()
            try:
                plain, guarded = await compare(kernel, cells(task.files["job.py"]), rounds)
            finally:
                await kernel.shutdown()
            totals[0] += plain
            totals[1] += guarded
            print(row(task.name, plain, guarded))
        print(row(f"all {count} tasks (sum of medians)", *totals))
        folder = Path(root) / "own"
        folder.mkdir()
        kernel = LocalKernel(folder, LocalConfig(sys.executable))
        await kernel.start()
        try:
            print(row("a trivial run (1 + 1)", *await compare(kernel, [(1, "1 + 1")], rounds * 4)))
            print(row("2,000 file opens", *await compare(kernel, [(1, OPENS)], rounds)))
        finally:
            await kernel.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tasks", type=int, default=len(FIX_TASKS))
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.tasks))
