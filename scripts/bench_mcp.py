#!/usr/bin/env python3
"""Coding agents over MCP (issue 27): an agent's trivial run end to end — the MCP SDK's
client calling `runfix mcp`'s `run_lines` over stdio, through the editor's `runfix serve`
and back — vs the same run asked by the editor (`runfix.run` over LSP), interleaved,
in the same run. Target ≤ 1.1×. The MCP SDK's own round trip (a ping on the same stdio)
is printed beside it: what of the difference is the SDK's, what is runfix's.

Usage: python scripts/bench_mcp.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_wire import INLAY, Wire, ms
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs each way")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="runfix-bench-mcp-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        wire.choose = "Allow for this session"
        await wire.start(folder, {}, INLAY)
        path = folder / "trivial.py"
        path.write_text("x = 1 + 1\nx\n")  # an agent runs lines of a file (open or on disk)
        uri = wire.open(path, path.read_text())
        params = StdioServerParameters(command=sys.executable, args=["-m", "lsp_server", "mcp"])
        editor: list[float] = []
        agent: list[float] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            arguments = {"path": str(path), "first": 1, "last": 2}
            for _ in range(10):  # warm: the kernel, the consent, both connections
                await wire.run(uri)
                result = await session.call_tool("run_lines", arguments)
                assert not result.is_error, result
            pings: list[float] = []
            for _ in range(runs):
                began = time.perf_counter()
                await wire.run(uri)
                editor.append(time.perf_counter() - began)
                began = time.perf_counter()
                await session.call_tool("run_lines", arguments)
                agent.append(time.perf_counter() - began)
                began = time.perf_counter()
                await session.send_ping()  # the MCP SDK's own round trip, nothing of runfix's
                pings.append(time.perf_counter() - began)
        await wire.stop()
    ratio = statistics.median(agent) / statistics.median(editor)
    print(f"trivial run from the editor (LSP): median {ms(statistics.median(editor))}")
    print(
        f"the same run from an agent (MCP → runfix mcp → socket → runfix serve): median "
        f"{ms(statistics.median(agent))}"
    )
    print(f"  ratio of medians: {ratio:.2f}x over {runs} runs each (target ≤ 1.1x)")
    ping = statistics.median(pings)
    print(f"an MCP ping over the same stdio (the SDK's floor): median {ms(ping)}")
    ours = statistics.median(agent) - ping
    print(
        f"  the agent's run less the SDK's round trip: {ms(ours)} = "
        f"{ours / statistics.median(editor):.2f}x the editor's"
    )


if __name__ == "__main__":
    asyncio.run(main())
