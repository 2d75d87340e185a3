#!/usr/bin/env python3
"""How much runfix adds on top of a raw Jupyter kernel, measured in one run.

- a trivial run per language whose kernel is here (Python's ipykernel, bash_kernel, Deno,
  IRkernel) through `runfix serve` (workspace/executeCommand runfix.run over its stdio,
  JSON-RPC written by hand as an editor's client does; answered after results are
  published) vs raw jupyter_client's `execute_interactive` on the same kernelspec, in
  alternating blocks: medians and their ratio (target ≤ 1.1× each);
- kernel cold start: runfix's LocalKernel vs. raw AsyncKernelManager + wait_for_ready;
- code-action latency on a 2,000-line document (target p50 ≤ 5 ms).

runfix's own cost, on a kernel that answers at once, is `bench_cost.py`'s.

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
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))  # the tests' kernelspecs

from bench_wire import INLAY, Wire, ms, pct, raw_async, stop_raw
from jupyter_client.manager import AsyncKernelManager

from executor.configs import LocalConfig
from executor.kernelspecs import find_spec
from executor.local import LocalKernel
from tests.support.kernels import write_kernelspecs

LANGUAGES = {
    # runfix's language id: (extension, the kernelspec languages, a trivial statement)
    "python": (".py", ("python",), "x = 1+1"),
    "shellscript": (".sh", ("bash",), "x=$((1 + 1))"),
    "typescript": (".ts", ("typescript",), "var x = 1 + 1;"),
    "r": (".R", ("r",), "x <- 1 + 1"),
}
BLOCK = 10
"""Runs of one side before the other's: the two alternate, so the machine's drift is shared."""


async def raw_client(language: str, folder: Path) -> tuple[AsyncKernelManager, Any]:
    """jupyter_client on the kernel runfix would start: Python's ipykernel over IPC (as
    runfix's own), another language's kernelspec over TCP (as runfix starts it)."""
    if language == "python":
        km = AsyncKernelManager(transport="ipc", ip=str(folder / "raw-kernel"))
    else:
        spec = find_spec(LANGUAGES[language][1])
        assert spec is not None
        km = AsyncKernelManager(kernel_name=spec.name, transport="tcp")
    return km, await raw_async(km, folder)


async def trivial(language: str, runs: int, folder: Path) -> tuple[float, float]:
    """Medians of a trivial run, raw jupyter_client and runfix.run over LSP, interleaved."""
    suffix, _, code = LANGUAGES[language]
    km, kc = await raw_client(language, folder)
    wire = Wire()
    await wire.start(folder, {"python": sys.executable}, INLAY)
    uri = wire.open(folder / f"trivial{suffix}", code + "\n", language)
    raw: list[float] = []
    ours: list[float] = []

    def quiet(message: object) -> None:
        pass

    try:
        for _ in range(5):  # runfix's first waits for its kernel
            await kc.execute_interactive(code, store_history=False, output_hook=quiet)
            await wire.run(uri)
        for _ in range(max(1, runs // BLOCK)):
            for _ in range(BLOCK):
                t = time.perf_counter()
                await kc.execute_interactive(code, store_history=False, output_hook=quiet)
                raw.append(time.perf_counter() - t)
            for _ in range(BLOCK):
                t = time.perf_counter()
                answer = await wire.run(uri)
                ours.append(time.perf_counter() - t)
                assert answer["status"] == "ok", answer
    finally:
        await wire.stop()
        await stop_raw((km, kc))
    return statistics.median(raw), statistics.median(ours)


async def cold_starts(folder: Path) -> tuple[float, float]:
    """Seconds to a ready Python kernel: raw AsyncKernelManager + wait_for_ready, runfix's
    LocalKernel."""
    began = time.perf_counter()
    km, kc = await raw_client("python", folder)
    raw = time.perf_counter() - began
    await stop_raw((km, kc))
    kernel = LocalKernel(folder, LocalConfig(sys.executable))
    began = time.perf_counter()
    await kernel.start()
    ours = time.perf_counter() - began
    await kernel.shutdown()
    return raw, ours


async def code_actions(folder: Path) -> list[float]:
    """Code-action round trips on a 2,000-line document."""
    wire = Wire()
    await wire.start(folder, {"python": sys.executable}, INLAY)
    lines = []
    for i in range(400):
        lines += [f"# %% cell {i}", f"value_{i} = {i} * 2", f"print(value_{i})", "", ""]
    big = wire.open(folder / "big.py", "\n".join(lines))
    times = []
    try:
        for i in range(300):
            at = {"line": (i * 37) % len(lines), "character": 0}
            params = {
                "textDocument": {"uri": big},
                "range": {"start": at, "end": at},
                "context": {"diagnostics": []},
            }
            t = time.perf_counter()
            await wire.request("textDocument/codeAction", params)
            times.append(time.perf_counter() - t)
    finally:
        await wire.stop()
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="Python's runs each way")
    parser.add_argument("--language-runs", type=int, default=50, help="each other language's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-") as tmp:
        folder = Path(tmp)
        write_kernelspecs(folder / "jupyter")
        os.environ["JUPYTER_PATH"] = str(folder / "jupyter")
        print("trivial run, median, raw jupyter_client vs runfix.run (target <= 1.1x each):")
        for language, (_, kernel_languages, _) in LANGUAGES.items():
            python = language == "python"
            spec = None if python else find_spec(kernel_languages)
            if not python and spec is None:
                print(f"  {language:<12} no kernel here: skipped")
                continue
            runs = args.runs if python else args.language_runs
            if runs <= 0:
                continue
            raw, ours = await trivial(language, runs, folder)
            name = "ipykernel" if spec is None else spec.name
            print(
                f"  {language:<12} ({name}, {runs} each) raw {ms(raw)}  runfix {ms(ours)}  "
                f"ratio {ours / raw:.2f}x  (+{(ours - raw) * 1000:.2f} ms)"
            )
        raw_cold, ours_cold = await cold_starts(folder)
        action_times = await code_actions(folder)
    print("kernel cold start:")
    print(f"  raw jupyter_client     {raw_cold:.2f} s")
    print(f"  runfix LocalKernel     {ours_cold:.2f} s  ({ours_cold / raw_cold:.2f}x)")
    print("code actions on a 2,000-line document:")
    p50, p95 = ms(pct(action_times, 0.5)), ms(pct(action_times, 0.95))
    print(f"  p50 {p50}  p95 {p95}  (target p50 <= 5 ms)")


if __name__ == "__main__":
    asyncio.run(main())
