#!/usr/bin/env python3
"""The debugger in the live kernel (issue 60): "Debug this error" from the request to the
stop, and a step's round trip (`next` to the next `stopped`), through runfix — a DAP client
speaking to `runfix dap`, the folder's socket, the editor's `runfix serve`, the kernel's
control channel — vs the same through raw jupyter_client `debug_request`s on a kernel of its
own (what VS Code's Jupyter extension sends), interleaved, in the same run. Target: runfix
≤ 1.2× raw; the stop under 2 s.

Usage: python scripts/bench_debug.py [--sessions N] [--steps N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from bench_wire import INLAY, Wire, ms

from tests.support.dap_client import Dap, dap

DEFS = """\
def price(item):
    total = 0
    for k in range(40):
        total += k
    return item["price"] * item["qty"]
"""
GO = 'items = [{"price": 1, "qty": 2}, {"price": 3}]\nt = sum(price(i) for i in items)\n'
DOC = f"# %% defs\n{DEFS}# %% go\n{GO}"
RAISES = 6  # `return item["price"] * item["qty"]` in the document
LOOP = 5  # `total += k`
GO_LINE = len(DOC.splitlines())


class Raw:
    """A kernel of its own, debugged by hand as VS Code's Jupyter extension does."""

    def __init__(self) -> None:
        self.seq = 0

    async def start(self) -> None:
        from jupyter_client.manager import AsyncKernelManager

        self.km = AsyncKernelManager(kernel_name="python3")
        await self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        await self.kc.wait_for_ready(60)
        self.defs_path = ""

    async def ask(self, command: str, **arguments: Any) -> dict[str, Any]:
        self.seq += 1
        content = {"type": "request", "seq": self.seq, "command": command, "arguments": arguments}
        msg = self.kc.session.msg("debug_request", content)
        self.kc.control_channel.send(msg)
        while True:
            reply = await self.kc.control_channel.get_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return dict(reply["content"])

    async def event(self, name: str) -> dict[str, Any]:
        while True:
            msg = await self.kc.get_iopub_msg(timeout=30)
            if msg["msg_type"] == "debug_event" and msg["content"].get("event") == name:
                return dict(msg["content"])

    async def attach(self) -> None:
        await self.ask("initialize", clientID="raw", adapterID="python", pathFormat="path",
                       linesStartAt1=True, columnsStartAt1=True)  # fmt: skip
        await self.ask("attach")
        dumped = await self.ask("dumpCell", code=DEFS)
        self.defs_path = dumped["body"]["sourcePath"]

    async def until_idle(self, msg_id: str) -> None:
        while True:
            msg = await self.kc.get_iopub_msg(timeout=60)
            parent = msg["parent_header"].get("msg_id")
            if msg["msg_type"] == "debug_event" and msg["content"].get("event") == "stopped":
                await self.ask("continue", threadId=msg["content"]["body"]["threadId"])
            idle = msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
            if idle and parent == msg_id:
                return

    async def error_stop(self) -> float:
        """initialize … the stop at the raising line; seconds."""
        began = time.perf_counter()
        await self.attach()
        await self.ask("setExceptionBreakpoints", filters=["raised"])
        await self.ask("configurationDone")
        launched = time.perf_counter()
        sent = self.kc.execute(GO)
        stop = await self.event("stopped")
        await self.ask("stackTrace", threadId=stop["body"]["threadId"])
        took = time.perf_counter() - began
        rest = time.perf_counter() - launched
        print(f"  raw: attach {ms(launched - began)}, then the stop {ms(rest)}")
        await self.ask("setExceptionBreakpoints", filters=[])
        await self.ask("continue", threadId=stop["body"]["threadId"])
        await self.until_idle(sent)
        await self.ask("disconnect", restart=False, terminateDebuggee=False)
        return took

    async def steps(self, count: int) -> list[float]:
        await self.attach()
        await self.ask("setBreakpoints", source={"path": self.defs_path}, breakpoints=[{"line": 4}])
        await self.ask("configurationDone")
        sent = self.kc.execute(GO)
        stop = await self.event("stopped")
        thread = stop["body"]["threadId"]
        await self.ask("setBreakpoints", source={"path": self.defs_path}, breakpoints=[])
        took = []
        for _ in range(count):
            began = time.perf_counter()
            await self.ask("next", threadId=thread)
            await self.event("stopped")
            took.append(time.perf_counter() - began)
        await self.ask("setExceptionBreakpoints", filters=[])
        await self.ask("continue", threadId=thread)
        await self.until_idle(sent)
        await self.ask("disconnect", restart=False, terminateDebuggee=False)
        return took

    async def stop(self) -> None:
        self.kc.stop_channels()
        await self.km.shutdown_kernel(now=True)


