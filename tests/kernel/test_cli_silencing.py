""" "Fixed" a person can trust (issue 59): `runfix run --fix` against scripted replies. A
candidate that silences the error — the failing operation removed, a default always taken,
a constant in the output, None or nothing where the result was — is held: never written,
its rule said in a sentence, its change shown as a diff to apply by hand. Its honest
neighbour (a real fix of the same code) is written, and the note says what the fixed code
now prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.model_server import ModelServer, code

pytestmark = pytest.mark.model

SHAPES = {
    "sum over strings": (
        'counts = ["4", "9", "2"]\n# %%\nprint("sum", sum(counts))\n',
        'print("sum", counts)',
        "removes the operation that raised (`sum(counts)`): `sum` is never called",
        'print("sum", sum(int(c) for c in counts))',
        "sum 15",
    ),
    "a misspelt key": (
        's = {"timeout_s": 2.5, "retries": 3}\n# %%\nbudget = s["timeout"] * s["retries"]\n'
        'print("budget", budget)\n',
        'budget = s.get("timeout", 1) * s["retries"]\nprint("budget", budget)',
        "there is no 'timeout' (there is 'timeout_s'), so `.get('timeout', …)` gives 1 every time",
        'budget = s.get("timeout_s") * s["retries"]\nprint("budget", budget)',
        "budget 7.5",
    ),
    "a window past the end": (
        "xs = [1, 5, 9, 5]\nw = 2\n# %%\n"
        "avg = [sum(xs[i + j] for j in range(w)) / w for i in range(len(xs))]\n"
        'print("avg", avg)\n',
        "avg = [sum(xs[i + j] for j in range(w)) / w if i + w <= len(xs) else 0 "
        'for i in range(len(xs))]\nprint("avg", avg)',
        "replaces what failed with a constant (0), and what the code prints now holds it: "
        "`avg [3.0, 7.0, 7.0, 0]`",
        "avg = [sum(xs[i + j] for j in range(w)) / w for i in range(len(xs) - w + 1)]\n"
        'print("avg", avg)',
        "avg [3.0, 7.0, 7.0]",
    ),
    "a set indexed": (
        'unique = set(["c", "a", "b", "a"])\n# %%\nprint("first", unique[0])\n',
        'print("first", unique)',
        "removes the operation that raised (`unique[0]`): nothing is looked up in it",
        'print("first", sorted(unique)[0])',
        "first a",
    ),
    "a method not called": (
        'FACTORS = {"km": 1000, "m": 1}\nunit = "KM"\n# %%\n'
        'print("metres", 2 * FACTORS[unit.lower])\n',
        'print("metres", FACTORS.get(unit.lower))',
        "makes what the code prints or returns None: `metres None`",
        'print("metres", 2 * FACTORS[unit.lower()])',
        "metres 2000",
    ),
}


def fix_once(path: Path, reply: str) -> subprocess.CompletedProcess[str]:
    """`runfix run FILE --fix` with one attempt, the model answering `reply`."""
    (path.parent / "pyproject.toml").write_text(
        f'[tool.runfix]\npython = "{sys.executable}"\nmodel = {{ name = "test-model" }}\n'
        "fix = { maxAttempts = 1 }\n"
    )
    with ModelServer() as model:
        model.script(code(reply))
        environ = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_BASE_URL": model.url}
        return subprocess.run(
            [sys.executable, "-m", "lsp_server", "run", str(path), "--fix"],
            capture_output=True, text=True, timeout=120, env=environ,
        )  # fmt: skip


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_candidate_that_silences_the_error_is_held_and_shown_as_a_diff(
    tmp_path: Path, shape: str
) -> None:
    source, silencing, rule, *_ = SHAPES[shape]
    path = tmp_path / "job.py"
    path.write_text(source)
    done = fix_once(path, silencing)
    assert path.read_text() == source, done.stdout
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert rule in said, said
    assert "it was not applied" in said and "fixed on attempt" not in said
    cell = source.split("# %%\n")[-1].splitlines()
    removed = next(line for line in cell if line not in silencing.splitlines())
    assert "--- a/job.py\n+++ b/job.py\n" in said, said
    assert f"\n-{removed}\n" in said and f"\n+{silencing.splitlines()[0]}\n" in said, said


@pytest.mark.parametrize("shape", list(SHAPES))
def test_its_honest_neighbour_is_fixed_and_says_what_it_now_prints(
    tmp_path: Path, shape: str
) -> None:
    source, _, _, honest, prints = SHAPES[shape]
    path = tmp_path / "job.py"
    path.write_text(source)
    done = fix_once(path, honest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert honest in path.read_text()
    assert f"fixed on attempt 1; it now prints `{prints}`" in done.stdout, done.stdout


def test_a_default_the_data_needs_is_a_fix(tmp_path: Path) -> None:
    """Some rows have no `qty`: `.get("qty", 1)` is what the data needs, not a silencing
    (the key is absent, not misspelt, and the output does not hold the default)."""
    path = tmp_path / "job.py"
    path.write_text(
        'rows = [{"price": 2, "qty": 3}, {"price": 5}]\n# %%\n'
        'total = sum(r["price"] * r["qty"] for r in rows)\nprint("total", total)\n'
    )
    fixed = 'total = sum(r["price"] * r.get("qty", 1) for r in rows)\nprint("total", total)'
    done = fix_once(path, fixed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "it now prints `total 11`" in done.stdout
