"""Trust: `runfix.trust` and `runfix.untrust`, and the quick fixes that decide a folder.

A folder's code runs on this machine only once its user decided how (see
`executor.trust`): the first run asks; a client that cannot ask gets a `trust`
diagnostic on the line, and these commands (its quick fixes, `:RunfixTrust`,
VS Code's Workspace Trust) decide. Revoking stops the folder's kernel at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import to_fs_path

from executor.trust import Choice
from lsp_server.contract import (
    TRUST,
    UNTRUST,
    TrustArgs,
    TrustState,
    to_json,
)
from lsp_server.lsp.convert import data_of
from lsp_server.lsp.features.commands import optional
from lsp_server.lsp.server import RunfixServer

QUICK_FIXES = (
    ("Trust this folder", Choice.TRUST),
    ("Run this folder in the sandbox", Choice.SANDBOX),
    ("Run this folder on runfix's own Python", Choice.OWN),
)


def folders_of(ls: RunfixServer, uri: str | None) -> list[Path]:
    """The folder a document or folder URI names; no URI: every workspace folder."""
    if uri is None:
        roots = [f.uri for f in ls.workspace.folders.values()] or [ls.workspace.root_uri]
        return [Path(p) for r in roots if r and (p := to_fs_path(r))]
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is not None and Path(path).is_dir():
        return [Path(path)]
    return [ls.editor.folder_for(uri)]


def trust_fixes(uri: str, diagnostics: Sequence[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """Quick fixes on a `trust` diagnostic: the choices the question offers."""
    out = []
    for diagnostic in diagnostics:
        data = data_of(diagnostic)
        if data is None or data.kind != "trust":
            continue
        for title, choice in QUICK_FIXES:
            arg = to_json(TrustArgs(uri, choice.value))
            out.append(
                lsp.CodeAction(
                    title=title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    is_preferred=choice == Choice.TRUST or None,
                    command=lsp.Command(title, TRUST, arguments=[arg]),
                )
            )
    return out


def register(server: RunfixServer) -> None:
    @server.command(TRUST)
    def trust(ls: RunfixServer, *args: Any) -> list[Any]:
        arg = optional(TRUST, args, TrustArgs) or TrustArgs()
        answers = []
        for folder in folders_of(ls, arg.uri):
            ls.flow.decide(folder, Choice(arg.choice), keep=not arg.session)
            answers.append(to_json(TrustState(folder.as_uri(), arg.choice)))
        return answers

    @server.command(UNTRUST)
    async def untrust(ls: RunfixServer, *args: Any) -> list[Any]:
        arg = optional(UNTRUST, args, TrustArgs) or TrustArgs()
        answers = []
        for folder in folders_of(ls, arg.uri):
            choice = await ls.flow.revoke(folder)
            answers.append(to_json(TrustState(folder.as_uri(), choice.value if choice else None)))
        return answers
