#!/usr/bin/env python3
"""The server's own overhead on "Generate" and on one fix attempt, measured in one run.

A loopback model server answers at once. Baselines, taken in the same run:
the same chat request through the raw `openai` client (the model's part), and
`LocalKernel.variables()` / `execute()` on a kernel holding the same 50
variables (the kernel's part). Overhead = the LSP command's median minus the
medians of the parts it is made of (target ≤ 20 ms). Also prints the prompt
size for a 2,000-line document with 50 variables in the kernel.

Usage: python scripts/bench_model.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
from lsprotocol import types as lsp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_lsp import bench_client, start_server, stop_server

from executor.configs import LocalConfig
from executor.events import RunRequest
from executor.local import LocalKernel
from tests.conftest import apply_edits
from tests.support.model_server import ModelServer, code

SETUP = "\n".join(f"var_{i} = list(range({i}))" for i in range(50)) + "\n"
FAILING = "result = var_3[0] + missing_name\n"
FIXED = "result = var_3[0] + 1"


def document() -> str:
    lines = []
    for i in range(399):
        lines += [f"# %% cell {i}", f"value_{i} = {i} * 2", f"print(value_{i})", "", ""]
    lines += ["# %%", "# ai: sum the first ten values", ""]
    return "\n".join(lines) + "\n"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


async def timed(runs: int, call: Any) -> float:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        await call()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


async def lsp_side(runs: int, folder: Path, model: ModelServer) -> tuple[float, float, int]:
    client = bench_client()
    client.texts, client.versions = {}, {}

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        for change in params.edit.document_changes or []:
            assert isinstance(change, lsp.TextDocumentEdit)
            apply_edits(client, change.text_document.uri, list(change.edits))  # type: ignore[arg-type]
        for uri, edits in (params.edit.changes or {}).items():
            apply_edits(client, uri, list(edits))
        return lsp.ApplyWorkspaceEditResult(applied=True)

    caps = lsp.ClientCapabilities(
        workspace=lsp.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=lsp.WorkspaceEditClientCapabilities(document_changes=True),
        )
    )
    options = {"python": sys.executable, "model": {"baseUrl": model.url, "name": "bench"}}
    await start_server(client, folder, options, caps)
    uri = (folder / "big.py").as_uri()
    text = SETUP + document()
    client.texts[uri], client.versions[uri] = text, 1
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, text))
    )
    setup = lsp.Range(lsp.Position(0, 0), lsp.Position(50, 0))
    run = lsp.ExecuteCommandParams("runfix.run", [{"uri": uri, "range": _plain(setup)}])
    await client.workspace_execute_command_async(run)
    prompt = text.count("\n") - 2
    generate = lsp.ExecuteCommandParams(
        "runfix.generate", [{"uri": uri, "position": {"line": prompt, "character": 0}}]
    )
    model.default = code("total = sum(value for value in range(10))")
    for _ in range(3):
        await client.workspace_execute_command_async(generate)
    prompt_chars = sum(len(m["content"]) for m in model.requests[-1]["messages"])
    t_generate = await timed(runs, lambda: client.workspace_execute_command_async(generate))

    fix_uri = (folder / "fix.py").as_uri()
    fix_lines = lsp.Range(lsp.Position(0, 0), lsp.Position(1, 0))
    run_and_fix = lsp.ExecuteCommandParams(
        "runfix.runAndFix", [{"uri": fix_uri, "range": _plain(fix_lines)}]
    )
    model.default = code(FIXED)
    times = []
    for i in range(runs + 3):
        version = 1 + i * 10
        client.texts[fix_uri], client.versions[fix_uri] = FAILING, version
        if i:
            client.text_document_did_close(
                lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(fix_uri))
            )
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(fix_uri, "python", version, FAILING))
        )
        began = time.perf_counter()
        answer = await client.workspace_execute_command_async(run_and_fix)
        if i >= 3:
            times.append(time.perf_counter() - began)
        assert answer["status"] == "fixed", answer
    await stop_server(client)
    return t_generate, statistics.median(times), prompt_chars


def _plain(rng: lsp.Range) -> dict[str, Any]:
    return {
        "start": {"line": rng.start.line, "character": rng.start.character},
        "end": {"line": rng.end.line, "character": rng.end.character},
    }


async def baselines(runs: int, folder: Path, model: ModelServer) -> tuple[float, float, float]:
    """Medians of: the model request (raw openai), variables(), one execute()."""
    messages = model.requests[-1]["messages"]
    client = openai.AsyncOpenAI(base_url=model.url, api_key="bench", max_retries=0)

    async def ask() -> None:
        stream = await client.chat.completions.create(model="bench", messages=messages, stream=True)
        async for _ in stream:
            pass

    t_model = await timed(runs, ask)
    await client.close()
    kernel = LocalKernel(folder, LocalConfig(sys.executable))
    await kernel.start()
    path = str(folder / "fix.py")
    await kernel.execute(RunRequest(SETUP, path))
    t_vars = await timed(runs, kernel.variables)
    t_run = await timed(runs, lambda: kernel.execute(RunRequest(FIXED + "\n", path)))
    await kernel.shutdown()
    return t_model, t_vars, t_run


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="runfix-bench-") as tmp, ModelServer() as model:
        folder = Path(tmp)
        t_generate, t_fix, prompt_chars = await lsp_side(args.runs, folder, model)
        t_model, t_vars, t_run = await baselines(args.runs, folder, model)
    generate_overhead = t_generate - t_model - t_vars
    # One attempt: run (fails) → variables → model → run the candidate → apply the edit.
    fix_overhead = t_fix - 2 * t_run - t_vars - t_model
    print(f"medians of {args.runs}; the model server answers at once")
    print(f"  raw openai streamed request   {ms(t_model)}")
    print(f"  kernel variables() (50 vars)  {ms(t_vars)}")
    print(f"  kernel execute() trivial      {ms(t_run)}")
    print(f"Generate over LSP               {ms(t_generate)}")
    print(f"  server overhead               {ms(generate_overhead)}  (target <= 20 ms)")
    print(f"Run and fix, one attempt        {ms(t_fix)}")
    print(f"  server overhead               {ms(fix_overhead)}  (target <= 20 ms)")
    print(f"prompt size, 2,000 lines + 50 variables: {prompt_chars:,} characters")


if __name__ == "__main__":
    asyncio.run(main())
