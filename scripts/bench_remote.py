#!/usr/bin/env python3
"""Remote kernels (issue 15): what runfix adds to a Jupyter Server's own round trip.

- a trivial run (`x = 1`) through `runfix.run` (a real `runfix serve` over LSP,
  `executor: "remote"`) vs the same server's raw WebSocket execute round trip (an
  execute_request, until its reply and the kernel's idle), interleaved in blocks, in
  the same run; target ≤ 1.1×;
- kernel start: runfix's (create, WebSocket, kernel_info, its helper loaded) vs the raw
  create + WebSocket + kernel_info;
- the same with 50 ms of added round-trip latency (a loopback proxy that delays each
  way by 25 ms): a run that waited on one more round trip than needed would show
  ~+50 ms here.

A Jupyter Server is started on loopback for the run (this environment's
jupyter_server, token auth) and stopped at the end.

Usage: python scripts/bench_remote.py [--blocks N] [--runs N] [--starts N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import httpx
from bench_wire import INLAY, Wire, ms
from websockets.asyncio.client import ClientConnection, connect

from executor.configs import RemoteConfig
from executor.kernel_socket import _ack_now
from executor.remote import RemoteKernel
from tests.support.remote_server import TOKEN, TOKEN_ENV, JupyterServer, Proxy


class RawKernel:
    """The baseline: a kernel driven by hand over the server's REST API and WebSocket."""

    def __init__(self, url: str, *, ack_now: bool = True) -> None:
        self.url, self.headers = url, {"Authorization": f"token {TOKEN}"}
        self.ack_now = ack_now
        """Acknowledge each message at once, as runfix does (`executor.kernel_socket._ack_now`)."""
        self.session = uuid.uuid4().hex
        self.id = ""
        self.ws: ClientConnection | None = None

    async def start(self) -> None:
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{self.url}/api/kernels", json={"name": "python3"}, headers=self.headers
            )
            self.id = answer.json()["id"]
        address = self.url.replace("http", "ws", 1)
        self.ws = await connect(
            f"{address}/api/kernels/{self.id}/channels?session_id={self.session}",
            additional_headers=self.headers,
        )
        await self.request("kernel_info_request", {})

    async def request(self, msg_type: str, content: dict[str, Any]) -> None:
        """Send on shell; return when its reply and the kernel's idle after it are in."""
        assert self.ws is not None
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": msg_type, "username": "bench", "version": "5.3"}
        await self.ws.send(
            json.dumps(
                {
                    "header": {**header, "session": self.session, "date": ""},
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": "shell",
                }
            )
        )
        replied = idle = False
        sock = self.ws.transport.get_extra_info("socket")
        while not (replied and idle):
            msg = json.loads(await self.ws.recv())
            if self.ack_now:
                _ack_now(sock)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            replied = replied or msg["msg_type"].endswith("_reply")
            idle = idle or (
                msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"
            )

    async def execute(self, code: str) -> None:
        content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}}
        await self.request("execute_request", {**content, "allow_stdin": False})

    async def stop(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        async with httpx.AsyncClient() as http:
            await http.delete(f"{self.url}/api/kernels/{self.id}", headers=self.headers)


async def runs(url: str, blocks: int, per_block: int, label: str) -> None:
    with tempfile.TemporaryDirectory(prefix="runfix-remote-") as tmp:
        folder = Path(tmp)
        wire = Wire()
        options = {"executor": "remote", "remote": {"url": url, "tokenEnv": TOKEN_ENV}}
        await wire.start(folder, options, INLAY)
        uri = wire.open(folder / "trivial.py", "x = 1\n")
        raw, plain = RawKernel(url), RawKernel(url, ack_now=False)
        await raw.start()
        await plain.start()
        for _ in range(5):  # kernels up, caches warm
            assert (await wire.run(uri))["status"] == "ok"
            await raw.execute("x = 1")
            await plain.execute("x = 1")
        times: dict[str, list[float]] = {"runfix": [], "raw": [], "plain": []}
        for block in range(blocks * 3):
            name = ("runfix", "raw", "plain")[block % 3]
            for _ in range(per_block):
                t = time.perf_counter()
                if name == "runfix":
                    await wire.run(uri)
                else:
                    await (raw if name == "raw" else plain).execute("x = 1")
                times[name].append(time.perf_counter() - t)
        await raw.stop()
        await plain.stop()
        await wire.stop()
    ours, theirs = statistics.median(times["runfix"]), statistics.median(times["raw"])
    bare = statistics.median(times["plain"])
    print(
        f"{label}: trivial run through runfix.run {ms(ours)} vs the raw WebSocket round trip "
        f"{ms(theirs)} = {ours / theirs:.3f}x (+{ms(ours - theirs)}; {len(times['raw'])} runs "
        f"each); a raw client that delays its ACKs (no TCP_QUICKACK): {ms(bare)}"
    )


async def starts(url: str, count: int, label: str) -> None:
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory(prefix="runfix-remote-") as tmp:
        for _ in range(count):
            kernel = RemoteKernel(Path(tmp), RemoteConfig(url, TOKEN_ENV))
            t = time.perf_counter()
            await kernel.start()
            ours.append(time.perf_counter() - t)
            await kernel.shutdown()
            raw = RawKernel(url)
            t = time.perf_counter()
            await raw.start()
            theirs.append(time.perf_counter() - t)
            await raw.stop()
    a, b = statistics.median(ours), statistics.median(theirs)
    print(
        f"{label}: kernel start, runfix {ms(a)} vs raw create + WebSocket + kernel_info "
        f"{ms(b)} = {a / b:.2f}x ({count} each)"
    )


async def main(blocks: int, per_block: int, count: int) -> None:
    os.environ[TOKEN_ENV] = TOKEN  # the runfix servers started here read it
    server = JupyterServer().start()
    proxy = Proxy(server.port, delay=0.025)
    try:
        await runs(server.url, blocks, per_block, "loopback")
        await starts(server.url, count, "loopback")
        await runs(proxy.url, blocks, max(per_block // 2, 5), "+50 ms round trip")
        await starts(proxy.url, count, "+50 ms round trip")
    finally:
        proxy.close()
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--runs", type=int, default=50, help="runs per block")
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.blocks, args.runs, args.starts))
