"""Fixes checked against the cells that depend on them (issue 28), over LSP with the
scripted model server: a candidate that runs clean is run again in a throwaway kernel after
the cells above, with the cells that read what it defines, and compared with their last
recorded outcomes before it is offered."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.conftest import change, hints, open_doc, quick_fixes, run
from tests.e2e.test_e2e_model import command, options, shown, start, text
from tests.support.model_server import ModelServer, code

pytestmark = pytest.mark.model

DOC = """\
# %% load
rows = [
    {"item": "tea", "price": 3.5, "qty": 2},
    {"item": "cake", "price": 0.0, "qty": 1},
    {"item": "jam", "price": 5.0, "qty": 4},
]
# %% table
table = {r["item"]: r["price"] * r["qty"] for r in rows}
# %% report
print(table["tea"])
# %% count
assert len(table) == 3, len(table)
# %% seen
seen = globals().get("seen", 0) + len(table)
seen
"""
TABLE = 7  # the line the user breaks and the model fixes
BROKEN = 'table = {r["name"]: r["price"] * r["qty"] for r in rows}'

BENIGN = [
    'table = {r["item"]: r["price"] * r["qty"] for r in rows}',
    'table = {row["item"]: row["price"] * row["qty"] for row in rows}',
    'table = dict((r["item"], r["price"] * r["qty"]) for r in rows)',
    'table = {}\nfor r in rows:\n    table[r["item"]] = r["price"] * r["qty"]',
    'table = {r["item"]: round(r["price"] * r["qty"], 2) for r in rows}',
    'table = {r["item"]: float(r["price"]) * r["qty"] for r in rows}',
    'table = {r["item"]: r["qty"] * r["price"] for r in rows}',
    'table = {r.get("item"): r.get("price", 0) * r.get("qty", 0) for r in rows}',
    'table = {r["item"]: r["price"] * r["qty"] for r in list(rows)}',
    'items = [r["item"] for r in rows]\ntable = {k: r["price"] * r["qty"] for k, r in zip(items, rows)}',  # noqa: E501
    'def total(r):\n    return r["price"] * r["qty"]\n\ntable = {r["item"]: total(r) for r in rows}',  # noqa: E501
    'table = {r["item"]: (lambda p, q: p * q)(r["price"], r["qty"]) for r in rows}',
    'import operator\ntable = {r["item"]: operator.mul(r["price"], r["qty"]) for r in rows}',
    'table = {str(r["item"]): r["price"] * r["qty"] for r in rows}',
    'table = dict(zip([r["item"] for r in rows], [r["price"] * r["qty"] for r in rows]))',
    'table = {}\nfor r in rows:\n    table.update({r["item"]: r["price"] * r["qty"]})',
    'table = {r["item"]: sum([r["price"] * r["qty"]]) for r in rows}',
    'table = {r["item"]: r["price"] * r["qty"] for r in sorted(rows, key=lambda r: r["item"])}',
    'table = {r["item"]: r["price"] * int(r["qty"]) for r in rows}',
    'key = "item"\ntable = {r[key]: r["price"] * r["qty"] for r in rows}',
]

REGRESSIONS = {
    # renames the keys a later cell reads
    "rename": (
        'table = {r["item"].upper(): r["price"] * r["qty"] for r in rows}',
        "breaks `print(table[\"tea\"])` at line 10: KeyError: 'tea'",
    ),
    # a list of pairs where a dict was: what the later cell does with it fails
    "type": (
        'table = [(r["item"], r["price"] * r["qty"]) for r in rows]',
        'breaks `print(table["tea"])` at line 10: TypeError: list indices must be integers',
    ),
    # drops the rows a later assertion counts
    "drops": (
        'table = {r["item"]: r["price"] * r["qty"] for r in rows if r["price"] > 0}',
        "breaks `assert len(table) == 3, len(table)` at line 12: AssertionError: 2",
    ),
}


@pytest.fixture
def model() -> Any:
    with ModelServer() as server:
        yield server


def kernels() -> int:
    """ipykernel processes started under this test process (the servers' kernels), once the
    check kernels being killed are gone (within a few seconds)."""

    def count() -> int:
        found = 0
        for p in psutil.Process(os.getpid()).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                found += p.status() != psutil.STATUS_ZOMBIE and "ipykernel" in " ".join(p.cmdline())
        return found

    deadline = time.monotonic() + 5
    while count() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return count()


async def broken(client: LanguageClient, folder: Path, model: ModelServer, **extra: Any) -> str:
    """The document ran clean (every dependent recorded passing), then the user broke the
    `table` cell and ran it: it raises. Its uri."""
    await start(client, folder, options(model, results="both", **extra), "visual_studio_code")
    uri = open_doc(client, folder / "sales.py", DOC)
    assert (await run(client, uri))["status"] == "ok"
    old = DOC.splitlines()[TABLE]
    change(client, uri, 2, (TABLE, 0), (TABLE, len(old)), BROKEN)
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert (await run(client, uri, TABLE, TABLE))["status"] == "error"
    return uri


async def offered(client: LanguageClient, uri: str) -> lsp.CodeAction:
    """The "Fix with model" quick fix, resolved (the model asked, the candidate run and
    checked): its title says what was checked, its edit is the fix."""
    [action] = [a for a in await quick_fixes(client, uri) if a.title == "Fix with model"]
    return await client.code_action_resolve_async(action)


async def user_kernels_seen(client: LanguageClient, folder: Path) -> str:
    """`seen` in the user's kernel (the dependent cell that counts its runs)."""
    probe = open_doc(client, folder / "probe.py", "seen\n")
    assert (await run(client, probe))["status"] == "ok"
    return str((await hints(client, probe))[0].label)


async def test_benign_fixes_are_offered_as_verified_and_the_users_kernel_is_untouched(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    uri = await broken(client, folder, model)
    for candidate in BENIGN:
        model.script(code(candidate))
        action = await offered(client, uri)
        assert action.edit is not None, (candidate, action.disabled)
        assert action.title == (
            "Fix with model (ran clean on attempt 1; verified: 3 dependent cells still pass)"
        ), (candidate, action.title)
    assert text(client, uri) != DOC and BROKEN in text(client, uri)  # nothing applied
    # The dependents ran 20 times, never in the user's kernel: its count is the first run's.
    assert await user_kernels_seen(client, folder) == "→ 3"
    assert kernels() == 1  # each check's kernel is gone


@pytest.mark.parametrize("case", sorted(REGRESSIONS))
async def test_a_fix_that_breaks_a_passing_dependent_is_offered_with_the_regression_named(
    client: LanguageClient, folder: Path, model: ModelServer, case: str
) -> None:
    candidate, named = REGRESSIONS[case]
    uri = await broken(client, folder, model, fix={"maxAttempts": 1})
    model.script(code(candidate))
    action = await offered(client, uri)
    assert action.edit is not None  # the best candidate is still offered, saying what it breaks
    assert named in action.title, action.title
    assert BROKEN in text(client, uri)
    assert kernels() == 1


async def test_the_model_gets_what_its_fix_broke_and_tries_again(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    uri = await broken(client, folder, model)
    model.script(code(REGRESSIONS["rename"][0]), code(BENIGN[0]))
    action = await offered(client, uri)
    assert action.title == (
        "Fix with model (ran clean on attempt 2; verified: 3 dependent cells still pass)"
    )
    second = model.user_text(1)
    assert 'broke `print(table["tea"])` at line 10' in second and "KeyError: 'tea'" in second


async def test_a_fix_that_deletes_the_failing_line_is_flagged_and_never_applied_unseen(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    uri = await broken(client, folder, model, fix={"maxAttempts": 1})
    model.script(code("pass"))  # the failing statement, gone
    action = await offered(client, uri)
    assert action.edit is not None
    assert f"removes the failing line (`{BROKEN}`): look before applying" in action.title
    assert 'breaks `print(table["tea"])` at line 10: NameError' in action.title
    # Run and fix applies what passes: this one it does not apply.
    model.script(code("pass"))
    at = {"line": TABLE, "character": 0}
    answer = await command(client, "runfix.runAndFix", {"uri": uri, "position": at})
    assert answer["status"] == "failed" and "it was not applied" in answer["message"], answer
    assert BROKEN in text(client, uri)
    assert "it was not applied" in shown(client)


async def test_over_budget_the_fix_is_offered_as_not_checked(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    slow = DOC.replace('print(table["tea"])', 'import time\ntime.sleep(3)\nprint(table["tea"])')
    await start(client, folder, options(model, fix={"checkBudget": 0.5}), "visual_studio_code")
    uri = open_doc(client, folder / "sales.py", slow)
    assert (await run(client, uri))["status"] == "ok"
    old = slow.splitlines()[TABLE]
    change(client, uri, 2, (TABLE, 0), (TABLE, len(old)), BROKEN)
    await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    assert (await run(client, uri, TABLE, TABLE))["status"] == "error"
    model.script(code(BENIGN[0]))
    action = await offered(client, uri)
    assert action.edit is not None
    assert "not checked against dependents: over the 0.5 s budget" in action.title, action.title
    assert kernels() == 1


async def test_checking_dependents_can_be_switched_off(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    uri = await broken(client, folder, model, fix={"checkDependents": False})
    model.script(code(REGRESSIONS["rename"][0]))
    action = await offered(client, uri)
    assert action.title == "Fix with model (ran clean on attempt 1)"


async def test_the_check_runs_where_the_code_runs(
    client: LanguageClient, folder: Path, model: ModelServer, executor: str
) -> None:
    """In the sandbox, the check's kernel is another container; on a Jupyter Server,
    another kernel there: never the user's."""
    uri = await broken(client, folder, model, executor=executor, fix={"maxAttempts": 1})
    model.script(code(REGRESSIONS["drops"][0]))
    action = await offered(client, uri)
    assert REGRESSIONS["drops"][1] in action.title, action.title
    assert await user_kernels_seen(client, folder) == "→ 3"


async def test_the_check_runs_the_candidate_and_the_dependents_confined(
    client: LanguageClient, folder: Path, model: ModelServer
) -> None:
    """Issue 68, 3: code that behaves in the user's kernel and not in a fresh one (it looks
    for a name the kernel holds) is confined in the check's kernel too: what it tried there
    is said, and nothing of it is written."""
    uri = await broken(client, folder, model)
    marker = folder.parent / "written-by-the-check"
    candidate = (
        "import random\n"
        "S = random._os.sys.modules\n"
        'table = {r["item"]: r["price"] * r["qty"] for r in rows}\n'
        "if not hasattr(S['__main__'], 'seen'):\n"
        f"    S['io'].open({str(marker)!r}, 'w').write('x')"
    )
    model.script(code(candidate))
    action = await offered(client, uri)
    assert "not checked against dependents: in the check's jail it tried a write" in (
        action.title
    ), action.title
    assert not marker.exists()
