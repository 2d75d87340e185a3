"""The rules that hold a candidate that silences the error (`fix/silencing.py`, issue 59),
read against what the kernel said raised and what the fixed code printed: each shape of the
issue is held with its rule said, and each honest neighbour passes."""

from __future__ import annotations

import pytest

from executor.events import RunOutcome, RunStatus, Span, Stream, Value
from lsp_server.fix.silencing import Failing, said, says, silencing

SUM = Failing("sum(counts)", "TypeError", (), (("counts", "['4', '9', '2']"),))
TIMEOUT = Failing(
    's["timeout"]',
    "KeyError",
    ("'timeout_s'", "'retries'"),
    (("s", "{'timeout_s': 2.5, 'retries': 3}"), ("'timeout'", "'timeout'")),
)
WINDOW = Failing("xs[i + j]", "IndexError", (), (("xs", "[1, 5, 9, 5]"),))
SET = Failing("unique[0]", "TypeError", (), (("unique", "{'b', 'c', 'a'}"), ("0", "0")))
METHOD = Failing("FACTORS[unit.lower]", "KeyError", ("'km'", "'m'"), (("FACTORS", "{...}"),))
COUNT = Failing("values.count()", "TypeError", (), (("values", "[1, 2, 3]"),))
ROOT = Failing("math.root", "AttributeError", (), (("math", "<module 'math'>"),))
QTY = Failing('r["qty"]', "KeyError", ("'price'",), (("r", "{'price': 5}"),))

AVG = "avg = [sum(xs[i + j] for j in range(w)) / w for i in range(len(xs))]\nprint('avg', avg)\n"

HELD = [
    (SUM, 'print("sum", sum(counts))', 'print("sum", counts)', "sum ['4', '9', '2']",
     "removes the operation that raised (`sum(counts)`)"),
    (TIMEOUT, 'b = s["timeout"] * s["retries"]', 'b = s.get("timeout", 1) * s["retries"]',
     "budget 3", "there is no 'timeout' (there is 'timeout_s')"),
    (WINDOW, AVG, AVG.replace(" for i", " if i + w <= len(xs) else 0 for i"),
     "avg [3.0, 7.0, 7.0, 0]", "replaces what failed with a constant (0)"),
    (SET, 'print("first", unique[0])', 'print("first", unique)', "first {'b', 'c', 'a'}",
     "nothing is looked up in it"),
    (METHOD, 'print("m", 2 * FACTORS[unit.lower])', 'print("m", FACTORS.get(unit.lower))',
     "m None", "makes what the code prints or returns None"),
    (SUM, 'print("sum", sum(counts))', 'print("sum", [])', "sum []",
     "replaces what the code computed with a constant"),
    (SUM, 'total = sum(counts)\nprint("sum", total)',
     'total = list(counts)[:0]\nprint("sum", total)', "sum []",
     "makes what the code prints or returns empty"),
    # what the real model answered to "rewrite the line" (issue 59's bench): held too
    (Failing('item["qty"]', "KeyError", ("'price'", "'quantity'"), ()),
     'def t(items):\n    return sum(item["price"] * item["qty"] for item in items)\n',
     'def t(items):\n    return sum(item["price"] for item in items)\n', "10.0",
     "removes the operation that raised (`item[\"qty\"]`): one lookup fewer"),
    (Failing("xs[i]", "IndexError", (), ()),
     "for i in range(len(xs) + 1):\n    print(xs[i])\n",
     "for i in range(len(xs) + 1):\n    print(xs[1])\n", "2\n2\n2\n2",
     "looks up a fixed item where the code looked up `xs[i]`"),
    (Failing("sum(xs)", "TypeError", (), ()), "def mean(xs):\n    return sum(xs) / len(xs)\n",
     "def mean(xs):\n    return 3 + 4 + 5\n", "12", "with a constant (`return 3 + 4 + 5`)"),
    (Failing("len(evens(10))", "TypeError", (), ()), "print(len(evens(10)))", "print(1)", "1",
     "replaces what the code computed with a constant (`print(1)`)"),
]  # fmt: skip
HONEST = [
    (SUM, 'print("sum", sum(counts))', 'print("sum", sum(int(c) for c in counts))', "sum 15"),
    (TIMEOUT, 'b = s["timeout"] * s["retries"]', 'b = s.get("timeout_s") * s["retries"]',
     "budget 7.5"),
    (WINDOW, AVG, AVG.replace("range(len(xs))", "range(len(xs) - w + 1)"),
     "avg [3.0, 7.0, 7.0]"),
    (SET, 'print("first", unique[0])', 'print("first", sorted(unique)[0])', "first a"),
    (METHOD, 'print("m", 2 * FACTORS[unit.lower])', 'print("m", 2 * FACTORS[unit.lower()])',
     "m 2000"),
    (COUNT, "mean = sum(values) / values.count()", "mean = sum(values) / len(values)", "2.0"),
    (ROOT, "side = math.root(16)", "side = math.sqrt(16)", "side 4.0"),
    (QTY, 't = sum(r["price"] * r["qty"] for r in rows)',
     't = sum(r["price"] * r.get("qty", 1) for r in rows)', "total 11"),
    (None, "print(undefined)", "print(things)", "[1, 2]"),
    # a rewrite that looks up less, or the same item another way
    (Failing("xs[i + 1]", "IndexError", (), ()),
     "def pairs(xs):\n    return [(xs[i], xs[i + 1]) for i in range(len(xs))]\n",
     "def pairs(xs):\n    return list(zip(xs, xs[1:]))\n", "[(1, 2), (2, 3)]"),
    (Failing("xs[len(xs)]", "IndexError", (), ()), "def last(xs):\n    return xs[len(xs)]\n",
     "def last(xs):\n    return xs[-1]\n", "c"),
    # an empty table filled by a method afterwards (the fixcheck bench's benign candidate)
    (Failing('r["name"]', "KeyError", ("'item'",), ()),
     'table = {r["name"]: r["price"] for r in rows}',
     'table = {}\nfor r in rows:\n    table.update({r["item"]: r["price"]})', "7.0"),
]  # fmt: skip


