"""What the client can do, read once at `initialize` into a frozen record.

Services ask this record, never the raw `ClientCapabilities` tree; a headless
front end (`runfix run`) has the record's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsp_server.contract import DEBUG_CAPABILITY, INPUT_CAPABILITY, OUTPUTS_CAPABILITY
from lsp_server.text.positions import Width, width_for


@dataclass(frozen=True)
class ClientFeatures:
    """What the client can do, as the services ask it (read once at `initialize`)."""

    inlay_hints: bool = False
    inlay_refresh: bool = False
    inlay_resolve_tooltip: bool = False
    """It fills an inlay hint's tooltip lazily (`inlayHint/resolve`)."""
    configuration: bool = False
    """It answers `workspace/configuration`."""
    document_changes: bool = False
    """It takes versioned `documentChanges` in a `WorkspaceEdit`."""
    code_action_resolve: bool = False
    """It resolves a code action's `edit` lazily (`codeAction/resolve`)."""
    disabled_code_actions: bool = False
    progress: bool = False
    show_document: bool = False
    """It opens a URI it is sent (`window/showDocument`), in a browser when `external`."""
    input: bool = False
    """It answers `runfix/input` (`experimental.runfixInput`)."""
    outputs: bool = False
    """It takes `runfix/outputs` (`experimental.runfixOutputs`): an output view."""
    debug: bool = False
    """It starts a debug session itself (`experimental.runfixDebug`): "Debug cell" and
    "Debug this error" are offered."""
    position_encoding: str = "utf-16"

    @property
    def width(self) -> Width:
        """How a line's length counts in this client's positions."""
        return width_for(self.position_encoding)

    @classmethod
    def from_client(cls, capabilities: Any, position_encoding: str | None) -> ClientFeatures:
        """From `InitializeParams.capabilities` (any missing part is a no)."""

        def get(*path: str) -> Any:
            value = capabilities
            for name in path:
                value = getattr(value, name, None)
                if value is None:
                    return None
            return value

        resolve = get("text_document", "code_action", "resolve_support")
        inlay_resolve = get("text_document", "inlay_hint", "resolve_support")
        experimental = get("experimental")
        return cls(
            inlay_hints=get("text_document", "inlay_hint") is not None,
            inlay_refresh=bool(get("workspace", "inlay_hint", "refresh_support")),
            inlay_resolve_tooltip=inlay_resolve is not None
            and "tooltip" in (inlay_resolve.properties or []),
            configuration=bool(get("workspace", "configuration")),
            document_changes=bool(get("workspace", "workspace_edit", "document_changes")),
            code_action_resolve=resolve is not None and "edit" in (resolve.properties or []),
            disabled_code_actions=bool(get("text_document", "code_action", "disabled_support")),
            progress=bool(get("window", "work_done_progress")),
            show_document=bool(get("window", "show_document", "support")),
            input=isinstance(experimental, dict) and experimental.get(INPUT_CAPABILITY) is True,
            outputs=isinstance(experimental, dict) and experimental.get(OUTPUTS_CAPABILITY) is True,
            debug=isinstance(experimental, dict) and experimental.get(DEBUG_CAPABILITY) is True,
            position_encoding=str(position_encoding or "utf-16"),
        )

    def results_mode(self, setting: str | None) -> str:
        """Where results go: the setting, else inlay hints where the client shows them."""
        if setting:
            return setting
        return "inlay" if self.inlay_hints else "diagnostics"
