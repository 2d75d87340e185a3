#!/usr/bin/env python3
"""The performance table of issue 12, each row against its baseline measured in the same run.

A thin JSON-RPC client (asyncio pipes, `json`, no pygls: its own parsing would add
0.3–1.3 ms to every figure) drives `runfix serve`. Where a row has a baseline, the
two are interleaved run by run and reported per block as min / median / max of the
per-block ratios.

Rows: trivial run (vs raw jupyter_client, sync and async), spawn → initialize,
spawn → first result (vs a fresh process doing start_new_kernel + execute), RSS at
idle, a character, an Enter and a paste above 2,000 / 10,000 results, each then a hover
(inlay and diagnostics mode), a whole-file run of many cells (vs raw, cell by cell), code lens /
inlay hints over a 20,000-line file, the longest pause seen over many small requests, and
one session at scale (200 open documents of 100 cells with results vs one: RSS, a
keystroke's p95, a trivial run).

Usage: python scripts/bench_perf.py [--quick] [--row run|start|keys|file|printing|big|scale]...
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_wire import INLAY, Wire, ms, pct, raw_async, raw_sync, spread, stop_raw
from jupyter_client.manager import AsyncKernelManager, KernelManager

# -- rows -------------------------------------------------------------------------------


async def trivial_run(folder: Path, blocks: int, size: int) -> list[str]:
    """runfix.run of `x = 1 + 1\\nx` vs raw execute_interactive, sync and async, interleaved."""
    code = "x = 1 + 1\nx"
    km = KernelManager(transport="ipc", ip=str(folder / "raw-sync"))
    sync_kc = raw_sync(km, folder)
    async_km = AsyncKernelManager(transport="ipc", ip=str(folder / "raw-kernel"))
    akc = await raw_async(async_km, folder)
    wire = Wire()
    await wire.start(folder, {}, INLAY)
    uri = wire.open(folder / "trivial.py", code + "\n")
    for _ in range(5):
        await wire.run(uri)
        sync_kc.execute_interactive(code, store_history=False, output_hook=lambda m: None)
        await akc.execute_interactive(code, store_history=False, output_hook=lambda m: None)
    ours: list[float] = []
    sync_ratios: list[float] = []
    async_ratios: list[float] = []
    try:
        for _ in range(blocks):
            a, b, c = [], [], []
            for _ in range(size):
                t = time.perf_counter()
                sync_kc.execute_interactive(code, store_history=False, output_hook=lambda m: None)
                a.append(time.perf_counter() - t)
                t = time.perf_counter()
                await akc.execute_interactive(code, store_history=False, output_hook=lambda m: None)
                b.append(time.perf_counter() - t)
                t = time.perf_counter()
                answer = await wire.run(uri)
                c.append(time.perf_counter() - t)
                assert answer["status"] == "ok", answer
            ours += c
            sync_ratios.append(statistics.median(c) / statistics.median(a))
            async_ratios.append(statistics.median(c) / statistics.median(b))
    finally:
        await wire.stop()
        await stop_raw((km, sync_kc), (async_km, akc))
    return [
        f"trivial run: runfix {ms(statistics.median(ours))} median over {blocks}×{size}",
        f"  vs raw sync   ratio per block: {spread(sync_ratios)}",
        f"  vs raw async  ratio per block: {spread(async_ratios)}",
    ]


RAW_FIRST = (  # a fresh process: import jupyter_client, start an IPC kernel, run one line
    "import sys, tempfile\n"
    "from jupyter_client.manager import KernelManager\n"
    "km = KernelManager(transport='ipc', ip=tempfile.mkdtemp() + '/k')\n"
    "km.start_kernel()\n"
    "kc = km.client(); kc.start_channels(); kc.wait_for_ready(timeout=60)\n"
    "kc.execute_interactive('x = 1 + 1', output_hook=lambda m: None)\n"
    "kc.stop_channels(); km.shutdown_kernel(now=True)\n"
)


async def start_up(folder: Path, runs: int) -> list[str]:
    """spawn → initialize answered; spawn → first result vs a fresh process's first result;
    RSS at idle."""
    init, first, raw, rss = [], [], [], []
    # A cache folder of this run's own: the first start does not know its answer to
    # `initialize` yet (as on a first start ever, or after an upgrade); the others do.
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")
    for n in range(runs):
        t = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", RAW_FIRST, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        assert await proc.wait() == 0
        raw.append(time.perf_counter() - t)
        sub = folder / f"s{n}"
        sub.mkdir()
        wire = Wire()
        t = time.perf_counter()
        await wire.start(sub, {}, INLAY)
        init.append(time.perf_counter() - t)
        uri = wire.open(sub / "one.py", "x = 1 + 1\n")
        answer = await wire.run(uri)
        first.append(time.perf_counter() - t)
        assert answer["status"] == "ok", answer
        await asyncio.sleep(1.0)
        rss.append(wire.rss_mb())
        await wire.stop()
    ratios = [f / r for f, r in zip(first, raw, strict=True)]
    known = init[1:] or init
    return [
        f"spawn → initialize: first start {init[0]:.2f} s; later starts median "
        f"{statistics.median(known):.2f} s (min {min(known):.2f})",
        f"spawn → first result: median {statistics.median(first):.2f} s; raw fresh process "
        f"{statistics.median(raw):.2f} s; ratio {spread(ratios)}",
        f"server RSS at idle (after one run): median {statistics.median(rss):.0f} MB",
    ]


async def keystrokes(folder: Path, counts: tuple[int, ...], presses: int) -> list[str]:
    """A keystroke at the top of a file above N results — a character, Enter (a new line:
    every result below moves), a paste of 20 lines of code (they move, and go stale) — then a
    hover, whose answer comes after the change is handled;
    against a bare hover in the same session."""
    out = []
    for mode in ("inlay", "diagnostics"):
        for count in counts:
            wire = Wire()
            sub = folder / f"keys-{mode}-{count}"
            sub.mkdir()
            await wire.start(sub, {"results": mode, "timeout": 600}, INLAY)
            text = "".join(f"print({i})\n" for i in range(count))
            uri = wire.open(sub / "many.py", text)
            answer = await wire.run(uri)
            assert answer["status"] == "ok", answer
            hover = {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}
            idle = []
            for _ in range(presses):
                t = time.perf_counter()
                await wire.request("textDocument/hover", hover)
                idle.append(time.perf_counter() - t)
            version = itertools.count(2)
            pasted = "".join(f"y{i} = {i}\n" for i in range(20))
            keys = (("a character", "#"), ("Enter", "\n"), ("a paste of 20 lines", pasted))
            start = {"line": 0, "character": 0}
            for name, typed_text in keys:
                typed = [
                    await wire.typed(uri, next(version), start, typed_text, hover)
                    for _ in range(presses)
                ]
                out.append(
                    f"{name} above {count:,} results ({mode}), then a hover: "
                    f"{ms(statistics.median(typed))} median, p95 {ms(pct(typed, 0.95))} "
                    f"(a bare hover: {ms(statistics.median(idle))} median, "
                    f"p95 {ms(pct(idle, 0.95))})"
                )
            await wire.stop()
    return out


def _cells(count: int, lines_per_cell: int, printing: bool) -> str:
    body = []
    for i in range(count):
        body.append(f"# %% cell {i}\n")
        body.append(f"print({i})\n" if printing else f"v{i} = {i}\n")
        body.extend("\n" for _ in range(lines_per_cell - 2))
    return "".join(body)


async def whole_file(
    folder: Path, cells: int, lines_per_cell: int, mode: str, printing: bool
) -> str:
    """A whole-file run of `cells` cells vs raw async, the same cells one by one."""
    sub = folder / f"whole-{cells}-{mode}-{printing}"
    sub.mkdir()
    km = AsyncKernelManager(transport="ipc", ip=str(sub / "raw"))
    kc = await raw_async(km, sub)
    t = time.perf_counter()
    for i in range(cells):
        code = f"print({i})" if printing else f"v{i} = {i}"
        await kc.execute_interactive(code, store_history=False, output_hook=lambda m: None)
    raw = time.perf_counter() - t
    await stop_raw((km, kc))
    wire = Wire()
    await wire.start(sub, {"results": mode}, INLAY)
    uri = wire.open(sub / "cells.py", _cells(cells, lines_per_cell, printing))
    await wire.run(
        uri, range={"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}
    )
    t = time.perf_counter()
    answer = await wire.run(uri)
    ours = time.perf_counter() - t
    assert answer["status"] == "ok", answer
    await wire.stop()
    what = "printing cells" if printing else "cells"
    return (
        f"whole-file run, {cells:,} {what} in {cells * lines_per_cell:,} lines ({mode}): "
        f"{ours:.1f} s vs raw {raw:.1f} s = {ours / raw:.2f}x"
    )


async def big_file(folder: Path, lines: int, requests: int) -> list[str]:
    """Code lens and inlay hints (whole file) over a big document with results."""
    sub = folder / "big"
    sub.mkdir()
    wire = Wire()
    await wire.start(sub, {}, INLAY)
    uri = wire.open(sub / "big.py", _cells(lines // 10, 10, True))
    answer = await wire.run(uri)
    assert answer["status"] == "ok", answer
    doc = {"textDocument": {"uri": uri}}
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": lines, "character": 0}}
    out = []
    for method, params in (
        ("textDocument/codeLens", doc),
        ("textDocument/inlayHint", {**doc, "range": whole}),
    ):
        times, answered = [], []
        gc.disable()  # this client's own collections are not the server's pauses
        for _ in range(requests):
            t = time.perf_counter()
            await wire.request(method, params)
            times.append(time.perf_counter() - t)
            answered.append(wire.arrived - t)
        gc.enable()
        out.append(
            f"{method} at {lines:,} lines ({wire.size / 1024:,.0f} KB): "
            f"answered p50 {ms(pct(answered, 0.5))}  p95 {ms(pct(answered, 0.95))}; "
            f"parsed by the client p50 {ms(pct(times, 0.5))}  p95 {ms(pct(times, 0.95))}"
        )
    hover = {**doc, "position": {"line": 1, "character": 0}}
    pauses = []
    for _ in range(requests * 30):
        t = time.perf_counter()
        await wire.request("textDocument/hover", hover)
        pauses.append(time.perf_counter() - t)
    out.append(f"longest of {len(pauses):,} hovers: {ms(max(pauses))} (p50 {ms(pct(pauses, 0.5))})")
    await wire.stop()
    return out


async def scale(folder: Path, documents: int, cells: int, presses: int) -> list[str]:
    """One editor session at scale: `documents` open documents of `cells` cells, each run
    (every cell shows a value), against the same session with one: the server's RSS, the
    p95 of a character and of an Enter in a document (each then a hover answered after
    it) and a trivial run's median."""
    sub = folder / "scale"
    sub.mkdir()
    wire = Wire()
    await wire.start(sub, {"timeout": 600}, INLAY)
    text = "".join(f"# %% cell {i}\nv{i} = {i} * 2\nv{i}\n" for i in range(cells))
    trivial = wire.open(sub / "trivial.py", "x = 1\n")
    versions = itertools.count(2)

    async def measure() -> tuple[float, float, float, float]:
        """RSS; a character's and an Enter's p95 (each then a hover); a trivial run."""
        first = (sub / "doc0.py").as_uri()
        hover = {"textDocument": {"uri": first}, "position": {"line": 1, "character": 0}}
        at = {"line": 0, "character": len("# %% cell 0")}  # the cell's title line's end
        typed = {
            key: [await wire.typed(first, next(versions), at, key, hover) for _ in range(presses)]
            for key in ("#", "\n")
        }
        runs = []
        for _ in range(presses):
            t = time.perf_counter()
            answer = await wire.run(trivial)
            runs.append(time.perf_counter() - t)
            assert answer["status"] == "ok", answer
        char, enter = (pct(typed[key], 0.95) for key in ("#", "\n"))
        return wire.rss_mb(), char, enter, statistics.median(runs)

    async def open_and_run(index: int) -> None:
        uri = wire.open(sub / f"doc{index}.py", text)
        answer = await wire.run(uri)
        assert answer["status"] == "ok", answer

    try:
        await wire.run(trivial)  # the kernel starts
        await open_and_run(0)
        one = await measure()
        for index in range(1, documents):
            await open_and_run(index)
        many = await measure()
    finally:
        await wire.stop()
    results = documents * cells
    return [
        f"1 document of {cells} cells with results: RSS {one[0]:.0f} MB, a character p95 "
        f"{ms(one[1])}, an Enter p95 {ms(one[2])}, a trivial run {ms(one[3])}",
        f"{documents} documents ({results:,} results): RSS {many[0]:.0f} MB "
        f"(+{many[0] - one[0]:.0f} MB, {(many[0] - one[0]) * 1024 / results:.1f} KB a result), "
        f"a character p95 {ms(many[1])} ({many[1] / one[1]:.2f}x), "
        f"an Enter p95 {ms(many[2])} ({many[2] / one[2]:.2f}x), "
        f"a trivial run {ms(many[3])} ({many[3] / one[3]:.2f}x)",
    ]


