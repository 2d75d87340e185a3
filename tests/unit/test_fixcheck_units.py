"""The fix check's plain parts (issue 28): deletion-style candidates, the budget, labels."""

from __future__ import annotations

from lsp_server.fix.fixcheck import (
    FAIL,
    PASS,
    Check,
    Dependent,
    Verdict,
    budget_for,
    deletion_style,
)

ORIGINAL = "total = price * qty\nprint(total)\n"


def test_deletion_style_candidates_are_named_and_real_fixes_are_not() -> None:
    assert deletion_style(ORIGINAL, "print('ok')\n") is None  # a different statement
    assert deletion_style(ORIGINAL, "total = price * quantity\nprint(total)\n") is None
    assert deletion_style(ORIGINAL, "print(total)\n") == "only deletes the failing code"
    assert deletion_style(ORIGINAL, "pass\n") == "only deletes the failing code"
    silenced = "try:\n    total = price * qty\nexcept Exception:\n    pass\nprint(total)\n"
    assert deletion_style(ORIGINAL, silenced) == "silences the error (try/except: pass)"
    function = "def f(x):\n    return x['a']\n"
    early = "def f(x):\n    if 'a' not in x:\n        return None\n    return x['a']\n"
    assert deletion_style(function, early) == "returns early"
    assert deletion_style(ORIGINAL, "total = (\n") is None  # does not parse: not judged


def test_the_budget_is_twice_the_recorded_time_or_the_setting() -> None:
    assert budget_for([1.5, 2.0], None) == 7.0
    assert budget_for([0.01, None], None) == 2.02  # never recorded: counted as 1 s
    assert budget_for([0.01], None) == 2.0  # at least 2 s
    assert budget_for([100.0], 3.0) == 3.0


def test_what_a_check_says() -> None:
    report = Dependent(9, 9, 'print(table["tea"])\n', PASS)
    count = Dependent(11, 11, "assert len(table) == 3\n", FAIL)
    checked = Check("checked", [Verdict(report, PASS), Verdict(count, PASS)])
    assert [v.kind for v in checked.verdicts] == ["PASS_TO_PASS", "FAIL_TO_PASS"]
    assert checked.label == "verified: 1 dependent cell still passes, 1 now passes"
    broken = Check("checked", [Verdict(report, FAIL, "KeyError: 'tea'", "Traceback…")])
    assert broken.label == "breaks `print(table[\"tea\"])` at line 10: KeyError: 'tea'"
    assert "Traceback…" in broken.for_model() and 'print(table["tea"])' in broken.for_model()
    new = Verdict(Dependent(1, 1, "x\n", None), FAIL, "NameError")
    assert new.kind == "NEW_TO_FAIL" and not Check("checked", [new]).regressions
    assert Check("over budget", message="over the 2.0 s budget").label == (
        "not checked against dependents: over the 2.0 s budget"
    )
