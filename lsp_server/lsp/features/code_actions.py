"""Code actions: runs, prompts, run and fix, and quick fixes on runfix's error diagnostics.

- Run cell / selection / file (`runfix.run`), Run and fix (`runfix.runAndFix`);
- on a prompt line: Generate (or Regenerate) code, Generate and run (`runfix.generate`);
- quick fixes rebuilt from `Diagnostic.data`: Install <dist> (`runfix.install`; a name no
  data vouches for reads `Install `x`? (…)` and asks before installing),
  Add `import numpy as np` (an edit, then the import runs), and Fix with model —
  its edit is resolved lazily (`codeAction/resolve`), or a command when the
  client cannot resolve.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types as lsp

from executor.cancel import graceful
from executor.distributions import provider_for
from lsp_server.capabilities import ClientFeatures
from lsp_server.contract import (
    DEBUG_ERROR,
    FIX_TESTS,
    FIX_WITH_MODEL,
    GENERATE,
    INSTALL,
    RUN,
    RUN_AND_FIX,
    RUN_DEPENDENTS,
    BadArguments,
    FixArgs,
    GenerateArgs,
    InstallArgs,
    Position,
    ProblemData,
    Range,
    RunArgs,
    Status,
    TestsArgs,
    structure,
    to_json,
)
from lsp_server.executors import install_blocked
from lsp_server.fix.fixing import import_for, import_line, missing_module, missing_name
from lsp_server.lsp.convert import data_of
from lsp_server.lsp.edits import replace_lines
from lsp_server.lsp.features.trust import trust_fixes
from lsp_server.lsp.server import RunfixServer
from lsp_server.model.client import ModelConfig
from lsp_server.outputs.results import Problem
from lsp_server.settings import Settings
from lsp_server.text.cells import cell_at, split_cells
from lsp_server.text.dataflow import DocumentMap
from lsp_server.text.languages import is_python
from lsp_server.text.prompts import prompt_at
from lsp_server.verbs.tests import CALLED_BY
from lsp_server.verbs.tests import KIND as TESTED_KIND

KIND = "runfix.run"  # a kind of our own: not a quick fix, not a refactoring
FIX_KIND = "runfix.run.fix"
GENERATE_KIND = "runfix.generate"
QUICKFIX = lsp.CodeActionKind.QuickFix.value
FIX_WITH_MODEL_TITLE = "Fix with model"
RAISED_BY_TITLE = "Run and fix the cell whose run raised this"


def _kind(kind: str | lsp.CodeActionKind) -> str:
    return kind.value if isinstance(kind, lsp.CodeActionKind) else str(kind)


def _wanted(only: Sequence[str | lsp.CodeActionKind] | None, kind: str) -> bool:
    return not only or any(k == kind or kind.startswith(f"{k}.") for k in map(_kind, only))


def run_command(title: str, uri: str, rng: Range | None = None, command: str = RUN) -> lsp.Command:
    return lsp.Command(title=title, command=command, arguments=[to_json(RunArgs(uri, rng))])


def _range(rng: lsp.Range) -> Range:
    start, end = rng.start, rng.end
    return Range(Position(start.line, start.character), Position(end.line, end.character))


def actions_for(
    uri: str,
    lines: Sequence[str],
    rng: lsp.Range,
    markers: Sequence[str] = (),
    flow: DocumentMap | None = None,
    raised_by: tuple[int, int] | None = None,
) -> list[lsp.CodeAction]:
    """The runs of the cell, the selection and the file. `raised_by`: the piece whose run
    raised the error shown here, when that is another cell (a function defined here,
    called there): Run and fix runs that piece, where the error comes from."""

    def action(title: str, arg: Range | None, command: str = RUN) -> lsp.CodeAction:
        kind = FIX_KIND if command == RUN_AND_FIX else KIND
        return lsp.CodeAction(title=title, kind=kind, command=run_command(title, uri, arg, command))

    out = []
    cell = cell_at(split_cells(lines, markers), rng.start.line)
    cell_lines = None
    if cell is not None and cell.code_first <= cell.last:
        cell_lines = Range.lines(cell.code_first, cell.last)
        out.append(action("Run cell", cell_lines))
    selection = None
    if rng.start != rng.end:
        selection = _range(rng)
        out.append(action("Run selection", selection))
    out.append(action("Run file", None))
    other_cell = raised_by is not None and (
        cell is None or not cell.code_first <= raised_by[0] <= cell.last
    )
    if selection is not None:
        out.append(action("Run and fix selection", selection, RUN_AND_FIX))
    elif other_cell and raised_by is not None:
        out.append(action(RAISED_BY_TITLE, Range.lines(*raised_by), RUN_AND_FIX))
    elif cell_lines is not None:
        out.append(action("Run and fix cell", cell_lines, RUN_AND_FIX))
    if flow is not None and flow.python and len(flow) > 1:
        below = flow.dependents(flow.index(rng.start.line))
        if below:
            title = f"Run dependents ({len(below)} cell{'s' if len(below) > 1 else ''})"
            at = Position(rng.start.line, 0)
            arg = to_json(RunArgs(uri, position=at))
            command = lsp.Command(title, RUN_DEPENDENTS, arguments=[arg])
            out.append(lsp.CodeAction(title=title, kind=KIND, command=command))
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
        arg = to_json(GenerateArgs(uri, Position(line, 0), run))
        command = lsp.Command(title=title, command=GENERATE, arguments=[arg])
        out.append(lsp.CodeAction(title=title, kind=GENERATE_KIND, command=command))
    return out


def _ours(diagnostic: lsp.Diagnostic) -> ProblemData | None:
    """What a runfix error diagnostic carries (None: not ours, or not a run's error)."""
    data = data_of(diagnostic)
    return data if data is not None and data.kind == "run" and data.piece is not None else None


def _quickfix(title: str, diagnostic: lsp.Diagnostic, preferred: bool = True) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title, kind=QUICKFIX, diagnostics=[diagnostic], is_preferred=preferred or None
    )


