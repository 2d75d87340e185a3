"""Issue 68, 4: a test fix's candidate that reaches past the code the failure ran through is
held with the rule it broke, never run by the tests (`fix/reach.py`)."""

from __future__ import annotations

import pytest

from lsp_server.fix.reach import reaches_past

MEAN = "def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"


@pytest.mark.parametrize(
    ("candidate", "rule"),
    [
        (
            "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
            "def mean(xs):\n    return 0\n",
            "touches _pytest",
        ),
        ("import pytest\ndef mean(xs):\n    pytest.skip('later')\n", "touches pytest"),
        (
            "def mean(xs):\n    __import__('builtins').len = lambda x: 2\n    return 1\n",
            "touches builtins",
        ),
        (
            "import sys\ndef mean(xs):\n    sys.modules['math'] = None\n    return 1\n",
            "sys.modules",
        ),
        (
            "class Any:\n    def __eq__(self, other):\n        return True\n"
            "def mean(xs):\n    return Any()\n",
            "Any.__eq__ returning a constant",
        ),
        (
            "open('notes.txt', 'w').write('loaded')\ndef mean(xs):\n    return sum(xs) / len(xs)\n",
            "a module-level statement that runs at import",
        ),
    ],
)
def test_a_candidate_that_reaches_past_its_code_is_held_with_the_rule(
    candidate: str, rule: str
) -> None:
    said = reaches_past(MEAN, candidate)
    assert said is not None and rule in said, said


@pytest.mark.parametrize(
    "candidate",
    [
        "def mean(xs):\n    return sum(xs) / len(xs)\n",
        "import math\nLIMIT = 10\ndef mean(xs):\n    return math.fsum(xs) / len(xs)\n",
        '"""Means."""\ndef mean(xs):\n    if not xs:\n        return 0.0\n'
        "    return sum(xs) / len(xs)\n",
        "class Point:\n    def __eq__(self, other):\n        return self.x == other.x\n",
    ],
)
def test_an_honest_fix_is_not_held(candidate: str) -> None:
    assert reaches_past(MEAN, candidate) is None


def test_a_test_configuration_named_in_a_candidate_touches_pytest() -> None:
    candidate = "open('pytest.ini', 'w').write('[pytest]')\ndef mean(xs):\n    return 0\n"
    assert "touches pytest" in (reaches_past(MEAN, candidate) or "")


def test_what_the_code_did_before_is_not_held_against_its_fix() -> None:
    before = "import unittest.mock\nPATCH = unittest.mock.patch\ndef f():\n    return 1\n"
    after = "import unittest.mock\nPATCH = unittest.mock.patch\ndef f():\n    return 2\n"
    assert reaches_past(before, after) is None


def test_an_allowance_of_a_path_holding_a_wildcard_is_that_path_only() -> None:
    """Issue 68, S2: "Allow always" of a path holding `*` became a wildcard."""
    from fnmatch import fnmatchcase

    from executor._kernel_guard import Refusal

    pattern = Refusal("write", "/data/out*.csv", "outside the folder").pattern
    assert fnmatchcase("write:/data/out*.csv", pattern)
    assert not fnmatchcase("write:/data/out-everything.csv", pattern)
