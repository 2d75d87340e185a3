"""A fix's first attempt as a round of candidates asked at once (issue 69): each run on its
own, the one chosen by what the candidates agree the code prints; where clean candidates
disagree with no group holding most, what each prints is said and none is called fixed."""

from __future__ import annotations

import contextlib
import io
import traceback

from executor.events import Error, Jailed, RunOutcome, RunStatus, Span, Stream
from lsp_server.fix.candidates import Ran, agreed, changed, disagreement, grouped
from lsp_server.fix.fixing import Fixer, Target
from lsp_server.model.paste import PASTE_SYSTEM, from_file
from tests.support.fix_ports import CalledPorts

DOC = (
    "def middle(xs):\n"  # 0
    "    xs = sorted(xs)\n"  # 1
    "    return xs[len(xs) // 2 + 1]\n"  # 2
    "# %%\n"  # 3
    "print(middle([9, 1]))\n"  # 4
).splitlines(keepends=True)
TARGET = Target(0, 2, "".join(DOC[:3]), line=2)
ERROR = "IndexError: list index out of range"


def block(code: str) -> str:
    return f"Here:\n```python\n{code}```\n"


def whole(function: str) -> str:
    """A paste-style answer: the whole file with `function` in place."""
    return block(function + "".join(DOC[3:]))


def runs(defined: dict[str, str], jail: bool = True) -> tuple[list[str], object]:
    """A run port that runs the candidate then the caller in a fresh namespace (a jail of
    its own each time), as the kernel's jail would: what it printed, or what it raised.
    `jail` False: a kernel with no jail (each run said to be the kernel's own)."""
    jailed = Jailed("ran") if jail else None
    ran: list[str] = []
    pending: list[str] = []

    async def run(code: str, at: int) -> RunOutcome:
        ran.append(code)
        if code.startswith("def "):  # a candidate for the function: its test, the caller, next
            pending[:] = [code]
            return RunOutcome(RunStatus.OK, (), 0.0)
        namespace: dict[str, object] = {}
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                for piece in [*pending, code]:
                    exec(piece, namespace)
        except Exception as exc:  # what the code raised is the run's error
            text = "".join(traceback.format_exception_only(exc))
            failed = Error(type(exc).__name__, str(exc), (), text)
            return RunOutcome(RunStatus.ERROR, (failed,), 0.0, jailed=jailed)
        printed = (Stream("stdout", out.getvalue(), Span(1, 1)),)
        return RunOutcome(RunStatus.OK, printed, 0.0, jailed=jailed)

    return ran, run


def fixer(replies: dict[str, list[str]], ran_with: object, n: int = 4) -> tuple[Fixer, list[str]]:
    """A fixer whose model answers each way of asking from `replies` ("asked", "paste",
    "sampled", then "again" for the loop's later requests), in order."""
    asked: list[str] = []

    async def ask(messages: list[dict[str, str]], what: str, bound: int, before: int) -> str:
        how = what.rsplit("(", 1)[-1].rstrip(")") if what.endswith(")") else "again"
        if messages[0]["content"] == PASTE_SYSTEM:
            assert how == "paste" and "```python\ndef middle" in messages[1]["content"]
            assert ERROR in messages[1]["content"]
        asked.append(how)
        return replies[how].pop(0)

    ports = CalledPorts(ask, ran_with)  # type: ignore[arg-type]
    return Fixer(ports, max_attempts=3, budget=4000, candidates=n, path="job.py"), asked


NINE = "def middle(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2]\n"
NINE_TOO = "def middle(xs):\n    xs = sorted(xs)\n    mid = len(xs) // 2\n    return xs[mid]\n"
TEN = "def middle(xs):\n    xs = sorted(xs)\n    return sum(xs)\n"
ONE = "def middle(xs):\n    xs = sorted(xs)\n    return xs[len(xs) // 2 - 1]\n"


async def test_the_largest_group_by_what_it_prints_wins_and_its_smallest_change() -> None:
    _, run = runs({})
    fix, asked = fixer(
        {"asked": [block(TEN)], "paste": [whole(NINE_TOO)], "sampled": [block(NINE), block(ONE)]},
        run,
    )
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert sorted(asked) == ["asked", "paste", "sampled", "sampled"]  # one round, no more
    assert result.status == "fixed" and result.held is None
    assert result.code == NINE  # of the two that print 9, the one changing fewer lines
    assert result.says == "9" and result.attempts == 1


