"""MCP as `runfix mcp` speaks it (`lsp_server.cli.mcp_wire`), message by message: what an
agent's client sends that the SDK's client never would (a batch, a bad id, a wrong
argument, a cancelled call). The SDK's own client drives it end to end in
`tests/e2e/test_agents.py`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from lsp_server.cli.mcp import TOOLS
from lsp_server.cli.mcp_wire import McpServer, Param, Tool, ToolError


async def _echo(args: dict[str, Any], agent: str) -> dict[str, Any]:
    if args["text"] == "fail":
        raise ToolError("it failed, and says why")
    if args["text"] == "crash":
        raise KeyError("a bug")
    if args["text"] == "slow":
        await asyncio.sleep(0.3)
    return {"text": args["text"], "times": args["times"], "agent": agent}


ECHO = Tool("echo", "Echo.", (Param("text", str, True), Param("times", int)), True, _echo)


async def _session(*messages: Any, settle: float = 0.05, last: float = 0) -> list[dict[str, Any]]:
    """What the server wrote for `messages`, sent one after the other (`settle` apart), the
    input ending `last` seconds after the last."""
    written: list[dict[str, Any]] = []
    server = McpServer("runfix", "1", "how", [ECHO], lambda b: written.append(json.loads(b)))

    async def incoming() -> AsyncIterator[Any]:
        for message in messages:
            yield message
            await asyncio.sleep(settle)
        await asyncio.sleep(last)

    await server.serve(incoming())
    return written


def _call(ident: Any, arguments: Any, name: str = "echo") -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


async def test_the_handshake_takes_the_agents_version_and_name() -> None:
    hello = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "Claude Code"}}
    [answer, called] = await _session(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _call(2, {"text": "hi"}),
    )
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    assert answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert called["result"]["structuredContent"]["agent"] == "Claude Code"


async def test_a_version_not_spoken_here_gets_the_newest() -> None:
    hello = {"protocolVersion": "1999-01-01", "clientInfo": {"name": "x"}}
    [answer] = await _session({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    assert answer["result"]["protocolVersion"] == "2025-11-25"


async def test_a_tools_answer_is_text_and_structured_and_null_is_a_left_out_argument() -> None:
    [answer] = await _session(_call("a", {"text": "hi", "times": None, "extra": [1]}))
    assert answer["id"] == "a"
    result = answer["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result["structuredContent"] == {"text": "hi", "times": None, "agent": "an agent"}


async def test_wrong_arguments_are_the_tools_error_saying_which_and_why() -> None:
    said = await _session(
        _call(1, {"times": 2}),
        _call(2, {"text": 5}),
        _call(3, {"text": "x", "times": True}),
        _call(4, ["x"]),
        _call(5, {"text": "fail"}),
        _call(6, {"text": "crash"}),
    )
    texts = [a["result"]["content"][0]["text"] for a in said]
    assert all(a["result"]["isError"] for a in said)
    assert texts[:4] == [
        "echo: `text` is needed",
        "echo: `text` must be a string, not 5",
        "echo: `times` must be an integer, not true",
        "echo: its arguments must be an object",
    ]
    assert texts[4] == "it failed, and says why"
    assert "echo failed" in texts[5] and "a bug" in texts[5]


async def test_what_is_not_a_call_of_a_tool_gets_a_json_rpc_error() -> None:
    said = await _session(
        _call(1, {}, name="nope"),
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {}},
        [{"jsonrpc": "2.0", "id": 3, "method": "ping"}],  # a batch
        {"jsonrpc": "2.0", "id": {"an": "object"}, "method": "ping"},
        {"id": 5, "method": "ping"},  # no version
        {"jsonrpc": "2.0", "id": 6, "result": {}},  # a response: nobody waits for it
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
    )
    codes = [(a["id"], a.get("error", {}).get("code")) for a in said]
    assert codes == [
        (1, -32602),
        (2, -32601),
        (None, -32600),
        (None, -32600),
        (None, -32600),
        (7, None),
    ]
    assert "run" not in said[0]["error"]["message"] and "echo" in said[0]["error"]["message"]


async def test_a_cancelled_call_is_never_answered_and_the_next_is() -> None:
    said = await _session(
        _call(1, {"text": "slow"}),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        _call(2, {"text": "after"}),
        last=0.6,  # long after the slow call would have answered
    )
    assert [a["id"] for a in said] == [2]


async def test_the_input_ending_cancels_the_calls_under_way() -> None:
    said = await asyncio.wait_for(_session(_call(1, {"text": "slow"}), settle=0), 10)
    assert said == []


def test_runfix_tools_list_as_mcp_describes_them() -> None:
    listed = {tool.name: tool.listing() for tool in TOOLS}
    run_lines = listed["run_lines"]
    assert run_lines["inputSchema"]["required"] == ["path", "first"]
    assert run_lines["inputSchema"]["properties"]["first"] == {"type": "integer"}
    assert run_lines["annotations"]["readOnlyHint"] is False
    assert listed["variables"]["annotations"]["readOnlyHint"] is True
    assert not any(
        t["description"].startswith(" ") or "\n " in t["description"] for t in listed.values()
    )


async def test_a_cancel_naming_no_call_ends_nothing() -> None:
    """Issue 58, S3: a `requestId` that is a list or an object ended `runfix mcp`."""
    said = await _session(
        _call(1, {"text": "slow"}),
        *(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": odd}}
            for odd in ([1], {"id": 1}, None, True, 1.5)
        ),
        _call(2, {"text": "after"}),
        last=0.6,
    )
    assert [a["id"] for a in said] == [1, 2]