ROWS = ("run", "start", "keys", "file", "printing", "big", "scale")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer and smaller runs")
    parser.add_argument(
        "--row", action="append", choices=ROWS, help="only this row (again for more rows)"
    )
    args = parser.parse_args()
    quick = args.quick
    rows: dict[str, Callable[[Path], Any]] = {
        "run": lambda f: trivial_run(f, 2 if quick else 6, 50),
        "start": lambda f: start_up(f, 2 if quick else 5),
        "keys": lambda f: keystrokes(
            f, (2_000,) if quick else (2_000, 10_000), 20 if quick else 50
        ),
        "file": lambda f: whole_file(f, 200 if quick else 2_000, 10, "inlay", False),
        "printing": lambda f: whole_file(f, 100 if quick else 1_000, 3, "diagnostics", True),
        "big": lambda f: big_file(f, 2_000 if quick else 20_000, 20 if quick else 100),
        "scale": lambda f: scale(f, 20 if quick else 200, 100, 20 if quick else 50),
    }
    chosen = [rows[name] for name in ROWS if not args.row or name in args.row]
    with tempfile.TemporaryDirectory(prefix="runfix-perf-") as tmp:
        for number, row in enumerate(chosen):
            folder = Path(tmp) / f"row{number}"
            folder.mkdir()
            result = await row(folder)
            for line in [result] if isinstance(result, str) else result:
                print(line, flush=True)


if __name__ == "__main__":
    asyncio.run(main())
