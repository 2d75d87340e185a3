"""Issue 36: agents against the editor's consent and its server (S2 4–8, S3 12), with the
official MCP SDK's client driving `runfix mcp` and pytest-lsp the editor's `runfix serve`."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import hover_text, open_doc, run
from tests.support.agent_client import agent, tool

ALLOW_ONCE, ALLOW, DENY = "Allow once", "Allow for this session", "Deny"


async def test_a_denied_agent_reads_nothing_of_the_kernel_and_cannot_interrupt(
    initialized: Any, folder: Path
) -> None:
    """S2 4, 5 (interrupt): after Deny, `variables` and `inspect_value` answer nothing of
    the kernel, and `interrupt` asks as a run does (Deny: the user's cell runs on)."""
    uri = open_doc(initialized, folder / "slow.py", "secret = 'abc'\nimport time\ntime.sleep(2)\n")
    initialized.answer = DENY
    async with agent("nosy") as session:
        refused = await tool(session, "run_code", folder=str(folder), code="1")
        assert "did not allow" in refused["error"]
        human = asyncio.ensure_future(run(initialized, uri))
        await asyncio.sleep(0.5)
        listed = await tool(session, "variables", folder=str(folder))
        value = await tool(session, "inspect_value", folder=str(folder), expression="secret")
        stopped = await tool(session, "interrupt", folder=str(folder))
        assert (await human)["status"] == "ok"  # not interrupted
    assert "denied" in listed["error"] and "secret" not in str(listed)
    assert "denied" in value["error"] and "abc" not in str(value)
    assert "did not allow" in stopped["error"]
    assert len(initialized.questions) == 2  # the run's question and the interrupt's


async def test_allowing_again_lifts_the_denial(initialized: Any, folder: Path) -> None:
    initialized.answer = DENY
    async with agent("nosy") as session:
        await tool(session, "run_code", folder=str(folder), code="x = 1")
        assert "error" in await tool(session, "variables", folder=str(folder))
        initialized.answer = ALLOW
        assert (await tool(session, "run_code", folder=str(folder), code="x = 1"))["status"] == "ok"
        listed = await tool(session, "variables", folder=str(folder))
    assert [v["name"] for v in listed["variables"]] == ["x"]


async def test_allow_once_runs_only_the_agent_its_question_named(
    initialized: Any, folder: Path
) -> None:
    """S2 5: two agents ask at once; each is asked about by name, and "Allow once" lets
    one call run per question."""
    initialized.answer = ALLOW_ONCE
    marks = folder / "marks"
    marks.mkdir()
    async with agent("first") as one, agent("second") as two:

        async def call(session: Any, name: str) -> Any:
            code = f"open({str(marks / name)!r}, 'w').write('ran')"
            return await tool(session, "run_code", folder=str(folder), code=code)

        said = await asyncio.gather(call(one, "first"), call(two, "second"))
    assert [s.get("status") for s in said] == ["ok", "ok"], said
    named = sorted(
        name
        for q in initialized.questions
        for name in ("first", "second")
        if f'"{name}"' in q.message
    )
    assert named == ["first", "second"]  # one question for each, naming it


async def test_an_answer_the_agent_gave_up_on_is_not_the_next_calls(
    initialized: Any, folder: Path
) -> None:
    """S2 6: an agent cancels a call (`notifications/cancelled`); its late answer must not
    be read as the next call's."""
    initialized.answer = ALLOW
    async with agent() as session:
        slow = asyncio.ensure_future(
            tool(session, "run_code", folder=str(folder), code="import time\ntime.sleep(1)\n'slow'")
        )
        await asyncio.sleep(0.5)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        answers = [
            (await tool(session, "run_code", folder=str(folder), code=f"'call {n}'"))["output"]
            for n in range(3)
        ]
    assert answers == ["'call 0'\n", "'call 1'\n", "'call 2'\n"]


@pytest.mark.settings({"outputLimit": 40_000_000})
async def test_results_over_the_line_limit_are_bounded_and_the_next_call_works(
    initialized: Any, folder: Path
) -> None:
    """S2 7: what the runs left on a file is more than an answer may hold."""
    code = "print('a' * 9_000_000)\nprint('b' * 9_000_000)\nprint('end')\n"
    uri = open_doc(initialized, folder / "big.py", code)
    assert (await run(initialized, uri))["status"] == "ok"
    async with agent() as session:
        for _ in range(20):  # (the results are kept by then; a loaded machine gets time)
            said = await tool(session, "results", path=str(folder / "big.py"))
            if len(said.get("results", ())) == 3:
                break
            await asyncio.sleep(0.5)
        after = await tool(session, "results", path=str(folder / "big.py"), first=3)
    assert "fewer lines" in said.get("truncated", ""), {k: str(v)[:300] for k, v in said.items()}
    assert sum(len(r["output"]) for r in said["results"]) < 16 * 1024 * 1024
    assert [r["output"] for r in after["results"]] == ["end\n"]  # the next answer is its own


async def test_run_file_on_a_fifo_is_refused_and_the_editor_keeps_answering(
    initialized: Any, folder: Path
) -> None:
    """S2 8: a FIFO named like a script would block a read forever."""
    initialized.answer = ALLOW
    os.mkfifo(folder / "pipe.py")
    uri = open_doc(initialized, folder / "x.py", "x = 1\n")
    assert (await run(initialized, uri))["status"] == "ok"
    async with agent() as session:
        said = await asyncio.wait_for(tool(session, "run_file", path=str(folder / "pipe.py")), 10)
    assert "not a regular file" in said["error"]
    assert "int" in await asyncio.wait_for(hover_text(initialized, uri, 0), 10)


async def test_a_spoofed_agent_name_is_quoted_bounded_and_one_line(
    initialized: Any, folder: Path
) -> None:
    """S3 12: a name that would read as runfix's own words, or split a record's row."""
    initialized.answer = ALLOW_ONCE
    name = "evil\nrunfix: this is safe, choose Allow" + "x" * 200
    async with agent(name) as session:
        said = await tool(session, "run_code", folder=str(folder), code="1 + 1")
    assert said["status"] == "ok"
    [question] = initialized.questions
    assert "\n" not in question.message
    assert 'the agent "evil runfix: this is safe' in question.message
    assert len(question.message) < 300
    with sqlite3.connect(folder / ".runfix" / "runs.db") as db:
        [origin] = [row[0] for row in db.execute("SELECT origin FROM runs")]
    assert origin.startswith("agent: evil runfix:") and "\n" not in origin and len(origin) < 80


async def test_odd_paths_get_a_reason(initialized: Any, folder: Path) -> None:
    """S3 12: a 4,000-character name, a `file://` URI where a path goes."""
    initialized.answer = ALLOW
    (folder / "task.py").write_text("print('from the uri')\n")
    async with agent() as session:
        long = await tool(session, "run_file", path=str(folder / ("x" * 4000)))
        by_uri = await tool(session, "run_file", path=(folder / "task.py").as_uri())
        elsewhere = await tool(session, "results", path="file://otherhost/etc/passwd")
    assert "too long" in long["error"]
    assert by_uri["status"] == "ok" and "from the uri" in by_uri["output"]
    assert "another machine" in elsewhere["error"]


def test_runfix_mcp_answers_a_message_too_deep_or_too_long_and_keeps_the_connection(
    tmp_path: Path,
) -> None:
    """Issue 47, S3 10: a call nested 600 deep got no answer (the SDK's parser gave up in
    silence); one 17 MB line ended `runfix mcp`. Each is answered with an error to its id,
    and the next call is answered as ever."""
    import json
    import select
    import subprocess
    import sys

    from tests.conftest import SERVER_ENV

    mcp = subprocess.Popen(
        [sys.executable, "-m", "lsp_server", "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=dict(SERVER_ENV), cwd=tmp_path,
    )  # fmt: skip
    assert mcp.stdin is not None and mcp.stdout is not None

    def ask(line: bytes) -> dict[str, Any]:
        assert mcp.stdin is not None and mcp.stdout is not None
        mcp.stdin.write(line + b"\n")
        mcp.stdin.flush()
        ready, _, _ = select.select([mcp.stdout], [], [], 30)
        assert ready, "no answer"
        answer: dict[str, Any] = json.loads(mcp.stdout.readline())
        return answer

    def message(ident: int, method: str, params: str) -> bytes:
        return f'{{"jsonrpc":"2.0","id":{ident},"method":"{method}","params":{params}}}'.encode()

    try:
        hello = json.dumps(
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            }
        )
        assert "result" in ask(message(1, "initialize", hello))
        mcp.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        deep = "[" * 600 + "]" * 600
        call = f'{{"name":"variables","arguments":{{"folder":"{tmp_path}","x":{deep}}}}}'
        refused = ask(message(2, "tools/call", call))
        assert refused["id"] == 2 and "nested over 100 deep" in refused["error"]["message"]
        huge = ask(message(3, "tools/list", '{"x":"' + "a" * (17 * 2**20) + '"}'))
        assert huge["id"] == 3 and "over 16 MiB was refused" in huge["error"]["message"]
        not_json = ask(b'{"jsonrpc":"2.0","id":4,')
        assert not_json["error"]["code"] == -32700
        tools = ask(message(5, "tools/list", "{}"))
        assert tools["id"] == 5 and any(t["name"] == "run_code" for t in tools["result"]["tools"])
        assert mcp.poll() is None
    finally:
        mcp.kill()
        mcp.wait()
