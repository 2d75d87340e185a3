#!/usr/bin/env python3
"""How much runfix adds on top of a raw Jupyter kernel, measured in one run.

- trivial run (`x = 1+1`) through `runfix serve` (workspace/executeCommand runfix.run,
  answered after results are published) vs. the same code through raw jupyter_client
  (`execute_interactive` on a fresh IPC kernel): medians and their ratio (target ≤ 1.25×);
- kernel cold start: runfix's LocalKernel vs. raw AsyncKernelManager + wait_for_ready;
- code-action latency on a 2,000-line document (target p50 ≤ 5 ms);
- a trivial run per other language whose kernel is here (bash_kernel, Deno, IRkernel):
  runfix.run over LSP vs raw jupyter_client on the same kernelspec (target ≤ 1.15× each).

Usage: python scripts/bench_run.py [--runs N] [--language-runs N]
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

sys.path.insert(0, str(Path(__file__).parent.parent))  # the tests' kernelspecs

from bench_lsp import bench_client, ms, start_server, stop_server
from jupyter_client.manager import AsyncKernelManager
from lsprotocol import types as lsp

from executor.configs import LocalConfig
from executor.kernelspecs import find_spec
from executor.local import LocalKernel
from tests.support.kernels import write_kernelspecs

LANGUAGES = {
    # runfix's language id: (extension, the kernelspec languages, a trivial statement)
    "shellscript": (".sh", ("bash",), "x=$((1 + 1))"),
    "typescript": (".ts", ("typescript",), "var x = 1 + 1;"),
    "r": (".R", ("r",), "x <- 1 + 1"),
}


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def raw_jupyter(runs: int, folder: Path) -> tuple[float, float]:
    began = time.perf_counter()
    km = AsyncKernelManager(transport="ipc", ip=str(folder / "raw-kernel"))
    await km.start_kernel(cwd=str(folder))
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    cold = time.perf_counter() - began
    times = []
    try:
        for _ in range(5):
            await kc.execute_interactive("x = 1+1", store_history=False, output_hook=lambda m: None)
        for _ in range(runs):
            t = time.perf_counter()
            await kc.execute_interactive("x = 1+1", store_history=False, output_hook=lambda m: None)
            times.append(time.perf_counter() - t)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    return statistics.median(times), cold


async def runfix_cold_start(folder: Path) -> float:
    kernel = LocalKernel(folder, LocalConfig(sys.executable))
    began = time.perf_counter()
    await kernel.start()
    cold = time.perf_counter() - began
    await kernel.shutdown()
    return cold


async def runfix_server(runs: int, folder: Path) -> tuple[float, list[float]]:
    client = bench_client()
    await start_server(client, folder, {"python": sys.executable})
    trivial = (folder / "trivial.py").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(trivial, "python", 1, "x = 1+1\n"))
    )
    command = lsp.ExecuteCommandParams("runfix.run", [{"uri": trivial}])
    for _ in range(5):
        await client.workspace_execute_command_async(command)  # the first one waits for the kernel
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        answer = await client.workspace_execute_command_async(command)
        times.append(time.perf_counter() - t)
        assert answer["status"] == "ok", answer

    big = (folder / "big.py").as_uri()
    lines = []
    for i in range(400):
        lines += [f"# %% cell {i}", f"value_{i} = {i} * 2", f"print(value_{i})", "", ""]
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(big, "python", 1, "\n".join(lines)))
    )
    action_times = []
    for i in range(300):
        line = (i * 37) % len(lines)
        params = lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(big),
            lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
        t = time.perf_counter()
        await client.text_document_code_action_async(params)
        action_times.append(time.perf_counter() - t)
    await stop_server(client)
    return statistics.median(times), action_times


async def raw_language(name: str, code: str, runs: int) -> float:
    km = AsyncKernelManager(kernel_name=name, transport="tcp")
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=60)
    times = []
    try:
        for i in range(runs + 3):
            t = time.perf_counter()
            await kc.execute_interactive(code, output_hook=lambda m: None, timeout=60)
            if i >= 3:
                times.append(time.perf_counter() - t)
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)
    return statistics.median(times)


async def runfix_language(language: str, suffix: str, code: str, runs: int, folder: Path) -> float:
    client = bench_client()
    await start_server(client, folder, {"python": sys.executable})
    uri = (folder / f"trivial{suffix}").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, language, 1, code + "\n"))
    )
    command = lsp.ExecuteCommandParams("runfix.run", [{"uri": uri}])
    times = []
    for i in range(runs + 3):
        t = time.perf_counter()
        answer = await client.workspace_execute_command_async(command)
        if i >= 3:  # the first waits for the kernel
            times.append(time.perf_counter() - t)
        assert answer["status"] == "ok", answer
    await stop_server(client)
    return statistics.median(times)


async def languages(runs: int, folder: Path) -> None:
    print(f"trivial run per language, median of {runs} (target <= 1.15x each):")
    for language, (suffix, kernel_languages, code) in LANGUAGES.items():
        spec = find_spec(kernel_languages)
        if spec is None:
            print(f"  {language:<12} no kernel here: skipped")
            continue
        raw = await raw_language(spec.name, code, runs)
        ours = await runfix_language(language, suffix, code, runs, folder)
        print(
            f"  {language:<12} ({spec.name}) raw {ms(raw)}  runfix {ms(ours)}  "
            f"ratio {ours / raw:.2f}x"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--language-runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-") as tmp:
        folder = Path(tmp)
        write_kernelspecs(folder / "jupyter")
        os.environ["JUPYTER_PATH"] = str(folder / "jupyter")
        raw_median, raw_cold = await raw_jupyter(args.runs, folder)
        ours_median, action_times = await runfix_server(args.runs, folder)
        ours_cold = await runfix_cold_start(folder)
        if args.language_runs:
            await languages(args.language_runs, folder)
    print(f"trivial run, median of {args.runs}:")
    print(f"  raw jupyter_client     {ms(raw_median)}")
    print(f"  runfix.run over LSP    {ms(ours_median)}")
    print(f"  ratio                  {ours_median / raw_median:.2f}x  (target <= 1.25x)")
    print("kernel cold start:")
    print(f"  raw jupyter_client     {raw_cold:.2f} s")
    print(f"  runfix LocalKernel     {ours_cold:.2f} s  ({ours_cold / raw_cold:.2f}x)")
    print("code actions on a 2,000-line document:")
    p50, p95 = ms(pct(action_times, 0.5)), ms(pct(action_times, 0.95))
    print(f"  p50 {p50}  p95 {p95}  (target p50 <= 5 ms)")


if __name__ == "__main__":
    asyncio.run(main())
