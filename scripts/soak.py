"""Soak: thousands of mixed runs against one real `runfix serve`; does it keep its size?

Runs ok, error, timeout, output-flood and restart cases in a fixed shuffled
order through `runfix.run` over stdio, and prints the server's resident memory
and open file descriptors after start-up, after a warm-up, and at the end.
Figures, not assertions: `.ci/run` prints them.

    .venv/bin/python scripts/soak.py [--runs 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_lsp import bench_client, start_server, stop_server

CASES = {
    "ok": ("x = sum(range(100))\nx\n", 70),
    "error": ("{}['missing']\n", 15),
    "print": ("for i in range(20):\n    print(i)\n", 10),
    "flood": ("print('y' * 1_000_000)\n", 2),
    "timeout": ("import time\ntime.sleep(5)\n", 2),
    "restart": (None, 1),
}


def _resident(pid: int) -> tuple[float, int]:
    """The process's resident memory (MB) and open file descriptors."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    return rss / 1024, len(list(Path(f"/proc/{pid}/fd").iterdir()))


async def soak(runs: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="runfix-soak-"))
    client = bench_client()
    client.feature(lsp.WINDOW_SHOW_MESSAGE)(lambda params: None)  # "kernel restarted"
    options = {"python": sys.executable, "timeout": 0.3, "outputLimit": 10_000, "interruptGrace": 2}
    await start_server(client, folder, options)
    pid = client._server.pid
    names = list(CASES)
    order = random.Random(7).choices(names, weights=[CASES[n][1] for n in names], k=runs)
    uris: dict[str, str] = {}
    for name, (code, _) in CASES.items():
        if code is None:
            continue
        path = folder / f"{name}.py"
        path.write_text(code)
        uris[name] = path.as_uri()
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(path.as_uri(), "python", 1, code))
        )

    async def one(name: str) -> Any:
        if name == "restart":
            return await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams("runfix.restart", [])
            )
        return await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("runfix.run", [{"uri": uris[name]}])
        )

    await one("ok")
    started = _resident(pid)
    warm = min(200, runs // 10)
    counts: dict[str, int] = {}
    began = time.perf_counter()
    for number, name in enumerate(order, 1):
        answer = await one(name)
        status = answer["status"] if isinstance(answer, dict) and "status" in answer else name
        counts[status] = counts.get(status, 0) + 1
        if number == warm:
            warmed = _resident(pid)
    took = time.perf_counter() - began
    ended = _resident(pid)
    await stop_server(client)

    print(f"soak: {runs} runs in {took:.0f}s ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    print(
        f"soak: server memory {started[0]:.1f} MB after start-up, {warmed[0]:.1f} MB after "
        f"{warm} runs, {ended[0]:.1f} MB at the end ({ended[0] - started[0]:+.1f} MB from "
        f"start-up, {ended[0] - warmed[0]:+.1f} MB from warm-up)"
    )
    print(
        f"soak: open files {started[1]} after start-up, {warmed[1]} after warm-up, "
        f"{ended[1]} at the end"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5000)
    args = parser.parse_args()
    asyncio.run(soak(args.runs))


if __name__ == "__main__":
    main()
