"""The agent of the VS Code notebook test (`editors/vscode/test/e2e.mjs` starts it): the MCP
SDK's client over `runfix mcp` runs one cell of a notebook open in code-server, by the
number the notebook gives it, and prints the tool's answer as JSON.

    python -m tests.editors.vscode_agent NOTEBOOK CELL
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from tests.support.agent_client import agent, tool


async def _run(path: str, cell: int) -> object:
    # the editor's environment (code-server's): its server is the one to reach
    async with agent("e2e-agent", env=dict(os.environ)) as session:
        return await tool(session, "run_cell", path=path, cell=cell)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_run(sys.argv[1], int(sys.argv[2])))), flush=True)
