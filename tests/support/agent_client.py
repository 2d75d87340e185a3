"""A coding agent as the tests play it: the official MCP SDK's client driving `runfix mcp`
over stdio, as an agent client launches it."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import Implementation

from tests.conftest import SERVER_ENV


@asynccontextmanager
async def agent(
    name: str = "test-agent", env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """`runfix mcp` started as an agent client starts it (in the servers' environment, or
    `env`), connected and initialized."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "lsp_server", "mcp"], env=dict(env or SERVER_ENV)
    )
    me = Implementation(name=name, version="1")
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, client_info=me) as s,
    ):
        await s.initialize()
        yield s


async def tool(session: ClientSession, name: str, **arguments: Any) -> Any:
    """The tool's answer (its JSON), or its error text as `{"error": ...}`."""
    result = await session.call_tool(name, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        return {"error": text}
    return json.loads(text) if text else None
