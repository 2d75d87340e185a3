#!/usr/bin/env python3
"""The run record (issue 14): what recording costs a run, and `runfix history` on a big record.

- a trivial run (`x = 1`) through `runfix.run` with the record on (the default) and off
  (`history.maxRuns: 0`): two servers, interleaved in blocks; medians and their ratio
  (target ≤ 1.05×);
- `runfix history` (the command, a fresh process each time, as a user types it) and the
  query alone, on a record of 100,000 runs (target ≤ 200 ms).

Usage: python scripts/bench_record.py [--blocks N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from bench_wire import INLAY, Wire, ms

from lsp_server.record.store import RecordedOutput, RecordedRun, RunRecord

RUNS = 100_000


async def runs_with_and_without(blocks: int, per_block: int) -> None:
    """One server, one kernel: the record is turned on and off between blocks (a settings
    change that keeps the kernel), so kernel-to-kernel differences do not count."""
    with tempfile.TemporaryDirectory(prefix="runfix-record-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        await wire.start(
            folder, {}, {**INLAY, "workspace": {**INLAY["workspace"], "configuration": True}}
        )
        uri = wire.open(folder / "trivial.py", "x = 1\n")
        settings = {"on": {}, "off": {"history": {"maxRuns": 0}}}
        times: dict[str, list[float]] = {"on": [], "off": []}
        for block in range(blocks * 2):
            name = ("on", "off")[block % 2]
            wire.configuration = settings[name]
            wire.notify("workspace/didChangeConfiguration", {"settings": None})
            for _ in range(5):  # settings read again, caches warm
                assert (await wire.run(uri))["status"] == "ok"
            for _ in range(per_block):
                t = time.perf_counter()
                await wire.run(uri)
                times[name].append(time.perf_counter() - t)
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        recorded = len(RunRecord(folder).recent(limit=1_000_000))
        print(
            f"trivial run, record on vs off: {ms(on)} vs {ms(off)} = {on / off:.3f}x "
            f"({len(times['on'])} runs each, one server and kernel; {recorded} recorded)"
        )
        await wire.stop()


def history_on_a_big_record() -> None:
    with tempfile.TemporaryDirectory(prefix="runfix-history-") as tmp:
        folder = Path(tmp)
        (folder / "pyproject.toml").write_text("")
        record = RunRecord(folder, max_runs=RUNS * 2)
        db = record._open()
        assert db is not None
        t = time.perf_counter()
        with db:  # one transaction: writing 100,000 runs one commit each takes minutes
            for n in range(RUNS):
                run = RecordedRun(
                    path=str(folder / f"file{n % 50}.py"), first=n % 400, last=n % 400 + 3,
                    code=f"df = load({n})\ndf.describe()\n", origin="user", status="ok",
                    started=1.7e9 + n, duration=0.2, cpu=0.15, peak=2**27, rss_before=2**26,
                    rss_after=2**26 + n, outputs=(RecordedOutput(n % 400, "DataFrame 8×5"),),
                )  # fmt: skip
                db.execute(
                    "INSERT INTO runs (started, path, first, last, code, origin, status, "
                    "duration, cpu, peak, rss_before, rss_after, outputs, error, fix_of) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.started, run.path, run.first, run.last, run.code, run.origin,
                     run.status, run.duration, run.cpu, run.peak, run.rss_before,
                     run.rss_after, '[{"line": 1, "text": "DataFrame 8×5"}]', None, None),
                )  # fmt: skip
        record.close()
        print(f"wrote {RUNS:,} runs in {time.perf_counter() - t:.1f} s")
        query = []
        reader = RunRecord(folder, max_runs=RUNS * 2)
        for _ in range(20):
            t = time.perf_counter()
            reader.recent(limit=50)
            reader.recent(str(folder / "file7.py"), limit=50)
            query.append((time.perf_counter() - t) / 2)
        print(f"query of the latest 50 (all, one file): median {ms(statistics.median(query))}")
        runfix = Path(sys.executable).parent / "runfix"
        command = []
        for args in (["history"], ["history", str(folder / "file7.py")], ["history", "--json"]):
            for _ in range(5):
                t = time.perf_counter()
                subprocess.run([str(runfix), *args], cwd=folder, check=True, capture_output=True)
                command.append(time.perf_counter() - t)
        startup = []
        for _ in range(5):
            t = time.perf_counter()
            subprocess.run([str(runfix), "--version"], check=True, capture_output=True)
            startup.append(time.perf_counter() - t)
        print(
            f"`runfix history` on {RUNS:,} runs, whole command: median "
            f"{ms(statistics.median(command))}, max {ms(max(command))} "
            f"(`runfix --version` alone: {ms(statistics.median(startup))})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--runs", type=int, default=50, help="runs per block")
    args = parser.parse_args()
    asyncio.run(runs_with_and_without(args.blocks, args.runs))
    history_on_a_big_record()


if __name__ == "__main__":
    main()
