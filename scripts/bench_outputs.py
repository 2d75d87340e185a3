#!/usr/bin/env python3
"""Rich outputs (issue 13): what a DataFrame and a plot cost against text-only output.

- run → answer (results published) and → hover answered, for a cell that shows a
  1,000×20 DataFrame and a plot, against the same run showing text only
  (`print(len(df))`), interleaved run by run in one server: medians and ratio;
- the same rich cell through raw jupyter_client (`execute_interactive`), interleaved:
  what runfix adds to what the kernel itself takes to render a table and a plot;
- hover p95 on a document with 200 stored figures, and `runfix.outputs` (what the output
  views ask on each cursor move) there;
- one cell displaying 4,000 small images (issue 23): through runfix vs the same cell
  through raw jupyter_client, and the hover's p95 while it runs.

Usage: python scripts/bench_outputs.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

sys.path.insert(0, str(Path(__file__).parent))
from bench_wire import INLAY, Wire, ms, pct

SETUP = (
    "import pandas as pd, numpy as np, matplotlib.pyplot as plt\n"
    "df = pd.DataFrame(np.random.rand(1000, 20), columns=[f'c{i}' for i in range(20)])\n"
)
# The DataFrame last: IPython shows only a cell's last expression, runfix every statement's,
# so this way raw jupyter_client renders the same table and the same plot.
RICH = "plt.plot(df['c0'][:50])\ndf\n"
TEXT = "print(len(df))\nprint(df['c0'][:50].sum())\n"
IMAGES = """\
import struct, zlib
from IPython.display import Image, display

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

def png(i):
    raw = b"\\x00" + bytes([i % 256, (i // 256) % 256, 7])
    ihdr = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    body = chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    return b"\\x89PNG\\r\\n\\x1a\\n" + ihdr + body

for i in range(4000):
    display(Image(png(i)))
"""


VERSIONS = itertools.count(2)


async def run_and_hover(wire: Wire, uri: str, code: str) -> tuple[float, float]:
    wire.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": next(VERSIONS)},
            "contentChanges": [{"text": code}],
        },
    )
    t = time.perf_counter()
    answer = await wire.run(uri)
    ran = time.perf_counter() - t
    assert answer["status"] == "ok", answer
    if code is RICH:  # what is measured is what a user would see
        hints = await wire.request(
            "textDocument/inlayHint",
            {
                "textDocument": {"uri": uri},
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}},
            },
        )
        labels = [h["label"] for h in hints]
        assert "→ DataFrame 1,000×20" in labels, labels
        # The inline backend shows a figure when the cell ends: it lands on the last statement.
        assert list(Path(uri.removeprefix("file://")).parent.glob(".runfix/outputs/*.png"))
    position = {"line": 0, "character": 0}
    await wire.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": position})
    return ran, time.perf_counter() - t


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-outputs-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        await wire.start(folder, {}, INLAY)
        uri = wire.open(folder / "bench.py", SETUP)
        assert (await wire.run(uri))["status"] == "ok"
        km = AsyncKernelManager(transport="ipc", ip=str(folder / "raw"))
        await km.start_kernel(cwd=str(folder))
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        await kc.execute_interactive(SETUP, output_hook=lambda m: None)
        rich, text, raw = [], [], []
        for _ in range(args.runs):
            rich.append(await run_and_hover(wire, uri, RICH))
            text.append(await run_and_hover(wire, uri, TEXT))
            t = time.perf_counter()
            await kc.execute_interactive(RICH, store_history=False, output_hook=lambda m: None)
            raw.append(time.perf_counter() - t)
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
        for i, name in ((0, "run → results"), (1, "run → hover answered")):
            r = statistics.median(x[i] for x in rich)
            t = statistics.median(x[i] for x in text)
            print(f"{name}: DataFrame + plot {ms(r)} vs text {ms(t)} = {r / t:.2f}x")
        r, b = statistics.median(x[0] for x in rich), statistics.median(raw)
        print(f"the rich cell vs raw jupyter_client: {ms(r)} vs {ms(b)} = {r / b:.2f}x")
        figures = "".join(
            f"plt.figure(); plt.plot([{i}, {i + 1}]); plt.show()\n" for i in range(200)
        )
        many = wire.open(folder / "figures.py", "import matplotlib.pyplot as plt\n" + figures)
        assert (await wire.run(many))["status"] == "ok"
        stored = len(list((folder / ".runfix" / "outputs").glob("*.png")))
        times = []
        for line in range(1, 201):
            t = time.perf_counter()
            position = {"line": line, "character": 0}
            await wire.request(
                "textDocument/hover", {"textDocument": {"uri": many}, "position": position}
            )
            times.append(time.perf_counter() - t)
        print(
            f"hover with {stored} stored figures: p50 {ms(pct(times, 0.5))}  "
            f"p95 {ms(pct(times, 0.95))}"
        )
        # What VS Code's output panel asks on each cursor move (and lists the latest images).
        times = []
        for line in range(1, 201):
            t = time.perf_counter()
            position = {"line": line, "character": 0}
            await wire.request(
                "workspace/executeCommand",
                {"command": "runfix.outputs", "arguments": [{"uri": many, "position": position}]},
            )
            times.append(time.perf_counter() - t)
        print(
            f"runfix.outputs (the output view) with {stored} stored figures: "
            f"p50 {ms(pct(times, 0.5))}  p95 {ms(pct(times, 0.95))}"
        )
        await images_row(wire, folder)
        await wire.stop()


async def images_row(wire: Wire, folder: Path) -> None:
    """4,000 images from one cell: runfix (with hovers every 50 ms meanwhile) vs raw."""
    km = AsyncKernelManager(transport="ipc", ip=str(folder / "raw2"))
    await km.start_kernel(cwd=str(folder))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    t = time.perf_counter()
    await kc.execute_interactive(IMAGES, store_history=False, output_hook=lambda m: None)
    raw = time.perf_counter() - t
    kc.stop_channels()
    await km.shutdown_kernel(now=True)
    uri = wire.open(folder / "images.py", IMAGES)
    hovers: list[float] = []
    t = time.perf_counter()
    running = asyncio.ensure_future(wire.run(uri))
    while not running.done():
        h = time.perf_counter()
        position = {"line": 0, "character": 0}
        await wire.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": position}
        )
        hovers.append(time.perf_counter() - h)
        await asyncio.sleep(0.05)
    ran = time.perf_counter() - t
    assert (await running)["status"] == "ok"
    print(
        f"4,000 images from one cell: runfix {ran:.2f} s vs raw jupyter_client {raw:.2f} s "
        f"= {ran / raw:.2f}x; hover during it p50 {ms(pct(hovers, 0.5))} "
        f"p95 {ms(pct(hovers, 0.95))} ({len(hovers)} hovers)"
    )


if __name__ == "__main__":
    asyncio.run(main())
