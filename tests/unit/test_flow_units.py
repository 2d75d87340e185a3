"""The run-and-fix flow, the fix driver and quick-fix building, without a client or a kernel.

A fake editor stands in for the editor interface (it is an interface of runfix's
own: the LSP and headless implementations are tested end to end elsewhere).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import client_capabilities

from executor.events import Error, RunOutcome, RunStatus, Span, Stream, Variable
from executor.safety import scan
from executor.trust import Choice
from lsp_server.capabilities import ClientFeatures
from lsp_server.cli.run import HeadlessEditor
from lsp_server.contract import (
    FIX_WITH_MODEL,
    INSTALL,
    RUN_AND_FIX,
    SOURCE,
    VARIABLE_FIELDS,
    FixArgs,
    ProblemData,
    Status,
    structure,
    to_json,
)
from lsp_server.editor import (
    Level,
    LineEdit,
    Place,
    Snapshot,
)
from lsp_server.fix.fixing import Fixer, FixResult
from lsp_server.flow import Flow
from lsp_server.lsp.convert import hover, inlay_hints, tooltip_at
from lsp_server.lsp.features.code_actions import DEBUG_ERROR_TITLE, debug_at_call_site, quick_fixes
from lsp_server.lsp.launch import root_folder
from lsp_server.lsp.prepared import ByLine, Memo, Prepared
from lsp_server.model.client import ModelCancelled
from lsp_server.outputs.results import Problem, Related, build
from lsp_server.services import gate as gate_module
from lsp_server.session import Session
from lsp_server.settings import PROJECT, Settings, resolve
from lsp_server.text.positions import utf16_len
from tests.conftest import CLIENTS
from tests.support.editors import URI, FakeEditor
from tests.support.fix_ports import CalledPorts


def flow_for(editor: FakeEditor, settings: Settings | None = None) -> Flow:
    async def read(folder: Path) -> Settings:
        return settings or Settings()

    return Flow(Session(read, editor.kernel_state, decided=Choice.TRUST), editor)


def printed(text: str, line: int) -> RunOutcome:
    return RunOutcome(RunStatus.OK, (Stream("stdout", text, Span(line, line)),), 0.01)


def raised(message: str) -> RunOutcome:
    name, _, value = message.partition(": ")
    error = Error(name, value, (), f"Traceback …\n{message}")
    return RunOutcome(RunStatus.ERROR, (error,), 0.01)


# -- client features ------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_client_features_are_read_once_from_real_capabilities(client: str) -> None:
    features = ClientFeatures.from_client(client_capabilities(client), "utf-16")
    if client == "visual_studio_code":
        assert features.code_action_resolve
        assert features.disabled_code_actions and features.document_changes
    if client == "neovim@v0.7.0":
        assert not features.inlay_hints
        assert features.results_mode(None) == "diagnostics"  # Hint diagnostics instead
    assert features.results_mode("both") == "both"
    assert not features.input  # only clients that say `experimental.runfixInput`


def test_client_features_read_the_runfix_input_capability_and_the_encoding() -> None:
    caps = lsp.ClientCapabilities(experimental={"runfixInput": True})
    features = ClientFeatures.from_client(caps, "utf-8")
    assert features.input and features.width("é") == 2
    assert ClientFeatures.from_client(None, None) == ClientFeatures()


# -- quick fixes from Diagnostic.data -------------------------------------------------


def _diagnostic(message: str, piece: tuple[int, int] = (0, 0)) -> lsp.Diagnostic:
    return lsp.Diagnostic(
        range=lsp.Range(lsp.Position(piece[0], 0), lsp.Position(piece[0], 1)),
        message=message,
        source=SOURCE,
        data=to_json(ProblemData("run", message, piece)),
    )


LOCAL_MODEL = resolve(("initializationOptions", {"model": {"baseUrl": "http://127.0.0.1:9/v1"}}))
"""Settings with a model configured (a local endpoint needs no key)."""


@pytest.mark.parametrize("resolve", [True, False])
def test_fix_with_model_is_resolved_lazily_or_a_command(resolve: bool) -> None:
    features = ClientFeatures(code_action_resolve=resolve)
    diagnostic = _diagnostic("ValueError: no", (2, 3))
    [first, fix] = quick_fixes(URI, ["a\n"] * 4, [diagnostic], features, LOCAL_MODEL)
    # the preferred one tries the offline steps before the model: Run and fix on the piece
    assert first.title == "Run and fix: Python's suggestions, then the model" and first.is_preferred
    assert first.command is not None and first.command.command == RUN_AND_FIX
    assert first.command.arguments == [
        {
            "uri": URI,
            "range": {"start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 0}},
        }
    ]
    assert fix.title == "Fix with model" and fix.kind == lsp.CodeActionKind.QuickFix
    assert not fix.is_preferred
    if resolve:
        assert fix.command is None and fix.edit is None
        assert structure(fix.data, FixArgs) == FixArgs(URI, (2, 3), "ValueError: no")
    else:
        assert fix.command is not None and fix.command.command == FIX_WITH_MODEL


def test_quick_fixes_for_a_missing_module_and_a_missing_name() -> None:
    lines = ["import os\n", "x = np.zeros(3)\n", "import sklearn\n"]
    diagnostics = [
        _diagnostic("NameError: name 'np' is not defined", (1, 1)),
        _diagnostic("ModuleNotFoundError: No module named 'sklearn'", (2, 2)),
        lsp.Diagnostic(range=diagnostics_range(), message="not ours", source="pyright"),
    ]
    actions = quick_fixes(URI, lines, diagnostics, ClientFeatures(), LOCAL_MODEL)
    titles = [a.title for a in actions]
    assert titles == [
        "Add `import numpy as np`",
        "Run and fix: Python's suggestions, then the model",
        "Fix with model",
        "Install scikit-learn",
        "Run and fix: Python's suggestions, then the model",
        "Fix with model",
    ]
    assert [a.is_preferred for a in actions] == [True, None, None, True, None, None]
    add, install = actions[0], actions[3]
    assert add.edit is not None and add.edit.changes is not None
    [edit] = add.edit.changes[URI]
    assert edit.range.start.line == 1 and edit.new_text == "import numpy as np\n"
    assert install.command is not None and install.command.command == INSTALL
    assert install.command.arguments == [
        {
            "uri": URI,
            "packages": ["scikit-learn"],
            "range": {"start": {"line": 2, "character": 0}, "end": {"line": 3, "character": 0}},
        }
    ]


def test_one_preferred_fix_named_by_what_it_will_do_and_none_of_a_model_not_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 61, 2: a NameError whose name a cell above defines is fixed by running that
    cell (the quick fix says so: no model); with no model configured there is no "Fix with
    model", and the one fix says it works offline."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lines = ["# %%\n", "total = 3\n", "# %%\n", "print(total * 2)\n", "# %%\n", "1 / 0\n"]
    above = _diagnostic("NameError: name 'total' is not defined", (3, 3))
    zero = _diagnostic("ZeroDivisionError: division by zero", (5, 5))
    for settings in (LOCAL_MODEL, Settings()):
        [run_above, *_] = quick_fixes(URI, lines, [above], ClientFeatures(), settings)
        assert run_above.title == "Fix: run the cells above that define `total` (no model)"
        assert run_above.is_preferred and run_above.command is not None
        assert run_above.command.command == RUN_AND_FIX
    [alone] = quick_fixes(URI, lines, [zero], ClientFeatures(), Settings())
    assert (
        alone.title == "Run and fix with Python's suggestions (no model set up)"
        and alone.is_preferred
    )


def test_an_install_the_sandbox_cannot_do_is_disabled_where_the_client_shows_why() -> None:
    sandboxed = resolve((PROJECT, {"executor": "docker"}))
    diagnostic = _diagnostic("ModuleNotFoundError: No module named 'yaml'")
    for disabled_support in (True, False):
        features = ClientFeatures(disabled_code_actions=disabled_support)
        install = quick_fixes(URI, ["import yaml\n"], [diagnostic], features, sandboxed)[0]
        assert install.title.lower() == "install pyyaml"
        if disabled_support:
            assert install.disabled is not None and "docker" in install.disabled.reason
        else:  # the command runs and says why it cannot install
            assert install.command is not None


def diagnostics_range() -> lsp.Range:
    return lsp.Range(lsp.Position(0, 0), lsp.Position(0, 1))


# -- the fix driver -------------------------------------------------------------------


def _fixer(
    replies: list[str], outcomes: list[RunOutcome], confirm: bool = True
) -> tuple[Fixer, list[list[dict[str, str]]], list[str]]:
    asked: list[list[dict[str, str]]] = []
    ran: list[str] = []

    async def ask(messages: list[dict[str, str]], what: str, bound: int, before: int) -> str:
        asked.append(messages)
        reply = replies.pop(0)
        if reply == "cancel":
            raise ModelCancelled()
        return reply

    async def run(code: str, at: int) -> RunOutcome:
        ran.append(code)
        return outcomes.pop(0)

    async def confirmed(code: str, findings: Any) -> bool:
        return confirm

    fixer = Fixer(CalledPorts(ask, run, confirmed), max_attempts=3, budget=4000)
    return fixer, asked, ran


async def test_the_fix_driver_sends_each_failure_into_the_next_request() -> None:
    fixer, asked, ran = _fixer(
        ["```python\nprint(itmes)\n```", "```python\nprint(items)\n```"],
        [raised("NameError: name 'itmes' is not defined"), printed("[1]\n", 1)],
    )
    result = await fixer.fix(["print(itms)\n"], 0, 0, "print(itms)\n", "NameError: itms")
    assert (result.status, result.attempts, result.code) == ("fixed", 2, "print(items)\n")
    assert ran == ["print(itmes)\n", "print(items)\n"]
    assert "name 'itmes' is not defined" in asked[1][-1]["content"]


async def test_the_fix_driver_never_runs_a_flagged_candidate_it_may_not() -> None:
    fixer, _, ran = _fixer(["```python\nimport os\nos.remove('x')\n```"], [], confirm=False)
    result = await fixer.fix(["x\n"], 0, 0, "x\n", "NameError: x")
    assert result.status == "failed" and "not confirmed" in result.message
    assert ran == []


async def test_the_fix_driver_stops_when_the_model_request_is_cancelled() -> None:
    fixer, _, ran = _fixer(["cancel"], [])
    result = await fixer.fix(["x\n"], 0, 0, "x\n", "NameError: x")
    assert result.status == "cancelled" and ran == []


# -- what a fix comes to --------------------------------------------------------------


async def test_a_fix_that_ran_clean_is_applied_and_its_output_shown() -> None:
    editor = FakeEditor("total = sum(valus)\nprint(total)\n")
    flow = flow_for(editor)
    fixed = FixResult("fixed", "total = sum([1])\nprint(total)\n", printed("1\n", 2), 2)
    report = await flow.fixes._settle(await flow.where(URI), 0, 1, fixed, apply=True)
    assert report.answer.status == Status.FIXED and report.answer.attempts == 2
    assert editor.applied == [LineEdit(0, 1, "total = sum([1])\nprint(total)\n")]
    assert "fixed on attempt 2" in editor.remarks
    [shown] = [r for r in editor.published_results if r.statements]
    assert shown.statements[0].text == "1\n" and shown.statements[0].last == 1


async def test_a_fix_offered_for_resolve_is_not_applied() -> None:
    editor = FakeEditor("print(x)\n")
    flow = flow_for(editor)
    fixed = FixResult("fixed", "x = 1\nprint(x)\n", printed("1\n", 2), 1)
    report = await flow.fixes._settle(await flow.where(URI), 0, 0, fixed, apply=False)
    assert report.answer.status == Status.FIXED
    assert report.edit == LineEdit(0, 0, "x = 1\nprint(x)\n")
    assert report.version == editor.version  # the text the edit was checked against
    assert editor.applied == []


async def test_a_fix_for_code_that_changed_meanwhile_is_not_applied() -> None:
    editor = FakeEditor("print(y)\n")
    flow = flow_for(editor)
    fixed = FixResult("fixed", "print(1)\n", printed("1\n", 1), 1)
    was = (await flow.where(URI)).now(Snapshot(editor.version, ("print(x)\n",)))
    report = await flow.fixes._settle(was, 0, 0, fixed, apply=True)
    assert report.answer.status == Status.ERROR and editor.applied == []
    assert "changed while it was being fixed" in editor.told[0][0]


async def test_no_fix_is_said_and_nothing_applied() -> None:
    editor = FakeEditor("print(x)\n")
    flow = flow_for(editor)
    failed = FixResult("failed", attempts=3, message="no fix ran clean in 3 attempts")
    report = await flow.fixes._settle(await flow.where(URI), 0, 0, failed, apply=True)
    assert report.answer.status == Status.FAILED and report.answer.attempts == 3
    assert editor.told == [("runfix: not fixed: no fix ran clean in 3 attempts", Level.WARNING)]
    assert editor.applied == []


# -- confirming flagged code: one rule for the editor and the terminal ----------------


async def test_flagged_code_needs_a_yes_in_the_local_kernel_and_the_yes_is_kept() -> None:
    code = "import os\nos.remove('data.csv')\n"
    assert scan(code)  # flagged
    editor = FakeEditor(code, answer=True)
    flow = flow_for(editor)
    place, where = Place(URI, 0), await flow.where(URI)
    assert await flow.gate.confirm_run(code, "it deletes", where, place)
    assert await flow.gate.confirm_run(code, "it deletes", where, place)
    assert editor.asked == ["it deletes"]  # asked once for this exact code
    editor.answer = False
    assert not await flow.gate.confirm_run(code + "\n", "it deletes", where, place)


def test_a_yes_to_flagged_code_allows_what_it_named_not_every_write(tmp_path: Path) -> None:
    """Issue 68 (S2): a yes to a snippet flagged for writing `~/out.csv` allowed every
    write (`write:*`): a link's target, SQLite's files beside another database. Now that
    file (and SQLite's own beside it); a deletion allows nothing unasked; a process is a
    process."""
    home = os.path.realpath(os.path.expanduser("~"))
    code = "import subprocess\nopen('~/out.csv', 'w').write('x')\nsubprocess.run(['ls'])\n"
    allowed = gate_module._allowed_by(code, tmp_path)
    assert "write:*" not in allowed and "process:*" in allowed
    assert f"write:{home}/out.csv" in allowed and f"write:{home}/out.csv-journal" in allowed
    assert gate_module._allowed_by("import os\nos.remove('../x[1].db')\n", tmp_path) == ()
    star = gate_module._allowed_by("open('../a*.txt', 'w').write('x')\n", tmp_path)
    assert f"write:{tmp_path.parent.resolve()}/a[*].txt" in star  # a literal, not a wildcard


async def test_flagged_code_in_the_sandbox_runs_unasked() -> None:
    editor = FakeEditor("")
    flow = flow_for(editor)
    sandboxed = resolve((PROJECT, {"executor": "docker"}))
    where = dataclasses.replace(await flow.where(URI), settings=sandboxed)
    assert await flow.gate.confirm_run("os.remove('x')", "it deletes", where, Place(URI))
    assert editor.asked == []


async def test_the_headless_editor_never_runs_flagged_code_unasked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    editor = HeadlessEditor("job.py", Path("/ws/job.py"), Path("/ws"), ["x\n"])
    flow = Flow(
        Session(lambda folder: _settings(), editor.kernel_state, decided=Choice.TRUST), editor
    )
    assert not await flow.gate.confirm_run(
        "os.remove('x')", "It deletes.", await flow.where(editor.uri), Place("u", 4)
    )
    assert capsys.readouterr().out == (
        "job.py:5:1: warning: It deletes; not run headless (review it, or run it in the editor)\n"
    )
    assert await editor.apply(editor.uri, 1, LineEdit(0, 0, "y = 1\n"), "fix")
    assert editor.lines == ["y = 1\n"] and editor.changed
    assert not await editor.apply(editor.uri, 1, LineEdit(0, 0, "z\n"), "stale version")


async def _settings() -> Settings:
    return Settings()


# -- results as the client sees them: inlay hints and hovers ---------------------------


def test_an_inlay_hint_sits_at_the_end_of_its_statement_with_the_full_output() -> None:
    lines = ["names = ['é𝄞']\n", "for n in names:\n", "    print(n * 3)\n", "names[9]\n"]
    outcome = RunOutcome(
        RunStatus.ERROR,
        (
            Stream("stdout", "é𝄞é𝄞é𝄞\n" * 30, Span(2, 3)),
            Error("IndexError", "list index out of range", (), "Traceback …\nIndexError"),
        ),
        0.01,
    )
    results = build(outcome, path="/ws/doc.py", lines=lines, fallback_line=3, folder=None)
    [(line, hint)] = inlay_hints(lines, results, utf16_len)
    assert line == 2 and hint["position"] == {"line": 2, "character": len("    print(n * 3)")}
    assert hint["label"].startswith("→ é𝄞é𝄞é𝄞")
    assert hint["tooltip"]["kind"] == "markdown" and hint["tooltip"]["value"].count("é𝄞") == 90
    by_line = ByLine.of(inlay_hints(lines, results, utf16_len))
    assert json.loads(by_line.between(3, 4).text) == []
    assert json.loads(by_line.between(0, 4).text) == [hint]

    [(_, lazy)] = inlay_hints(lines, results, utf16_len, resolve_uri="file:///ws/doc.py")
    assert "tooltip" not in lazy and lazy["data"] == {"uri": "file:///ws/doc.py", "line": 2}
    assert tooltip_at(results, 2) == hint["tooltip"]
    assert tooltip_at(results, 1) is None  # no statement's output ends on line 1

    on_error = hover(lines, results, 3)
    assert on_error is not None and isinstance(on_error.contents, lsp.MarkupContent)
    assert on_error.contents.value.startswith("**IndexError: list index out of range**")
    assert "Traceback" in on_error.contents.value
    assert hover(lines, results, 0) is None  # nothing came from line 1


def test_the_variables_answer_has_the_fields_the_contract_names() -> None:
    variable = Variable("df", "DataFrame", "2 rows", (2, 1), 2, {"a": "int64"})
    assert tuple(dataclasses.asdict(variable)) == VARIABLE_FIELDS


def test_a_memo_makes_again_only_when_an_input_is_another_object_with_other_content() -> None:
    made: list[int] = []
    memo: Memo[int] = Memo(size=2)

    def make() -> int:
        made.append(1)
        return len(made)

    lines = ("a\n", "b\n")
    assert memo.get("u", (lines, ("ai:",)), make) == 1
    assert memo.get("u", (lines, ("ai:",)), make) == 1  # the same lines, equal markers
    assert memo.get("u", (("a\n", "b\n"), ("ai:",)), make) == 1  # equal lines
    assert memo.get("u", (("a\n", "c\n"), ("ai:",)), make) == 2
    memo.get("v", (), make)
    memo.get("w", (), make)  # beyond its size: the oldest document goes
    assert memo.get("u", (("a\n", "c\n"), ("ai:",)), make) == 5


def test_a_prepared_answer_is_compact_json() -> None:
    assert Prepared.of([{"a": 1, "b": "→"}]).text == '[{"a":1,"b":"\\u2192"}]'


def test_the_early_kernels_folder_is_the_first_workspace_folder_else_the_root(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    folders = [{"uri": b.as_uri(), "name": "b"}, {"uri": a.as_uri(), "name": "a"}]
    assert root_folder({"rootUri": a.as_uri(), "workspaceFolders": folders}) == b
    assert root_folder({"rootUri": a.as_uri(), "workspaceFolders": None}) == a
    assert root_folder({"rootUri": (tmp_path / "gone").as_uri()}) is None  # no such folder
    assert root_folder({"rootUri": "untitled:x"}) is None
    assert root_folder({"rootUri": None}) is None
    assert root_folder([]) is None


def test_how_results_show_is_read_without_the_trust_store(tmp_path: Path) -> None:
    """Issue 37: a publication reads the display settings; no trust decision changes them,
    so the trust store (a stat and a realpath) is not read for them."""
    from executor.trust import TrustStore

    class Untouchable(TrustStore):
        def decision(self, folder: Path) -> Any:
            raise AssertionError("the trust store was read")

    async def read(folder: Path) -> Settings:
        return Settings()

    session = Session(read, lambda folder, kernel: None, trust=Untouchable(tmp_path / "t.json"))
    assert session.display_settings(tmp_path).results == Settings().results


def test_a_failing_tests_diagnostics_offer_the_fix_checked_by_that_test() -> None:
    """On the test's line the quick fix names that line; on the module's line it raised on,
    the test's (from the related information the run put there): `runfix.fixTests`."""
    from lsp_server.lsp.features.code_actions import test_fixes

    tests, module = "file:///p/tests/test_stats.py", "file:///p/pkg/stats.py"
    data = {"kind": "test", "message": "ZeroDivisionError: division by zero"}
    line = lsp.Range(lsp.Position(13, 4), lsp.Position(13, 9))
    on_test = lsp.Diagnostic(line, "m", source="runfix", data=data)
    called = lsp.DiagnosticRelatedInformation(
        lsp.Location(tests, lsp.Range(lsp.Position(13, 4), lsp.Position(13, 4))),
        "called by test_ratio_of_zero",
    )
    raised = lsp.Range(lsp.Position(6, 4), lsp.Position(6, 9))
    on_module = lsp.Diagnostic(
        raised, "m", source="runfix", data=data, related_information=[called]
    )
    other = lsp.Diagnostic(on_test.range, "m", source="runfix", data={**data, "kind": "run"})
    [from_test] = test_fixes(tests, [on_test, other])
    [from_module] = test_fixes(module, [on_module])
    for action in (from_test, from_module):
        assert action.title == "Fix with model, checked by the tests"
        assert action.command is not None and action.command.command == "runfix.fixTests"
        assert list(action.command.arguments or ()) == [
            {"uri": tests, "position": {"line": 13, "character": 0}}
        ]


def test_debug_this_error_is_offered_on_the_line_the_user_ran_too() -> None:
    """Issue 70, 9: "Debug this error" was offered only on the line that raised (inside a
    function of another cell); the call in the cell that ran is where the user looks."""
    raised = Problem(
        1, 1, "ZeroDivisionError: division by zero", "error", "",
        related=(Related(4, "called from here"), Related(2, "called in other.py", "other.py")),
        piece=(4, 4),
    )  # fmt: skip
    [action] = debug_at_call_site(URI, [raised], 4)
    assert action.title == DEBUG_ERROR_TITLE and action.command is not None
    assert action.command.arguments == [{"uri": URI, "line": 4}]  # the cell that ran, again
    assert debug_at_call_site(URI, [raised], 2) == []  # a line of another file's frame
    assert debug_at_call_site(URI, [raised], 3) == []
