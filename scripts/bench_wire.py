"""The benches' shared harness: `Wire`, a thin JSON-RPC client of `runfix serve` over its
stdio (asyncio pipes and `json`, no pygls: its own parsing would add 0.3–1.3 ms to every
figure); the raw jupyter_client baselines (`raw_sync`, `raw_async`, `stop_raw`); and the
figures' formats (`ms`, `pct`, `spread`)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager, KernelManager

SERVER = [sys.executable, "-m", "lsp_server", "serve", "--log-level", "WARNING"]
INLAY: dict[str, Any] = {
    "textDocument": {"inlayHint": {}},
    "workspace": {"inlayHint": {"refreshSupport": True}},
}


class Wire:
    """`runfix serve` over its stdio, speaking JSON-RPC by hand."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.diagnostics: dict[str, int] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None
        self.arrived = 0.0  # when the last message's bytes were in (before parsing them)
        self.size = 0  # and its size
        self.choose: str | None = None
        """The choice it makes when the server asks (`window/showMessageRequest`)."""
        self.configuration: Any = None
        """Its answer to `workspace/configuration` (if the capabilities say it answers)."""

    async def start(
        self,
        folder: Path,
        options: dict[str, Any],
        caps: dict[str, Any],
        server: list[str] = SERVER,
    ) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *server,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            limit=2**26,
        )
        self.reader = asyncio.ensure_future(self._read())
        params = {
            "processId": os.getpid(),
            "rootUri": folder.as_uri(),
            "capabilities": caps,
            "initializationOptions": {
                "python": sys.executable,
                "workspaceTrust": "trusted",  # as VS Code says in a trusted workspace
                **options,
            },
        }
        await self.request("initialize", params)
        self.notify("initialized", {})

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def request(self, method: str, params: Any) -> Any:
        number = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[number] = future
        self._send({"id": number, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            length = 0
            while (line := await out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            body = await out.readexactly(length)
            self.arrived, self.size = time.perf_counter(), length
            message = json.loads(body)
            if "method" in message and "id" in message:  # the server asks: a plain yes
                asked = message["method"] == "workspace/configuration"
                answer: Any = [self.configuration] if asked else None
                if message["method"] == "window/showMessageRequest" and self.choose:
                    answer = {"title": self.choose}
                self._send({"id": message["id"], "result": answer})
            elif "method" in message:
                if message["method"] == "textDocument/publishDiagnostics":
                    uri = message["params"]["uri"]
                    self.diagnostics[uri] = self.diagnostics.get(uri, 0) + 1
            elif (future := self.waiting.pop(message["id"], None)) is not None:
                if "error" in message:
                    future.set_exception(RuntimeError(message["error"]))
                else:
                    future.set_result(message.get("result"))

    def open(self, path: Path, text: str, language: str = "python") -> str:
        uri = path.as_uri()
        item = {"uri": uri, "languageId": language, "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": item})
        return uri

    async def run(self, uri: str, **extra: Any) -> Any:
        answer = await self.request(
            "workspace/executeCommand",
            {"command": "runfix.run", "arguments": [{"uri": uri, **extra}]},
        )
        return answer

    async def typed(
        self, uri: str, version: int, at: dict[str, int], text: str, hover: Any
    ) -> float:
        """Seconds from typing `text` at `at` (the document's `version` after it) until a
        hover (`hover`'s params) is answered: the answer comes after the change is handled."""
        change = {"range": {"start": at, "end": at}, "text": text}
        doc = {"uri": uri, "version": version}
        began = time.perf_counter()
        self.notify("textDocument/didChange", {"textDocument": doc, "contentChanges": [change]})
        await self.request("textDocument/hover", hover)
        return time.perf_counter() - began

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.request("shutdown", None), 30)
            self.notify("exit", None)
        finally:
            assert self.proc is not None
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
            if self.reader is not None:
                self.reader.cancel()


async def raw_async(km: AsyncKernelManager, cwd: Path | None = None) -> Any:
    """The baseline: `km`'s kernel started, and a ready client of it (jupyter_client's own)."""
    await km.start_kernel(**({"cwd": str(cwd)} if cwd is not None else {}))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    return kc


def raw_sync(km: KernelManager, cwd: Path | None = None) -> Any:
    """`raw_async` with jupyter_client's blocking client."""
    km.start_kernel(**({"cwd": str(cwd)} if cwd is not None else {}))
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return kc


async def stop_raw(*raw: tuple[KernelManager | AsyncKernelManager, Any]) -> None:
    """Each (manager, client) of `raw_sync`/`raw_async`: the client closed, the kernel shut."""
    for km, kc in raw:
        kc.stop_channels()
        if isinstance(km, AsyncKernelManager):
            await km.shutdown_kernel(now=True)
        else:
            km.shutdown_kernel(now=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def spread(values: list[float]) -> str:
    return f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f}"


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]
