"""Code actions: runs, prompts, run and fix, and quick fixes on runfix's error diagnostics.

- Run cell / selection / file (`runfix.run`), Run and fix (`runfix.runAndFix`);
- on a prompt line: Generate (or Regenerate) code, Generate and run (`runfix.generate`);
- quick fixes rebuilt from `Diagnostic.data`: Install <dist> (`runfix.install`),
  Add `import numpy as np` (an edit, then the import runs), and Fix with model —
  its edit is resolved lazily (`codeAction/resolve`), or a command when the
  client cannot resolve.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp

from executor.install import distribution_for
from lsp_server import assist
from lsp_server.cells import cell_at, split_cells
from lsp_server.convert import SOURCE
from lsp_server.edits import replace_lines
from lsp_server.executors import install_blocked
from lsp_server.features.commands import FIX_WITH_MODEL, GENERATE, INSTALL, RUN, RUN_AND_FIX
from lsp_server.fixing import import_for, import_line, missing_module, missing_name
from lsp_server.prompts import prompt_at
from lsp_server.server import RunfixServer

KIND = "runfix.run"  # a kind of our own: not a quick fix, not a refactoring
FIX_KIND = "runfix.run.fix"
GENERATE_KIND = "runfix.generate"
QUICKFIX = lsp.CodeActionKind.QuickFix.value
FIX_WITH_MODEL_TITLE = "Fix with model"


def _kind(kind: str | lsp.CodeActionKind) -> str:
    return kind.value if isinstance(kind, lsp.CodeActionKind) else str(kind)


def _wanted(only: Sequence[str | lsp.CodeActionKind] | None, kind: str) -> bool:
    return not only or any(k == kind or kind.startswith(f"{k}.") for k in map(_kind, only))


def lines_argument(first: int, last: int) -> dict[str, Any]:
    """An LSP range over whole lines first..last, as `runfix.run` reads it."""
    return {
        "start": {"line": first, "character": 0},
        "end": {"line": last + 1, "character": 0},
    }


def run_command(
    title: str, uri: str, rng: dict[str, Any] | None = None, command: str = RUN
) -> lsp.Command:
    arg: dict[str, Any] = {"uri": uri}
    if rng is not None:
        arg["range"] = rng
    return lsp.Command(title=title, command=command, arguments=[arg])


def actions_for(
    uri: str, lines: Sequence[str], rng: lsp.Range, markers: Sequence[str] = ()
) -> list[lsp.CodeAction]:
    def action(title: str, arg: dict[str, Any] | None, command: str = RUN) -> lsp.CodeAction:
        kind = FIX_KIND if command == RUN_AND_FIX else KIND
        return lsp.CodeAction(title=title, kind=kind, command=run_command(title, uri, arg, command))

    out = []
    cell = cell_at(split_cells(lines, markers), rng.start.line)
    cell_lines = None
    if cell is not None and cell.code_first <= cell.last:
        cell_lines = lines_argument(cell.code_first, cell.last)
        out.append(action("Run cell", cell_lines))
    selection = None
    if rng.start != rng.end:
        selection = {
            "start": {"line": rng.start.line, "character": rng.start.character},
            "end": {"line": rng.end.line, "character": rng.end.character},
        }
        out.append(action("Run selection", selection))
    out.append(action("Run file", None))
    if selection is not None:
        out.append(action("Run and fix selection", selection, RUN_AND_FIX))
    elif cell_lines is not None:
        out.append(action("Run and fix cell", cell_lines, RUN_AND_FIX))
    return out


def prompt_actions(
    uri: str, lines: Sequence[str], line: int, markers: Sequence[str]
) -> list[lsp.CodeAction]:
    prompt = prompt_at(lines, line, markers)
    if prompt is None:
        return []
    out = []
    for title, run in (
        ("Regenerate code" if prompt.has_body else "Generate code", False),
        ("Generate and run", True),
    ):
        arg = {"uri": uri, "position": {"line": line, "character": 0}, "run": run}
        out.append(
            lsp.CodeAction(
                title=title,
                kind=GENERATE_KIND,
                command=lsp.Command(title=title, command=GENERATE, arguments=[arg]),
            )
        )
    return out


def _ours(diagnostic: lsp.Diagnostic) -> dict[str, Any] | None:
    data = diagnostic.data
    if diagnostic.source != SOURCE or not isinstance(data, dict) or data.get("kind") != "run":
        return None
    piece = data.get("piece")
    valid = isinstance(piece, list) and len(piece) == 2 and all(isinstance(p, int) for p in piece)
    return data if valid and isinstance(data.get("message"), str) else None


def _quickfix(title: str, diagnostic: lsp.Diagnostic, preferred: bool = True) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title, kind=QUICKFIX, diagnostics=[diagnostic], is_preferred=preferred or None
    )


def quick_fixes(
    ls: RunfixServer, uri: str, lines: Sequence[str], diagnostics: Sequence[lsp.Diagnostic]
) -> list[lsp.CodeAction]:
    out: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        data = _ours(diagnostic)
        if data is None:
            continue
        message, piece = data["message"], data["piece"]
        rerun = lines_argument(piece[0], piece[1])
        if (module := missing_module(message)) and (dist := distribution_for(module)):
            install = _quickfix(f"Install {dist}", diagnostic)
            blocked = install_blocked(ls.cached_settings(ls.folder_for(uri)))
            if blocked and ls.supports_disabled_code_actions:
                install.disabled = lsp.CodeActionDisabled(reason=blocked)
            else:  # the command says why it cannot install, if it cannot
                arg = {"uri": uri, "packages": [dist], "range": rerun}
                install.command = lsp.Command(install.title, INSTALL, arguments=[arg])
            out.append(install)
        if (name := missing_name(message)) and (statement := import_for(name)):
            at = import_line(lines)
            add = _quickfix(f"Add `{statement}`", diagnostic)
            add.edit = lsp.WorkspaceEdit(
                changes={uri: [replace_lines(lines, at, at - 1, statement, ls.width)]}
            )
            # The import runs too, so that re-running the cell works.
            add.command = run_command(add.title, uri, lines_argument(at, at))
            out.append(add)
        fix_arg = {"uri": uri, "piece": piece, "message": message}
        fix = _quickfix(FIX_WITH_MODEL_TITLE, diagnostic, preferred=False)
        if ls.supports_code_action_resolve:
            fix.data = fix_arg  # the edit comes in codeAction/resolve
        else:
            fix.command = lsp.Command(FIX_WITH_MODEL_TITLE, FIX_WITH_MODEL, arguments=[fix_arg])
        out.append(fix)
    return out


async def resolve_fix(ls: RunfixServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """Ask the model, run its candidate, and add the edit only if the candidate ran clean."""
    data = action.data
    if not (isinstance(data, dict) and isinstance(data.get("uri"), str)):
        return action
    uri, piece, message = data["uri"], data.get("piece"), data.get("message")
    doc = ls.workspace.text_documents.get(uri)
    if doc is None or not isinstance(piece, list) or not isinstance(message, str):
        return action
    error = ls.error_text_for(uri, tuple(piece), message)
    cancel = asyncio.Event()
    work = asyncio.ensure_future(
        assist.fix_piece(ls, uri, list(doc.lines), piece[0], piece[1], error, cancel, apply=False)
    )
    try:
        answer = await asyncio.shield(work)
    except asyncio.CancelledError:
        cancel.set()  # the client cancelled the resolve: stop the model and the kernel, then go
        await asyncio.wait({work}, timeout=10)
        raise
    if answer.get("status") == "fixed" and isinstance(answer.get("edit"), lsp.TextEdit):
        action.edit = assist.workspace_edit(ls, uri, doc.version, [answer["edit"]])
        action.title = f"{FIX_WITH_MODEL_TITLE} (ran clean on attempt {answer['attempts']})"
    else:
        reason = answer.get("message") or answer.get("status", "not fixed")
        action.disabled = lsp.CodeActionDisabled(reason=f"not fixed: {reason}")
    return action


def register(server: RunfixServer) -> None:
    options = lsp.CodeActionOptions(
        code_action_kinds=[KIND, FIX_KIND, GENERATE_KIND, QUICKFIX], resolve_provider=True
    )

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, options)
    def code_action(ls: RunfixServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        only = params.context.only
        doc = ls.workspace.get_text_document(uri)
        markers = ls.cached_settings(ls.folder_for(uri)).prompt_markers
        out: list[lsp.CodeAction] = []
        if _wanted(only, QUICKFIX):
            out.extend(quick_fixes(ls, uri, doc.lines, params.context.diagnostics))
        if _wanted(only, GENERATE_KIND):
            out.extend(prompt_actions(uri, doc.lines, params.range.start.line, markers))
        if _wanted(only, KIND) or _wanted(only, FIX_KIND):
            out.extend(
                a
                for a in actions_for(uri, doc.lines, params.range, markers)
                if a.kind is not None and _wanted(only, _kind(a.kind))
            )
        return out

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: RunfixServer, action: lsp.CodeAction) -> lsp.CodeAction:
        return await resolve_fix(ls, action)