async def test_candidates_that_disagree_are_said_and_none_is_called_fixed() -> None:
    _, run = runs({})
    fix, asked = fixer({"asked": [block(TEN)], "paste": [whole(NINE)]}, run, n=2)
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert sorted(asked) == ["asked", "paste"]  # not asked again: one more answer is no judge
    assert result.held is not None  # never applied without a look
    assert "2 candidates that ran clean and disagree" in result.held
    assert "1 prints `10`" in result.held and "1 prints `9`" in result.held
    assert "none is called fixed" in result.label


async def test_a_silencing_candidate_loses_to_an_honest_one_whatever_the_count() -> None:
    swallowed = (
        "def middle(xs):\n    xs = sorted(xs)\n    try:\n        return xs[len(xs) // 2 + 1]\n"
        "    except IndexError:\n        return 0\n"
    )
    _, run = runs({})
    fix, _ = fixer(
        {
            "asked": [block(swallowed)],
            "paste": [whole(NINE)],
            "sampled": [block(swallowed.replace("return 0", "return -1")), block(swallowed)],
        },
        run,
    )
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert result.status == "fixed" and result.held is None and result.code == NINE


async def test_when_none_runs_clean_the_loop_asks_again_with_what_failed() -> None:
    broken = "def middle(xs):\n    return xs[len(xs) + 3]\n"
    _, run = runs({})
    fix, asked = fixer(
        {"asked": [block(broken)], "paste": ["no code here"], "again": [block(NINE)]}, run, n=2
    )
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert asked[-1] == "again" and result.status == "fixed" and result.code == NINE
    assert result.attempts == 2


def test_grouping_and_choosing_are_plain_functions() -> None:
    def ran(code: str, printed: str) -> Ran:
        return Ran(code, RunOutcome(RunStatus.OK, (Stream("stdout", printed, Span(1, 1)),), 0.0))

    a, b, c = ran("x = 1\n", "5\n"), ran("x = 1\ny = 2\n", "5 \n"), ran("x = 3\n", "4\n")
    groups = grouped([c, a, b])
    assert [len(g) for g in groups] == [2, 1]  # trailing spaces aside, a and b agree
    assert agreed(groups, "x = 0\n") is a  # the smaller change of the two
    assert agreed(grouped([a, c]), "x = 0\n") is None  # one against one: no winner
    assert "1 prints `5`; 1 prints `4`" in disagreement(grouped([a, c]))
    assert changed("a\nb\n", "a\nc\nd\n") == 2


def test_the_paste_answer_is_cut_to_the_code_it_replaces() -> None:
    assert from_file(whole(NINE), DOC, 0, 2) == NINE
    added = block("import math\n" + NINE + "".join(DOC[3:]))
    assert from_file(added, DOC, 0, 2) == "import math\n" + NINE  # an import moves with it


async def test_the_same_code_answered_twice_counts_twice() -> None:
    """Two sampled answers that are the very same code are two votes (run once)."""
    _, run = runs({})
    fix, _ = fixer(
        {"asked": [block(TEN)], "paste": [whole(ONE)], "sampled": [block(NINE), block(NINE)]},
        run,
    )
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert result.status == "fixed" and result.held is None and result.code == NINE


async def test_without_a_jail_only_one_candidate_runs() -> None:
    """A kernel with no jail (another language's, Landlock off, the sandbox's): each run
    would be a question and a change to the kernel; the round runs its first candidate
    only, as one answer would."""
    ran, run = runs({}, jail=False)
    fix, _ = fixer(
        {"asked": [block(TEN)], "paste": [whole(NINE)], "sampled": [block(NINE), block(ONE)]},
        run,
    )
    result = await fix.fix(DOC, 4, 4, DOC[4], ERROR, TARGET)
    assert [c for c in ran if c.startswith("def ")] == [TEN]  # the request's own answer
    assert result.status == "fixed" and result.code == TEN
