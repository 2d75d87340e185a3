#!/usr/bin/env python3
"""What checking a fix against its dependents costs (issue 28), measured in one run.

A document of a loading cell, the fixed cell and three dependents that do real work. The
baseline, in the same run: the same cells run one after another in a warm kernel (what
running them yourself takes) and a kernel's cold start. The check (`fixcheck.check`: a
throwaway kernel started, the cells above, the fixed cell, the dependents, the kernel shut
down) is compared with them: (check − one kernel start) / the cells' own time. Target
≤ 1.5× plus one kernel start.

Usage: python scripts/bench_fixcheck.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from executor.configs import LocalConfig
from executor.events import RunRequest
from executor.local import LocalKernel
from lsp_server.fix.fixcheck import PASS, Code, Dependent, check, ended

LOAD = "rows = [{'k': i % 97, 'v': i * 0.5} for i in range(200_000)]\n"
FIXED = "table = {}\nfor r in rows:\n    table[r['k']] = table.get(r['k'], 0) + r['v']\n"
DEPENDENTS = [
    "top = sorted(table.items(), key=lambda kv: -kv[1])[:5]\nprint(top[0][0])\n",
    "total = sum(r['v'] for r in rows if r['k'] in table)\nprint(round(total))\n",
    "assert len(table) == 97, len(table)\n",
]


def request(code: str, path: str, line: int) -> RunRequest:
    return RunRequest(code, path, line + 1, timeout=120)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="runfix-bench-fixcheck-") as tmp:
        folder = Path(tmp)
        path = str(folder / "job.py")
        config = LocalConfig(sys.executable)
        starts, own, checks, own_starts = [], [], [], []
        for _ in range(rounds):
            kernel = LocalKernel(folder, config)
            began = time.perf_counter()
            await kernel.start()
            starts.append(time.perf_counter() - began)
            began = time.perf_counter()
            for n, code in enumerate([LOAD, FIXED, *DEPENDENTS]):
                await kernel.execute(request(code, path, n * 5))
            own.append(time.perf_counter() - began)
            await kernel.shutdown()

            dependents = [
                Dependent(10 + 5 * n, 12 + 5 * n, c, PASS) for n, c in enumerate(DEPENDENTS)
            ]
            began = time.perf_counter()
            report = await check(
                lambda: LocalKernel(folder, config),
                path,
                [Code(0, LOAD)],
                Code(5, FIXED),
                dependents,
                60.0,
                request,
                asyncio.Event(),
            )
            checks.append(time.perf_counter() - began)
            own_starts.append(report.start)
            assert report.status == "checked" and not report.regressions, report
        await ended()  # the check kernels, killed
    start, cells, whole = (statistics.median(v) for v in (starts, own, checks))
    extra = statistics.median(c - s for c, s in zip(checks, own_starts, strict=True))
    print(f"kernel cold start: median {start * 1000:.0f} ms")
    print(f"the cells run in a warm kernel (load, fix, 3 dependents): median {cells * 1000:.0f} ms")
    print(
        "the check (a throwaway kernel started, the cells; killed after): "
        f"median {whole * 1000:.0f} ms"
    )
    print(
        f"  (check − its kernel's start) / the cells' own time: {extra / cells:.2f}x over "
        f"{rounds} rounds (target ≤ 1.5x); its kernel's start: median "
        f"{statistics.median(own_starts) * 1000:.0f} ms"
    )
    print(
        "  (check − a cold start measured apart) / the cells' own time: "
        f"{(whole - start) / cells:.2f}x"
    )


if __name__ == "__main__":
    asyncio.run(main())
