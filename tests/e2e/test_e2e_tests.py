"""The project's tests from the editor (issue 50, 1 and 2): "▶ Run tests" lenses on a test
file and its tests; `runfix.runTests` runs pytest beside the folder's kernel; each failure
shows on the line of the test that failed (with pytest's compared values) and on the
module's line that raised, each pointing at the other; a fixed failure is cleared, and a
run of one test leaves the others' failures as they were."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import HISTORY, RUN_TESTS
from tests.conftest import change, command_at, errors, open_doc
from tests.kernel.test_cli_tests import STATS, TESTS


async def _errors_on(client: LanguageClient, uri: str, count: int) -> list[lsp.Diagnostic]:
    for _ in range(100):
        found = errors(client, uri)
        if len(found) == count:
            return found
        await asyncio.sleep(0.05)
    return errors(client, uri)


async def test_failures_show_on_the_test_line_and_the_module_line_and_go_once_fixed(
    initialized: LanguageClient, folder: Path
) -> None:
    (folder / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "tests").mkdir()
    module = open_doc(initialized, folder / "pkg" / "stats.py", STATS)
    tests = open_doc(initialized, folder / "tests" / "test_stats.py", TESTS)

    lenses = await initialized.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(tests))
    )
    titles = [(lens.range.start.line, lens.command.title) for lens in lenses or [] if lens.command]
    assert titles == [
        (0, "▶ Run tests"),
        (3, "▶ Run test"),
        (8, "▶ Run test"),
        (12, "▶ Run test"),
        (16, "▶ Run test"),
    ]

    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(RUN_TESTS, [{"uri": tests}])
    )
    assert answer["status"] == "error" and answer["message"].startswith("2 passed, 2 failed")
    on_tests = await _errors_on(initialized, tests, 2)
    by_line = {d.range.start.line: d for d in on_tests}
    assert by_line[5].message.splitlines() == [
        "test_mean failed: AssertionError: assert 2.0 == 3",
        "+  where 2.0 = mean([2, 4])",
    ]
    zero = by_line[13]
    assert zero.message == "test_ratio_of_zero failed: ZeroDivisionError: division by zero"
    [raised] = zero.related_information or []
    assert raised.location.uri == module and raised.location.range.start.line == 6
    [on_module] = await _errors_on(initialized, module, 1)
    assert on_module.range.start.line == 6
    assert on_module.message.startswith("ZeroDivisionError: division by zero (in ratio")
    assert [r.location.uri for r in on_module.related_information or []] == [tests]

    # ratio fixed in the editor (and saved), then that test alone run from its lens
    c: Any = initialized
    fixed = "    return a / b if b else 0\n"
    change(initialized, module, 2, (6, 0), (7, 0), fixed)
    (folder / "pkg" / "stats.py").write_text(c.texts[module])
    answer = await command_at(initialized, RUN_TESTS, tests, 13)
    assert answer["status"] == "ok" and answer["message"].startswith("1 passed in ")
    assert await _errors_on(initialized, module, 0) == []
    left = await _errors_on(initialized, tests, 1)
    assert [d.range.start.line for d in left] == [5]  # test_mean's, which did not run

    # the record keeps each test's run: the test file's history
    history = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(HISTORY, [{"uri": tests}])
    )
    said = [(h["code"].rsplit("::", 1)[-1], h["status"], h["origin"]) for h in history or []]
    assert said[0] == ("test_ratio_of_zero", "passed", "test")  # the newest first
    assert ("test_ratio_of_zero", "failed", "test") in said and len(said) == 5


async def test_a_test_run_cancelled_from_the_editor_stops_at_once(
    initialized: LanguageClient, folder: Path
) -> None:
    """`$/cancelRequest` of a test run: pytest is stopped (the hung test's process gone),
    the answer is `cancelled` in a moment, and the tests that ran before it show."""
    (folder / "tests").mkdir()
    text = (
        "import time\n\n\ndef test_first():\n    assert 1 == 2\n\n\n"
        "def test_slow():\n    time.sleep(60)\n"
    )
    tests = open_doc(initialized, folder / "tests" / "test_slow.py", text)
    params = lsp.ExecuteCommandParams(RUN_TESTS, [{"uri": tests}])
    pending = asyncio.ensure_future(
        initialized.protocol.send_request_async(
            lsp.WORKSPACE_EXECUTE_COMMAND, params, msg_id="tests-to-cancel"
        )
    )
    for _ in range(200):  # until pytest is in the slow test (the first one has failed)
        if any("test_first" in (getattr(r, "message", "") or "") for rs in
               initialized.progress_reports.values() for r in rs):  # fmt: skip
            break
        await asyncio.sleep(0.05)
    began = time.monotonic()
    initialized.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="tests-to-cancel"))
    answer = await asyncio.wait_for(pending, 20)
    assert answer["status"] == "cancelled", answer
    assert time.monotonic() - began < 10
    assert answer["message"].startswith("1 failed"), answer
    [shown] = await _errors_on(initialized, tests, 1)  # what ran before the cancel
    assert shown.range.start.line == 4 and shown.message.startswith("test_first failed")


async def test_fix_tests_applies_the_module_fix_the_tests_pass_and_never_edits_a_test(
    client: LanguageClient, folder: Path
) -> None:
    """`runfix.fixTests`, from the quick fix on the failing test's line: the failing test's
    module function fixed by the model (scripted: a first answer that breaks a passing test,
    refused; then one that passes them all), the fix applied as an edit of the module, the
    test file untouched, its failure cleared."""
    from tests.conftest import API_KEY_ENV, init_params
    from tests.support.model_server import ModelServer, code

    (folder / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "stats.py").write_text(STATS)
    (folder / "tests").mkdir()
    only_mean = TESTS.replace("def test_ratio_of_zero", "def _not_a_test")
    (folder / "tests" / "test_stats.py").write_text(only_mean)
    with ModelServer() as model:
        settings = {"model": {"baseUrl": model.url, "name": "test-model", "apiKeyEnv": API_KEY_ENV}}
        await client.initialize_session(init_params(folder, "visual_studio_code", settings))
        module = open_doc(client, folder / "pkg" / "stats.py", STATS)
        tests = open_doc(client, folder / "tests" / "test_stats.py", only_mean)
        fixed = "def mean(xs):\n    total = sum(xs)\n    return total / len(xs) if xs else 0\n"
        model.script(code("def mean(xs):\n    return 3\n"), code(fixed))
        ran = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(RUN_TESTS, [{"uri": tests}])
        )
        assert ran["status"] == "error"
        [failed] = await _errors_on(client, tests, 1)
        actions = await client.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(tests),
                failed.range,
                lsp.CodeActionContext(diagnostics=[failed], only=[lsp.CodeActionKind.QuickFix]),
            )
        )
        [quick_fix] = [a for a in actions or [] if isinstance(a, lsp.CodeAction)]
        assert quick_fix.title == "Fix with model, checked by the tests"
        assert quick_fix.command is not None  # runfix.fixTests of the failing test
        assert list(quick_fix.command.arguments or ()) == [
            {"uri": tests, "position": {"line": 5, "character": 0}}
        ]
        answer = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(quick_fix.command.command, quick_fix.command.arguments)
        )
    assert answer["status"] == "fixed", answer
    assert answer["attempts"] == 2, answer
    assert answer["checked"].startswith("verified: 2 passing tests")
    c: Any = client
    assert c.texts[module].startswith(fixed) and c.texts[tests] == only_mean
    [edit] = c.edits
    edited = [*(edit.edit.changes or {})]
    edited += [getattr(d, "text_document", d).uri for d in edit.edit.document_changes or []]
    assert edited == [module]  # the module, nothing else
    assert await _errors_on(client, tests, 0) == []