def quick_fixes(
    uri: str,
    lines: Sequence[str],
    diagnostics: Sequence[lsp.Diagnostic],
    features: ClientFeatures,
    settings: Settings,
    python: bool = True,
) -> list[lsp.CodeAction]:
    """The fixes for runfix's error diagnostics, rebuilt from their `data` alone: the
    install or import it needs, then one fix named by what it will do, preferred unless one
    of those is — Run and fix on the piece whose run raised, which tries the offline steps
    (the cells above that define a missing name, the import, Python's suggestion) before a
    model — and "Fix with model" where a model is configured (in a document of another
    language than Python, the offline steps are none: they read Python's errors)."""
    out: list[lsp.CodeAction] = []
    model_ready = ModelConfig.from_settings(settings).missing() is None
    for diagnostic in diagnostics:
        data = _ours(diagnostic)
        if data is None:
            continue
        message, piece = data.message, data.piece
        assert piece is not None
        rerun = Range.lines(*piece)
        if python and (module := missing_module(message)) and (found := provider_for(module)):
            dist = found.distribution
            # A name no data vouches for is offered as a question, and asked again.
            also = f"; also {', '.join(found.others[:4])}" if found.others else ""
            ask = None if found.vouched else f"{found.why} (`import {module}`){also}"
            title = f"Install {dist}" if ask is None else f"Install `{dist}`? ({found.why})"
            install = _quickfix(title, diagnostic, preferred=ask is None)
            blocked = install_blocked(settings)
            if blocked and features.disabled_code_actions:
                install.disabled = lsp.CodeActionDisabled(reason=blocked)
            else:  # the command says why it cannot install, if it cannot
                arg = to_json(InstallArgs(uri, [dist], rerun, ask))
                install.command = lsp.Command(install.title, INSTALL, arguments=[arg])
            out.append(install)
        if python and (name := missing_name(message)) and (statement := import_for(name)):
            at = import_line(lines)
            add = _quickfix(f"Add `{statement}`", diagnostic)
            add.edit = lsp.WorkspaceEdit(
                changes={uri: [replace_lines(lines, at, at - 1, statement, features.width)]}
            )
            # The import runs too, so that re-running the cell works.
            add.command = run_command(add.title, uri, Range.lines(at, at))
            out.append(add)
        specific = any(a.is_preferred and a.diagnostics == [diagnostic] for a in out)
        title = _fix_title(lines, message, piece, python, model_ready)
        offline = _quickfix(title, diagnostic, preferred=not specific)
        offline.command = run_command(title, uri, rerun, RUN_AND_FIX)
        out.append(offline)
        if model_ready:  # (else the one above tries the offline fixes alone)
            fix_arg = to_json(FixArgs(uri, piece, message))
            fix = _quickfix(FIX_WITH_MODEL_TITLE, diagnostic, preferred=False)
            if features.code_action_resolve:
                fix.data = fix_arg  # the edit comes in codeAction/resolve
            else:
                command = lsp.Command(FIX_WITH_MODEL_TITLE, FIX_WITH_MODEL, arguments=[fix_arg])
                fix.command = command
            out.append(fix)
        if python and features.debug:  # the editor starts its debugger on the cell
            debug = lsp.CodeAction(DEBUG_ERROR_TITLE, kind=QUICKFIX, diagnostics=[diagnostic])
            where = {"uri": uri, "line": piece[0]}
            debug.command = lsp.Command(DEBUG_ERROR_TITLE, DEBUG_ERROR, arguments=[where])
            out.append(debug)
    return out