async def runfix_error_stop(client: Dap, path: Path) -> float:
    await client.request("initialize", clientID="bench", adapterID="runfix")
    began = time.perf_counter()
    await client.request("launch", program=str(path), line=GO_LINE, stopOnError=True)
    await client.event("initialized")
    launched = time.perf_counter()
    await client.request("configurationDone")
    await client.stopped()  # (the stop and its stack: the editor shows the line then)
    took = time.perf_counter() - began
    rest = time.perf_counter() - launched
    print(f"  runfix: launch {ms(launched - began)}, then the stop {ms(rest)}")
    await client.request("disconnect")
    return took


async def runfix_steps(client: Dap, path: Path, count: int) -> list[float]:
    await client.start(path, GO_LINE)
    await client.request("setBreakpoints", source={"path": str(path)}, breakpoints=[{"line": LOOP}])
    await client.request("configurationDone")
    stop = await client.stopped()
    await client.request("setBreakpoints", source={"path": str(path)}, breakpoints=[])
    took, at = [], stop["at"]
    for _ in range(count):
        began = time.perf_counter()
        await client.request("next", threadId=stop["threadId"])
        await client.event("stopped", at)
        took.append(time.perf_counter() - began)
        at = len(client.events)
    await client.request("disconnect")
    return took


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sessions", type=int, default=8, help="Debug this error, each way")
    parser.add_argument("--steps", type=int, default=40, help="steps, each way")
    args = parser.parse_args()
    ours: list[float] = []
    theirs: list[float] = []
    ours_steps: list[float] = []
    their_steps: list[float] = []
    with tempfile.TemporaryDirectory(prefix="runfix-bench-debug-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        await wire.start(folder, {}, INLAY)
        path = folder / "sales.py"
        path.write_text(DOC)
        uri = wire.open(path, DOC)
        await wire.run(uri)  # defines `price`, and the error being debugged
        raw = Raw()
        await raw.start()
        raw.kc.execute(DEFS)  # (its file is the cell's, as its debugger names cells)
        env = dict(__import__("os").environ)
        for n in range(args.sessions + 1):  # the first of each warms up
            async with dap(env) as client:
                mine = await runfix_error_stop(client, path)
            raw_took = await raw.error_stop()
            if n:
                ours.append(mine)
                theirs.append(raw_took)
        async with dap(env) as client:
            ours_steps = (await runfix_steps(client, path, args.steps + 5))[5:]
        their_steps = (await raw.steps(args.steps + 5))[5:]
        await raw.stop()
        await wire.stop()
    report = {
        "debug this error: request to stop": (ours, theirs),
        "a step (next → stopped)": (ours_steps, their_steps),
    }
    for name, (mine_, raw_) in report.items():
        a, b = statistics.median(mine_), statistics.median(raw_)
        print(f"{name}: runfix median {ms(a)} (max {ms(max(mine_))}), raw debug_request "
              f"median {ms(b)}: {a / b:.2f}x (target ≤ 1.2x)")  # fmt: skip
    print(json.dumps({"sessions": args.sessions, "steps": args.steps}))


if __name__ == "__main__":
    asyncio.run(main())
