#!/usr/bin/env python3
"""What the Docker sandbox costs, measured in one run against the local kernel.

- cold start: `DockerKernel.start()` (container created and started, kernel ready,
  helper loaded) vs. `LocalKernel.start()`, medians of --starts (target ≤ 1.5 s);
  plus a bare `docker run` of the image's `true`, the engine's own floor;
- trivial run (`x = 1+1`) through `runfix serve` (workspace/executeCommand
  runfix.run) with `executor: "docker"` vs. `executor: "kernel"`, alternating
  servers so both see the same machine: medians and their ratio (target ≤ 1.2×).

Needs a Docker engine and the sandbox image (`runfix sandbox build`).
Usage: python scripts/bench_docker.py [--runs N] [--starts N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_lsp import bench_client, ms, start_server, stop_server
from lsprotocol import types as lsp

from executor.configs import DEFAULT_IMAGE, DockerConfig, LocalConfig
from executor.docker import DockerKernel, engine
from executor.local import LocalKernel


async def cold_starts(folder: Path, starts: int) -> tuple[list[float], list[float], list[float]]:
    docker_times: list[float] = []
    local_times: list[float] = []
    bare_times: list[float] = []
    client = engine()
    for _ in range(starts):
        for kernel, times in (
            (DockerKernel(folder, DockerConfig()), docker_times),
            (LocalKernel(folder, LocalConfig(sys.executable)), local_times),
        ):
            began = time.perf_counter()
            await kernel.start()
            times.append(time.perf_counter() - began)
            await kernel.shutdown()
        began = time.perf_counter()
        await asyncio.to_thread(
            client.containers.run, DEFAULT_IMAGE, ["true"], remove=True, network_mode="none"
        )
        bare_times.append(time.perf_counter() - began)
    return docker_times, local_times, bare_times


async def server(folder: Path, executor: str) -> tuple[Any, lsp.ExecuteCommandParams]:
    client = bench_client()
    await start_server(client, folder, {"python": sys.executable, "executor": executor})
    uri = (folder / f"trivial_{executor}.py").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, "x = 1+1\n"))
    )
    command = lsp.ExecuteCommandParams("runfix.run", [{"uri": uri}])
    for _ in range(5):
        answer = await client.workspace_execute_command_async(command)  # the first one starts it
        assert answer["status"] == "ok", answer
    return client, command


async def trivial_runs(folder: Path, runs: int) -> dict[str, list[float]]:
    clients = {name: await server(folder, name) for name in ("kernel", "docker")}
    times: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(runs):
        for name, (client, command) in clients.items():
            began = time.perf_counter()
            answer: Any = await client.workspace_execute_command_async(command)
            times[name].append(time.perf_counter() - began)
            assert answer["status"] == "ok", answer
    for client, _ in clients.values():
        await stop_server(client)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--starts", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-") as tmp:
        folder = Path(tmp)
        os.chmod(tmp, 0o755)  # the sandbox user (nobody, under root) enters it
        docker_cold, local_cold, bare = await cold_starts(folder, args.starts)
        times = await trivial_runs(folder, args.runs)
    docker_start, local_start = statistics.median(docker_cold), statistics.median(local_cold)
    print(f"cold start, median of {args.starts}:")
    print(f"  `docker run IMAGE true`      {statistics.median(bare):.2f} s  (the engine's floor)")
    print(f"  local kernel (LocalKernel)   {local_start:.2f} s")
    print(f"  container kernel             {docker_start:.2f} s  (target <= 1.5 s; ", end="")
    print(f"{docker_start / local_start:.2f}x the local kernel)")
    kernel, docker = statistics.median(times["kernel"]), statistics.median(times["docker"])
    print(f"trivial runfix.run over LSP, median of {args.runs} (alternating):")
    print(f"  executor kernel              {ms(kernel)}")
    print(f"  executor docker              {ms(docker)}")
    print(f"  ratio                        {docker / kernel:.2f}x  (target <= 1.2x)")


if __name__ == "__main__":
    asyncio.run(main())
