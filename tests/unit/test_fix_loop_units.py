"""The fix loop as a real model exposed it (issue 35), its plain parts: where a fix goes,
what counts as fixed, reply hygiene, bounded answers, identical candidates, and what the
fix check reads as a dependent's last outcome."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from executor.events import Error, Frame, RunOutcome, RunStatus, Span, Stream
from lsp_server.fix.fixcheck import FAIL, PASS, Check, Dependent, Verdict, last_outcome, still_runs
from lsp_server.fix.fixing import (
    IDENTICAL,
    Fixer,
    Target,
    enclosing,
    module_frame,
    module_target,
    suggested,
    suggestion,
    target_for,
    user_module,
)
from lsp_server.model.client import ModelConfig
from lsp_server.model.context import ReplyError, answer_bound, extract_code, fix_messages
from lsp_server.settings import Settings
from tests.support.fix_ports import CalledPorts

DOC = (
    "sales = [12.5, 8.0, 19.25]\n"  # 0
    "# %%\n"  # 1
    "@functools.cache\n"  # 2
    "def average(values):\n"  # 3
    "    return sum(values) / len(value)\n"  # 4
    "limit = 3\n"  # 5
    "# %%\n"  # 6
    "print(round(average(sales), 2))\n"  # 7
).splitlines(keepends=True)


# -- where a fix goes ---------------------------------------------------------------------


def test_a_fix_goes_to_the_function_that_raised_not_the_cell_that_called_it() -> None:
    target = target_for(DOC, 7, 7, 4, ["ai:"])
    assert (target.first, target.last, target.line) == (2, 4, 4)  # the def and its decorator
    assert target.code.startswith("@functools.cache\ndef average")
    assert "limit = 3" not in target.code  # the rest of that cell is not the model's to rewrite
    assert not target.holds(7, 7)
    same = target_for(DOC, 7, 7, 7, ["ai:"])  # it raised in the cell that ran
    assert same.holds(7, 7) and same.line == 7
    assert target_for(DOC, 7, 7, None, ["ai:"]).holds(7, 7)
    assert enclosing(DOC, 2, 5, 5) == (5, 5)


def test_a_module_frame_is_a_regular_py_file_of_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    (folder / ".venv/lib").mkdir(parents=True)
    (folder / "stats_util.py").write_text("def mean(v):\n    return sum(v) / len(vv)\n")
    (folder / ".venv/lib/lib.py").write_text("x = 1\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    (folder / "link.py").symlink_to(outside)
    assert user_module(str(folder / "stats_util.py"), folder) == folder / "stats_util.py"
    assert user_module(str(folder / ".venv/lib/lib.py"), folder) is None
    assert user_module(str(folder / "link.py"), folder) is None  # a link out of the folder
    assert user_module("stats_util.py", folder) is None  # relative: not a file we can place
    doc = str(folder / "job.py")
    frames = (
        Frame(doc, 3, "<module>"),
        Frame(str(folder / "stats_util.py"), 2, "mean"),
        Frame("/usr/lib/python3/statistics.py", 10, "fmean"),
    )
    error = Error("NameError", "name 'vv' is not defined", frames, "")
    assert module_frame(error, doc, folder) == (folder / "stats_util.py", 1)


# -- fixed means the failing code still runs ------------------------------------------------


def test_a_candidate_that_drops_or_silences_the_failing_statement_is_not_a_fix() -> None:
    code = 'side = math.sqroot(16)\nprint("side", side)\n'
    assert still_runs(code, 1, 'side = math.sqrt(16)\nprint("side", side)\n') is None
    echoed = "import math\n"  # the 0.5B model's echo of the request's context
    assert still_runs(code, 1, echoed) == "removes the failing line (`side = math.sqroot(16)`)"
    wrapped = 'try:\n    side = math.sqroot(16)\nexcept Exception:\n    pass\nprint("side", side)\n'
    assert "silences the error" in (still_runs(code, 1, wrapped) or "")
    # A call: the same function still called, an argument changed.
    call = "print(sum(itmes))\n"
    assert still_runs(call, 1, "print(sum(items))\n") is None
    assert still_runs(call, 1, "items = []\n") is not None
    # A function's return: a return in the same function, guarded, is fine.
    function = "def average(v):\n    return sum(v) / len(v)\n"
    guarded = "def average(v):\n    if not v:\n        return 0.0\n    return sum(v) / len(v)\n"
    assert still_runs(function, 2, guarded) is None
    assert still_runs(function, 2, "def average(v):\n    pass\n") is not None
    assert still_runs("raise ValueError('x')\n", 1, "x = 1\n") is None  # the user's own raise


# -- python's own suggestion ------------------------------------------------------------------


def test_the_model_is_told_what_python_would_have_suggested() -> None:
    assert suggestion("NameError: name 'value' is not defined", "def f(values): ...") == (
        "Did you mean: 'values'?"
    )
    assert suggestion("NameError: name 'itmes' is not defined", "", ["items"]) == (
        "Did you mean: 'items'?"
    )
    assert suggestion("AttributeError: 'list' object has no attribute 'appnd'", "") == (
        "Did you mean: 'append'?"
    )
    # Python's own rule first: `xs` for `x` (a one-letter name a likeness of letters misses)
    assert suggestion("NameError: name 'x' is not defined", "def spread(xs): ...") == (
        "Did you mean: 'xs'?"
    )
    assert suggestion("AttributeError: module 'math' has no attribute 'sqroot'", "") == (
        "Did you mean: 'sqrt'?"
    )
    assert suggestion("AttributeError: module 'numpyz' has no attribute 'x'", "") is None
    assert suggestion("KeyError: 'a'", "") is None


# -- reply hygiene ----------------------------------------------------------------------------


def test_the_echoed_request_is_no_code_and_the_placeholder_never_reaches_the_file() -> None:
    echo = "```python\n# %%\nimport math\n# %% <<< the code goes here >>>\n```"
    context = ["import math\n", "# %%\n"]
    with pytest.raises(ReplyError, match="only repeated other code"):
        extract_code(echo, asked='side = math.sqroot(16)\nprint("side", side)\n', context=context)
    placeholder = "```python\n# <<< the code goes here >>>\nprint(1)\n```"
    assert extract_code(placeholder) == "print(1)\n"


def test_a_reply_holding_cells_gives_the_one_asked_for() -> None:
    reply = (
        "```python\nsales = [1, 2]\n# %%\ndef average(values):\n"
        "    return sum(values) / len(values)\n# %%\nprint(average(sales))\n```"
    )
    asked = "def average(values):\n    return sum(values) / len(value)\n"
    code = extract_code(reply, asked=asked, context=["sales = [1, 2]\n"])
    assert code == "def average(values):\n    return sum(values) / len(values)\n"
    generated = (
        "```python\n# %% print the mean of x\n# ai: print the mean of x\n"
        "print(sum(x) / len(x))\n```"
    )
    got = extract_code(generated, prompt_line="# ai: print the mean of x")
    assert got == "print(sum(x) / len(x))\n"  # no new cell inside the prompt's body


def test_prose_inside_the_fence_and_a_traceback_block_after_it_are_dropped() -> None:
    assert extract_code("```python\nHere is the fix:\nx = 1\n```") == "x = 1\n"
    two = "```python\nx = compute(1)\n```\nIt raised:\n```\nTraceback (most recent call last):\n```"
    assert extract_code(two, asked="x = compute(0)\n") == "x = compute(1)\n"


# -- bounded answers ------------------------------------------------------------------------


def test_every_answer_is_bounded_from_the_code_asked_for() -> None:
    assert answer_bound("x = 1\n", 1024) == 256
    assert answer_bound("x = 1\n" * 400, 1024) == 1024  # capped by model.maxTokens
    big = "y = compute(x)\n" * 30
    assert 256 < answer_bound(big, 4096) < 4096


def test_temperature_seed_and_the_bound_come_from_the_environment_for_the_cli() -> None:
    env = {
        "RUNFIX_MODEL_TEMPERATURE": "0",
        "RUNFIX_MODEL_SEED": "7",
        "RUNFIX_MODEL_MAX_TOKENS": "300",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }
    config = ModelConfig.from_settings(Settings(), env)
    assert (config.temperature, config.seed, config.max_tokens) == (0.0, 7, 300)
    assert config.token_field == "max_tokens"
    assert ModelConfig.from_settings(Settings(), {}).token_field == "max_completion_tokens"
    # a setting wins over the environment; a bad value is ignored
    mine = Settings(model_temperature=0.2)
    assert ModelConfig.from_settings(mine, {"RUNFIX_MODEL_TEMPERATURE": "x"}).temperature == 0.2


def test_the_request_shows_the_code_to_fix_and_what_it_raised_first_then_its_caller() -> None:
    messages = fix_messages(
        "def average(values):\n    return sum(values) / len(value)\n",
        "NameError: name 'value' is not defined",
        [line for line in DOC],
        (2, 4),
        [],
        [],
        12000,
        caller=("print(round(average(sales), 2))\n", (7, 7)),
    )
    user = messages[1]["content"]
    assert "<<<" not in user  # no placeholder to echo
    assert user.startswith("The code to fix:\n```python\ndef average(values):")
    assert "It raised:\n```\nNameError: name 'value' is not defined\n```" in user
    assert user.index("The code to fix") < user.index("when called by this code")
    assert user.rstrip().endswith("in one ```python block.")
    assert user.count("print(round(average(sales), 2))") == 1  # the caller once, as the test


# -- identical candidates -----------------------------------------------------------------------


def _scripted(
    replies: list[str], asked: list[list[dict[str, str]]], ran: list[str], max_attempts: int = 3
) -> Fixer:
    """A fixer whose model answers `replies` in order and whose runs all pass."""

    async def ask(messages: list[dict[str, str]], what: str, bound: int, before: int) -> str:
        asked.append(messages)
        return replies.pop(0)

    async def run(code: str, at: int) -> RunOutcome:
        ran.append(code)
        return RunOutcome(RunStatus.OK, (Stream("stdout", "[1]\n", Span(1, 1)),), 0.01)

    return Fixer(CalledPorts(ask, run), max_attempts=max_attempts, budget=4000)


async def test_an_unchanged_answer_is_not_run_and_the_next_request_asks_for_the_line() -> None:
    asked: list[list[dict[str, str]]] = []
    ran: list[str] = []
    code = "def total(xs):\n    return sum(xs) + count\n"
    fixer = _scripted(
        [f"```python\n{code}```", "```python\nreturn sum(xs) + len(xs)\n```"], asked, ran
    )
    lines = [*code.splitlines(keepends=True), "total([1])\n"]
    target = Target(0, 1, code, line=1)
    result = await fixer.fix(lines, 2, 2, "total([1])\n", "NameError: count", target)
    assert result.status == "fixed"
    assert result.code == "def total(xs):\n    return sum(xs) + len(xs)\n"  # spliced, indented
    assert ran == [result.code, "total([1])\n"]  # the unchanged one never ran
    second = asked[1][-1]["content"]
    assert "left the code unchanged" in second
    assert "return sum(xs) + count  # <- this line raised" in second
    assert "Rewrite the line `return sum(xs) + count`" in second
    assert result.attempts == 2


async def test_two_answers_alike_in_a_row_end_the_loop_in_the_users_words() -> None:
    asked: list[list[dict[str, str]]] = []
    ran: list[str] = []
    fixer = _scripted(["```python\nprint(itms)\n```"] * 3, asked, ran)
    result = await fixer.fix(["print(itms)\n"], 0, 0, "print(itms)\n", "NameError: itms")
    assert result.status == "failed" and ran == [] and len(asked) == 2
    assert result.message == (
        "the model answered with the code unchanged (2 times), which raises NameError: itms; "
        "it gave the same answer twice"
    )
    assert IDENTICAL not in result.message and "Reply" not in result.message


# -- what the fix check reads as a dependent's last outcome ----------------------------------


@dataclass(frozen=True)
class Ran:
    first: int
    last: int
    code: str
    status: str
    duration: float = 0.1
    error_line: int | None = None


def test_a_dependents_last_outcome_is_found_whatever_command_ran_it() -> None:
    cell = 'print(table["tea"])\n'
    selection = Ran(4, 5, '# %%\nprint(table["tea"])\n', "ok")  # Run selection, marker too
    assert last_outcome([selection], cell) == (PASS, 0.1)
    whole = Ran(0, 9, 'table = {}\n# %%\nprint(table["tea"])\n# %%\nboom()\n', "error", 1.0, 4)
    assert last_outcome([whole], cell)[0] == PASS  # it ran before the later failure
    early = Ran(0, 9, 'boom()\n# %%\nprint(table["tea"])\n', "error", 1.0, 0)
    assert last_outcome([early], cell) == (None, None)  # the run failed before reaching it
    itself = Ran(5, 5, 'print(table["tea"])\n', "error", 0.1, 5)
    assert last_outcome([itself, selection], cell)[0] == FAIL  # newest first
    assert last_outcome([Ran(0, 0, "other()\n", "ok")], cell) == (None, None)


def test_verified_only_when_every_dependent_that_ran_before_still_passes() -> None:
    ran = Dependent(9, 9, "print(total)\n", PASS)
    fresh = Dependent(12, 12, "print(share)\n", None)
    both = Check("checked", [Verdict(ran, PASS), Verdict(fresh, FAIL, "NameError: share")])
    assert both.label.startswith("verified: 1 dependent cell still passes")
    assert "`print(share)` at line 13 fails after the fix (NameError: share); it had not run" in (
        both.label
    )
    only_new = Check("checked", [Verdict(fresh, PASS)])
    assert not only_new.label.startswith("verified")  # nothing had run: nothing to compare


def test_pythons_suggestion_is_a_candidate_on_the_line_that_raised_only() -> None:
    target = Target(3, 4, "def average(values):\n    return sum(values) / len(value)\n", 4)
    code, said = suggested(target, "NameError: name 'value' is not defined", []) or ("", "")
    assert code == "def average(values):\n    return sum(values) / len(values)\n"
    assert said == "Python's suggestion (`value` → `values`)"
    column = Target(2, 2, 'print(df["Sales"].sum())\n', 2)
    assert suggested(column, "KeyError: 'Sales'", [], ["city", "sales"]) == (
        'print(df["sales"].sum())\n',
        "a column the kernel has (`Sales` → `sales`)",
    )
    method = Target(2, 2, "words.srot()\n", 2)
    assert suggested(method, "AttributeError: 'list' object has no attribute 'srot'", [])
    unknown = Target(2, 2, "x = valu\n", None)  # the line that raised is not known
    assert suggested(unknown, "NameError: name 'valu' is not defined", ["value"]) is None
    assert suggested(column, "KeyError: 'region'", [], ["city", "sales"]) is None


def test_a_column_named_like_code_goes_into_the_code_only_as_a_string_literal() -> None:
    """Issue 47, S1 1: a replacement that comes from data is a value, never code."""
    hostile = 'customer_satisfaction_score_after_onboarding_2024_"[:0]+str(exec(df.iat[0,0]))+"'
    misspelt = "customer_satisfaction_score_after_onboarding_2024"
    target = Target(2, 2, f'print(df["{misspelt}"].mean())\n', 2)
    fixed = suggested(target, f"KeyError: '{misspelt}'", [], [hostile])
    assert fixed is not None
    code = fixed[0]
    tree = ast.parse(code)
    keys = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert keys == [hostile]  # the whole column name is one string, nothing else
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in ("exec", "str")]
    # a name or attribute from the kernel that is not an identifier is not put in code
    weird = Target(2, 2, "print(valeu)\n", 2)
    assert suggested(weird, "NameError: name 'valeu' is not defined", ["value)+exec('x')#"]) is None


def test_a_module_swapped_for_a_fifo_during_a_fix_is_not_waited_on(tmp_path: Path) -> None:
    """Issue 47, S2 6: the check that a module file still holds what was read never waits on
    a FIFO (a blocking open stopped the whole server); nor is a link followed."""
    import os
    import threading

    from lsp_server.verbs.fix import _file_holds

    fifo = tmp_path / "helpers.py"
    os.mkfifo(fifo)
    answers: list[bool] = []
    reading = threading.Thread(
        target=lambda: answers.append(_file_holds(Target(0, 0, "x = 1\n", 0, fifo, ("x = 1\n",)))),
        daemon=True,  # (were it to wait, the test must still end)
    )
    reading.start()
    reading.join(5)
    assert answers == [False], "it waited on the FIFO"
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    read = module_target(real, 0)
    assert read is not None and _file_holds(read)
    assert not _file_holds(replace(read, path=link))