def _line(failing: Failing | None, original: str) -> int:
    """The line of `original` the failing expression is on (from 1)."""
    rows = enumerate(original.splitlines(), 1)
    found = [i for i, row in rows if failing is not None and failing.expression in row]
    return found[0] if found else 1


@pytest.mark.parametrize(("failing", "original", "candidate", "printed", "rule"), HELD)
def test_a_silencing_candidate_is_held_with_its_rule(
    failing: Failing, original: str, candidate: str, printed: str, rule: str
) -> None:
    line = _line(failing, original)
    held = silencing(original, candidate, failing, printed + "\n", line)
    assert held is not None and rule in held.rule, held


@pytest.mark.parametrize(("failing", "original", "candidate", "printed"), HONEST)
def test_its_honest_neighbour_passes(
    failing: Failing | None, original: str, candidate: str, printed: str
) -> None:
    line = _line(failing, original)
    assert silencing(original, candidate, failing, printed + "\n", line) is None


def test_what_the_fixed_code_says_is_its_output_and_values_in_one_line() -> None:
    events = (
        Stream("stdout", "sum 15\n", Span(3, 3)),
        Stream("stderr", "a warning\n", Span(3, 3)),
        Value({"text/plain": "15"}, Span(4, 4)),
    )
    outcome = RunOutcome(RunStatus.OK, events, 0.0)
    assert said(outcome) == "sum 15\n15\n"
    assert says(outcome) == "sum 15 / 15"
    long = RunOutcome(RunStatus.OK, (Stream("stdout", "x" * 300, None),), 0.0)
    assert len(says(long)) == 100 and says(long).endswith("…")