def _fix_title(
    lines: Sequence[str], message: str, piece: tuple[int, int], python: bool, model_ready: bool
) -> str:
    """What Run and fix will do for this error, as its quick fix says it."""
    name = missing_name(message) if python else None
    if name is not None:
        flow = DocumentMap(lines)
        if any(name in flow.flow(i).defines for i in range(flow.index(piece[0]))):
            return f"Fix: run the cells above that define `{name}` (no model)"
    if not model_ready:
        return (
            "Run and fix with Python's suggestions (no model set up)" if python else "Run and fix"
        )
    return "Run and fix: Python's suggestions, then the model" if python else "Run and fix"


def debug_at_call_site(uri: str, problems: Sequence[Problem], line: int) -> list[lsp.CodeAction]:
    """ "Debug this error" on a line the traceback passed through (the call in the cell that
    ran, a caller between): the error's own diagnostic is on the line that raised, but the
    user's eye is on the line they ran (issue 70, 9)."""
    for problem in problems:
        if problem.kind != "run" or problem.piece is None or problem.severity != "error":
            continue
        if any(site.line == line and site.path is None for site in problem.related):
            debug = lsp.CodeAction(DEBUG_ERROR_TITLE, kind=QUICKFIX)
            where = {"uri": uri, "line": problem.piece[0]}
            debug.command = lsp.Command(DEBUG_ERROR_TITLE, DEBUG_ERROR, arguments=[where])
            return [debug]
    return []


FIX_TESTS_TITLE = "Fix with model, checked by the tests"
DEBUG_ERROR_TITLE = "Debug this error"


