#!/usr/bin/env python3
"""What the jail costs a run of model-written code (issue 68), measured in one run.

Each fix task of the fix bench (`fix_live_tasks.FIX_TASKS`: a folder whose `job.py` raises
somewhere) in a kernel of its folder: its cells but the last run first (the user's state),
then the last cell — the code a candidate stands in for — run again and again as the
user's code in the kernel and as the model's in the jail (a fork of the kernel, confined:
`RunRequest.jail`), alternating which goes first; the row is the medians and what the jail
added. The same for a trivial run in a kernel holding 1 GB of data (a fork copies its page
tables, not its pages), with the kernel's resident memory before and after the jail's runs:
the user's kernel is left as it was. Target: median added <= 25 ms.

Usage: python scripts/bench_jail.py [--rounds N] [--tasks N] [--gigabytes G]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_guard import cells
from fix_live_tasks import FIX_TASKS

from executor.configs import LocalConfig
from executor.events import Jail, RunRequest, Stream
from executor.local import LocalKernel

RSS = (
    "import os\nprint(int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE'))"
)


async def timed(kernel: LocalKernel, first: int, code: str, jailed: bool) -> float:
    path = str(kernel.folder / "job.py")
    jail = Jail(budget=30.0) if jailed else None
    began = time.perf_counter()
    outcome = await kernel.execute(RunRequest(code, path, first, timeout=60, jail=jail))
    took = time.perf_counter() - began
    if jailed and (outcome.jailed is None or not outcome.jailed.available):
        raise SystemExit(f"no jail here: {outcome.jailed}")
    return took


async def compare(kernel: LocalKernel, first: int, code: str, rounds: int) -> tuple[float, float]:
    """(median seconds in the kernel, in the jail), alternating which goes first."""
    plain: list[float] = []
    jailed: list[float] = []
    await timed(kernel, first, code, False)  # warm: imports, the first compile
    await timed(kernel, first, code, True)
    for n in range(rounds):
        for jail in (False, True) if n % 2 == 0 else (True, False):
            (jailed if jail else plain).append(await timed(kernel, first, code, jail))
    return statistics.median(plain), statistics.median(jailed)


async def resident(kernel: LocalKernel) -> int:
    outcome = await kernel.execute(RunRequest(RSS, "<bench>", 1))
    return int("".join(e.text for e in outcome.events if isinstance(e, Stream)).strip())


def row(name: str, plain: float, jailed: float) -> str:
    added = (jailed - plain) * 1000
    return f"{name:<34} {plain * 1000:9.2f} {jailed * 1000:9.2f} {added:9.2f}"


async def main(rounds: int, count: int, gigabytes: float) -> None:
    print(f"{'':<34} {'kernel ms':>9} {'jail ms':>9} {'added ms':>9}")
    added: list[float] = []
    with tempfile.TemporaryDirectory(prefix="runfix-bench-jail-") as root:
        for task in FIX_TASKS[:count]:
            folder = Path(root) / task.name
            folder.mkdir()
            for name, text in task.files.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(text)
            pieces = cells(task.files["job.py"])
            kernel = LocalKernel(folder, LocalConfig(sys.executable))
            await kernel.start()
            try:
                for first, code in pieces[:-1]:
                    await kernel.execute(RunRequest(code, str(folder / "job.py"), first))
                plain, jailed = await compare(kernel, *pieces[-1], rounds)
            finally:
                await kernel.shutdown()
            added.append(jailed - plain)
            print(row(task.name, plain, jailed))
        print(f"median added over {count} tasks: {statistics.median(added) * 1000:.2f} ms")
        folder = Path(root) / "big"
        folder.mkdir()
        kernel = LocalKernel(folder, LocalConfig(sys.executable))
        await kernel.start()
        try:
            size = int(gigabytes * 2**30 // 8)
            await kernel.execute(
                RunRequest(f"import numpy as np\nbig = np.ones({size})", "<bench>", 1, 120)
            )
            before = await resident(kernel)
            plain, jailed = await compare(kernel, 1, "total = 1 + 1\ntotal", rounds * 2)
            summed = await compare(kernel, 1, "float(big[:1000].sum())", rounds)
            after = await resident(kernel)
            print(row(f"a trivial run, {gigabytes:g} GB in the kernel", plain, jailed))
            print(row(f"a read of it, {gigabytes:g} GB in the kernel", *summed))
            print(
                f"the kernel's resident memory: {before / 2**20:,.0f} MB before the jail's "
                f"runs, {after / 2**20:,.0f} MB after ({(after - before) / 2**20:+,.1f} MB)"
            )
        finally:
            await kernel.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tasks", type=int, default=len(FIX_TASKS))
    parser.add_argument("--gigabytes", type=float, default=1.0)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.tasks, args.gigabytes))
