"""initialize / shutdown / configuration changes.

The client's capabilities are read once, at `initialize`, into `ClientFeatures`.
Settings are read per folder on first use and again after
`workspace/didChangeConfiguration`; a changed interpreter replaces the
folder's kernel at its next use.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from lsp_server.capabilities import ClientFeatures
from lsp_server.lsp.server import RunfixServer
from lsp_server.lsp.text import DocumentWorkspace
from lsp_server.settings import CLIENT_TRUST

log = logging.getLogger(__name__)

RESTRICTED = (
    "VS Code's Restricted Mode runs nothing; trust the workspace "
    "(Workspaces: Manage Workspace Trust) to run its code"
)


def register(server: RunfixServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def initialize(ls: RunfixServer, params: lsp.InitializeParams) -> None:
        ls.init_options = params.initialization_options
        # The client's own trust decision (VS Code's Workspace Trust), never a setting.
        said = ls.init_options.get(CLIENT_TRUST) if isinstance(ls.init_options, dict) else None
        if said == "trusted":  # for the folders it was said of, not for all to come
            ls.flow.trust_workspace(ls.editor.workspace_folders())
        elif said == "restricted":
            ls.editor.restricted = RESTRICTED
        # pygls made its workspace just before this handler; ours splits lines as LSP does.
        ls.protocol._workspace = DocumentWorkspace.like(ls.workspace)
        encoding = ls.workspace.position_encoding
        ls.editor.features = ClientFeatures.from_client(
            params.capabilities, str(encoding) if encoding else None
        )

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: RunfixServer, params: lsp.InitializedParams) -> None:
        """Agents (`runfix mcp`) may reach the workspace's folders from now on."""
        await ls.agents.open(ls.editor.workspace_folders())

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def folders_changed(
        ls: RunfixServer, params: lsp.DidChangeWorkspaceFoldersParams
    ) -> None:
        """A folder added later is reachable by agents too (through the editor's consent,
        never served alone); a folder removed is not."""
        held = ls.editor.workspace_folders()
        await ls.agents.close([f for f in ls.agents.folders() if f not in held])
        await ls.agents.open(held)

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: RunfixServer, params: None) -> None:
        log.info("the client asked the server to shut down")
        await ls.shut_down()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: RunfixServer, params: lsp.DidChangeConfigurationParams
    ) -> None:
        await ls.flow.settings_changed(ls.editor.open_documents())