def test_fixes(uri: str, diagnostics: Sequence[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    """On a failing test's diagnostic — the test's line, or the module's line it raised on
    (whose related information names the test's) — `runfix.fixTests` for that test: the
    module fixed by the model, applied once the test passes and the passing ones still do."""
    out: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        data = data_of(diagnostic)
        if data is None or data.kind != TESTED_KIND:
            continue
        test_uri, line = uri, diagnostic.range.start.line
        related = diagnostic.related_information or []
        called = [r for r in related if r.message.startswith(CALLED_BY)]
        if called:  # the module's line: the test is where its related information says
            test_uri, line = called[0].location.uri, called[0].location.range.start.line
        arg = to_json(TestsArgs(test_uri, Position(line, 0)))
        fix = _quickfix(FIX_TESTS_TITLE, diagnostic, preferred=False)
        fix.command = lsp.Command(FIX_TESTS_TITLE, FIX_TESTS, arguments=[arg])
        out.append(fix)
    return out


async def resolve_fix(ls: RunfixServer, action: lsp.CodeAction) -> lsp.CodeAction:
    """Ask the model, run its candidate, and add the edit only if the candidate ran clean.

    A client that cancels the resolve stops the model and the kernel (`graceful`)."""
    try:
        fix = structure(action.data, FixArgs)
    except BadArguments:
        return action
    if ls.editor.text(fix.uri) is None:
        return action
    where = await ls.flow.where(fix.uri)
    report = await graceful(
        lambda cancel: ls.flow.fix_reported(where, fix.piece, fix.message, cancel, apply=False)
    )
    answer = report.answer
    edit = None
    if report.edit is not None and report.file is not None:  # a module file of the folder
        edit = ls.editor.file_edit(report.file, report.lines, report.edit)
    elif report.edit is not None:
        edit = ls.editor.workspace_edit(fix.uri, report.version, report.edit)
    if answer.status == Status.FIXED and edit is not None:
        action.edit = edit
        said = (
            f"ran clean with {answer.message}"
            if answer.attempts == 0 and answer.message
            else f"ran clean on attempt {answer.attempts}"
        )
        action.title = f"{FIX_WITH_MODEL_TITLE} ({said}" + (
            f"; {answer.checked})" if answer.checked else ")"
        )
    else:
        reason = answer.message or (
            "the document changed meanwhile"
            if answer.status == Status.FIXED
            else answer.status.value
        )
        action.disabled = lsp.CodeActionDisabled(reason=f"not fixed: {reason}")
    return action


_MAPS: dict[str, DocumentMap] = {}
"""Maps of documents that have no results (then the store keeps none), for "Run dependents"."""


def _map(ls: RunfixServer, uri: str) -> DocumentMap:
    """The document's dataflow map as its text is now: the store's, else one kept here (its
    cells' analyses remembered by their text: an edit re-reads only the cells it touched)."""
    lines = ls.workspace.get_text_document(uri).lines
    flow = ls.flow.dataflow(uri)
    if flow is None or len(flow.lines) != len(lines) or list(flow.lines) != lines:
        flow = _MAPS.get(uri)
        if flow is None:
            if len(_MAPS) > 32:
                _MAPS.clear()
            python = is_python(ls.editor.language_of(uri))
            flow = _MAPS[uri] = DocumentMap(lines, python=python)
        else:
            flow.reset(lines)
    return flow


def register(server: RunfixServer) -> None:
    options = lsp.CodeActionOptions(
        code_action_kinds=[KIND, FIX_KIND, GENERATE_KIND, QUICKFIX], resolve_provider=True
    )

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, options)
    def code_action(ls: RunfixServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        only = params.context.only
        doc = ls.workspace.get_text_document(uri)
        settings = ls.flow.cached_settings(ls.editor.folder_for(uri))
        markers = settings.prompt_markers
        out: list[lsp.CodeAction] = []
        if _wanted(only, QUICKFIX):
            diagnostics = params.context.diagnostics
            python = is_python(ls.editor.language_of(uri))
            features = ls.editor.features
            out.extend(quick_fixes(uri, doc.lines, diagnostics, features, settings, python))
            if python and features.debug and not any(_ours(d) for d in diagnostics):
                problems = ls.flow.results(uri).problems
                out.extend(debug_at_call_site(uri, problems, params.range.start.line))
            out.extend(trust_fixes(uri, diagnostics))
            out.extend(test_fixes(uri, diagnostics))
        if _wanted(only, GENERATE_KIND):
            out.extend(prompt_actions(uri, doc.lines, params.range.start.line, markers))
        if _wanted(only, KIND) or _wanted(only, FIX_KIND):
            ours = [d for d in map(_ours, params.context.diagnostics) if d is not None]
            raised_by = ours[0].piece if ours else None
            out.extend(
                a
                for a in actions_for(
                    uri, doc.lines, params.range, markers, _map(ls, uri), raised_by
                )
                if a.kind is not None and _wanted(only, _kind(a.kind))
            )
        return out

    @server.feature(lsp.CODE_ACTION_RESOLVE)
    async def code_action_resolve(ls: RunfixServer, action: lsp.CodeAction) -> lsp.CodeAction:
        return await resolve_fix(ls, action)
