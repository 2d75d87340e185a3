"""`runfix test` (issue 50, 1 and 2): the project's tests run by pytest in the folder's own
interpreter through runfix's plugin; each failure on the line of the test that failed, with
pytest's detail of the compared values and the line of the module that raised; a hanging
test stopped; a folder with no tests, no pytest or a broken conftest answered clearly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernel.test_cli import runfix
from tests.support.model_server import ModelServer, code

STATS = """\
def mean(xs):
    total = sum(xs)
    return total / (len(xs) + 1)


def ratio(a, b):
    return a / b
"""

TESTS = """\
from pkg.stats import mean, ratio


def test_mean():
    values = [2, 4]
    assert mean(values) == 3


def test_empty_mean_is_zero():
    assert mean([]) == 0


def test_ratio_of_zero():
    assert ratio(1, 0) == 0


def test_ratio():
    assert ratio(6, 3) == 2
"""


def project(tmp_path: Path, tests: str = TESTS) -> Path:
    folder = tmp_path / "project"
    (folder / "pkg").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "pyproject.toml").write_text("[project]\nname = 'pkg'\n")
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "stats.py").write_text(STATS)
    (folder / "tests" / "test_stats.py").write_text(tests)
    return folder


def test_failures_are_printed_on_the_lines_that_raised(tmp_path: Path) -> None:
    folder = project(tmp_path)
    done = runfix("test", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # the assert, with the values pytest compared
    assert (
        "tests/test_stats.py:6:5: error: test_mean failed: AssertionError: assert 2.0 == 3" in lines
    )
    assert "tests/test_stats.py:6:5: note:  +  where 2.0 = mean([2, 4])" in lines
    # an error raised in the module: the test's line, and the module's line that raised
    assert (
        "tests/test_stats.py:14:5: error: test_ratio_of_zero failed: "
        "ZeroDivisionError: division by zero"
    ) in lines
    assert "pkg/stats.py:7:5: note: raised here (in ratio), called by test_ratio_of_zero" in lines
    assert lines[-1].startswith("runfix: 2 passed, 2 failed in ")


def test_the_record_keeps_each_test_run(tmp_path: Path) -> None:
    """`runfix history` lists each test's run (who: `test`), its outcome and pytest's line,
    on the test function's line of its file, newest first."""
    folder = project(tmp_path)
    assert runfix("test", cwd=folder).returncode == 1
    (folder / "pkg" / "stats.py").write_text(STATS.replace("(len(xs) + 1)", "len(xs)"))
    assert runfix("test", "-k", "test_mean", cwd=folder).returncode == 0
    shown = runfix("history", "tests/test_stats.py", "--json", cwd=folder)
    runs = json.loads(shown.stdout)
    said = [(r["code"].split("::")[-1], r["status"], r["origin"]) for r in runs]
    assert said[0] == ("test_mean", "passed", "test")  # the newest first
    assert ("test_mean", "failed", "test") in said and len(said) == 5
    failed = next(r for r in runs if r["code"].endswith("::test_mean") and r["status"] == "failed")
    assert failed["error"] == "AssertionError: assert 2.0 == 3", failed
    assert (failed["first"], failed["path"]) == (4, str(folder / "tests" / "test_stats.py"))
    text = runfix("history", cwd=folder).stdout
    assert "test_stats.py:4 test passed" in text, text


@pytest.mark.docker
def test_the_sandbox_runs_the_tests_in_its_container(tmp_path: Path, sandbox_image: str) -> None:
    """`executor = "docker"`: pytest runs in the container (its /workspace, its user), and
    the failures are said on the host's files."""
    folder = project(tmp_path)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # the sandbox's user (nobody) reads it
    (folder / "pyproject.toml").write_text(
        "[project]\nname = 'pkg'\n[tool.runfix]\nexecutor = \"docker\"\n"
    )
    (folder / "tests" / "test_where.py").write_text(
        "import os\n\n\ndef test_in_the_container():\n    assert os.getcwd() == '/workspace'\n"
    )
    done = runfix("test", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        "tests/test_stats.py:6:5: error: test_mean failed: AssertionError: assert 2.0 == 3" in lines
    ), lines
    assert "pkg/stats.py:7:5: note: raised here (in ratio), called by test_ratio_of_zero" in lines
    assert lines[-1].startswith("runfix: 3 passed, 2 failed in "), lines


def test_one_test_file_and_k_select_the_tests(tmp_path: Path) -> None:
    folder = project(tmp_path)
    done = runfix("test", "tests/test_stats.py", "-k", "ratio and not zero", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("runfix: 1 passed in ")


def test_json_github_and_sarif_say_each_failure_where_it_failed(tmp_path: Path) -> None:
    folder = project(tmp_path)
    done = runfix("test", "--format", "json", cwd=folder)
    assert done.returncode == 1
    report = json.loads(done.stdout)
    by_id = {t["id"]: t for t in report["tests"]}
    failed = by_id["tests/test_stats.py::test_ratio_of_zero"]
    assert failed["outcome"] == "failed" and failed["at"] == {
        "file": "tests/test_stats.py",
        "line": 14,
    }
    assert failed["raised"] == {"file": "pkg/stats.py", "line": 7}
    assert failed["values"] == {"a": "1", "b": "0"}  # the frame that raised, as pytest held it
    assert by_id["tests/test_stats.py::test_ratio"]["outcome"] == "passed"
    github = runfix("test", "--format", "github", cwd=folder).stdout.splitlines()
    assert any(
        line.startswith("::error file=tests/test_stats.py,line=6,title=runfix%3A test_mean")
        for line in github
    ), github
    sarif = json.loads(runfix("test", "--format", "sarif", cwd=folder).stdout)
    places = [
        r["locations"][0]["physicalLocation"]["region"]["startLine"]
        for r in sarif["runs"][0]["results"]
    ]
    assert sorted(places) == [6, 14] and sarif["version"] == "2.1.0"


def test_a_hanging_test_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    slow = (
        "import time\n\n\ndef test_quick():\n    pass\n\n\n"
        "def test_hangs():\n    time.sleep(60)\n\n\ndef test_after():\n    pass\n"
    )
    folder = project(tmp_path, slow)
    done = runfix("test", "--timeout", "1", cwd=folder)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "tests/test_stats.py:8:1: error: test_hangs hung: the test ran over 1s: stopped (the "
        "tests after it did not run)"
    )
    assert lines[-1].startswith("runfix: 1 passed, 1 hung in ")


def test_no_tests_no_pytest_and_a_broken_conftest_are_said_clearly(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "pyproject.toml").write_text("[project]\nname = 'empty'\n")
    done = runfix("test", cwd=empty)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "runfix: error: pytest found no tests to run"

    broken = project(tmp_path)
    (broken / "tests" / "conftest.py").write_text("import no_such_module_here\n")
    done = runfix("test", cwd=broken)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"runfix: error: pytest could not load {broken / 'tests' / 'conftest.py'}: "
        "ModuleNotFoundError: No module named 'no_such_module_here'"
    )

    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "test_x.py").write_text("def test_x():\n    pass\n")
    venv = bare / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = runfix("test", cwd=bare)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "runfix: error: pytest is not installed in the folder's interpreter (`pip install pytest`)"
    )


def fix_tests(folder: Path, model: ModelServer, *more: str) -> subprocess.CompletedProcess[str]:
    """`runfix test --fix` against the loopback model (the endpoint from the environment)."""
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "pkg"\n[tool.runfix]\npython = "{sys.executable}"\n'
        'model = { name = "test-model" }\n'
    )
    environ = {**os.environ, "OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": model.url}
    return subprocess.run(
        [sys.executable, "-m", "lsp_server", "test", "--fix", *more],
        capture_output=True,
        text=True,
        timeout=180,
        env=environ,
        cwd=folder,
    )


FIXED_MEAN = "def mean(xs):\n    total = sum(xs)\n    return total / len(xs) if xs else 0\n"


@pytest.mark.model
def test_fix_writes_the_module_once_the_failing_tests_pass_and_the_passing_still_do(
    tmp_path: Path,
) -> None:
    """The assert fails in the test; the function it called is fixed (the first candidate
    breaks a test that passed: refused, and the model told what it broke); the test file is
    never changed."""
    folder = project(tmp_path, TESTS.replace("def test_ratio_of_zero", "def _not_a_test"))
    tests_before = (folder / "tests" / "test_stats.py").read_text()
    with ModelServer() as model:
        model.script(
            code("def mean(xs):\n    return 3\n"),  # passes test_mean, breaks the empty mean
            code(FIXED_MEAN),
        )
        done = fix_tests(folder, model)
        asked = model.requests
    assert done.returncode == 0, done.stdout + done.stderr
    after = FIXED_MEAN + STATS[STATS.index("\n\n\n") + 1 :]
    assert (folder / "pkg" / "stats.py").read_text() == after
    assert (folder / "tests" / "test_stats.py").read_text() == tests_before
    out = done.stdout.splitlines()
    fixed = [line for line in out if ": note: fixed" in line]
    assert fixed == [
        "pkg/stats.py:1:1: note: fixed (attempt 2): test_mean now passes; verified: 2 passing "
        "tests still pass"
    ], out
    # what the model was told: pytest's compared values, the test as the caller
    first = json.dumps(asked[0]["messages"])
    assert "assert 2.0 == 3" in first and "where 2.0 = mean([2, 4])" in first
    assert "def test_mean" in first
    second = json.dumps(asked[1]["messages"])
    assert "test_empty_mean_is_zero" in second or "test_ratio" in second, second
    assert out[-1].startswith("runfix: 3 passed in "), out
    # each candidate is in the run record, the model's, with how the failing test did
    history = subprocess.run(
        [sys.executable, "-m", "lsp_server", "history", "--json"],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    candidates = [r for r in json.loads(history.stdout) if r["origin"] == "model"]
    assert [(r["path"], r["first"], r["status"]) for r in reversed(candidates)] == [
        (str(folder / "pkg" / "stats.py"), 1, "ok"),
        (str(folder / "pkg" / "stats.py"), 1, "ok"),
    ], history.stdout
    assert candidates[0]["code"] == FIXED_MEAN and candidates[0]["model"] is not None


@pytest.mark.model
def test_fix_verbose_prints_the_exchanges_and_no_model_is_said_once(tmp_path: Path) -> None:
    """Issue 61, 6: `runfix test --fix -v` shows what the model was asked and said; with no
    model configured, why nothing was fixed is said once, not once per failure."""
    folder = project(tmp_path, TESTS.replace("def test_ratio_of_zero", "def _not_a_test"))
    with ModelServer() as model:
        model.script(code(FIXED_MEAN))
        done = fix_tests(folder, model, "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runfix: model test-model: asked" in done.stderr, done.stderr
    bare = project(tmp_path / "none", TESTS)  # two failing tests
    environ = {
        k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    (bare / "pyproject.toml").write_text(
        f'[project]\nname = "pkg"\n[tool.runfix]\npython = "{sys.executable}"\n'
    )
    alone = subprocess.run(
        [sys.executable, "-m", "lsp_server", "test", "--fix"],
        capture_output=True,
        text=True,
        timeout=180,
        env=environ,
        cwd=bare,
    )
    assert alone.returncode == 1
    assert alone.stdout.count("No model is configured") == 1, alone.stdout


@pytest.mark.model
def test_a_fix_that_breaks_a_passing_test_is_never_written(tmp_path: Path) -> None:
    folder = project(tmp_path, TESTS.replace("def test_ratio_of_zero", "def _not_a_test"))
    before = (folder / "pkg" / "stats.py").read_text()
    with ModelServer() as model:
        model.script(*(code("def mean(xs):\n    return 3\n") for _ in range(4)))
        done = fix_tests(folder, model)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (folder / "pkg" / "stats.py").read_text() == before
    said = [line for line in done.stdout.splitlines() if "not fixed" in line]
    assert said and said[0].startswith("pkg/stats.py:1:1: note: not fixed (test_mean"), said
    assert "breaks" in said[0] or "no fix kept its dependents passing" in said[0], said


@pytest.mark.model
def test_a_fix_of_one_selected_test_is_checked_against_the_folders_passing_tests(
    tmp_path: Path,
) -> None:
    """`runfix test tests/test_stats.py::test_mean --fix`: the tests that must still pass
    are the folder's, not the selection's (one run of them all first): a candidate that
    passes the selected test and breaks another is refused."""
    folder = project(tmp_path, TESTS.replace("def test_ratio_of_zero", "def _not_a_test"))
    with ModelServer() as model:
        model.script(code("def mean(xs):\n    return 3\n"), code(FIXED_MEAN))
        done = fix_tests(folder, model, "tests/test_stats.py::test_mean")
    assert done.returncode == 0, done.stdout + done.stderr
    fixed = [line for line in done.stdout.splitlines() if ": note: fixed" in line]
    assert fixed == [
        "pkg/stats.py:1:1: note: fixed (attempt 2): test_mean now passes; verified: 2 passing "
        "tests still pass"
    ], done.stdout


@pytest.mark.model
def test_an_error_raised_in_the_module_is_fixed_where_it_was_raised(tmp_path: Path) -> None:
    tests = (
        "from pkg.stats import ratio\n\n\ndef test_ratio_of_zero():\n    assert ratio(1, 0) == 0\n"
        "\n\ndef test_ratio():\n    assert ratio(6, 3) == 2\n"
    )
    folder = project(tmp_path, tests)
    fixed = "def ratio(a, b):\n    return a / b if b else 0\n"
    with ModelServer() as model:
        model.script(code(fixed))
        done = fix_tests(folder, model)
        asked = json.dumps(model.requests[0]["messages"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "pkg" / "stats.py").read_text().endswith(fixed)
    assert "ZeroDivisionError" in asked and "b = 0" in asked  # the frame's values
    assert any(
        line.startswith("pkg/stats.py:6:1: note: fixed (attempt 1)")
        for line in done.stdout.splitlines()
    )


@pytest.mark.model
def test_a_guard_is_the_tests_to_judge_and_silencing_the_error_is_held(tmp_path: Path) -> None:
    """A candidate that returns early is kept when the tests pass; one that silences the
    error with `try/except: pass` is held (not written), whatever the tests say."""
    tests = (
        "from pkg.stats import ratio\n\n\ndef test_ratio_of_zero():\n"
        "    assert ratio(1, 0) is None\n\n\ndef test_ratio():\n    assert ratio(6, 3) == 2\n"
    )
    folder = project(tmp_path, tests)
    before = (folder / "pkg" / "stats.py").read_text()
    silenced = (
        "def ratio(a, b):\n    try:\n        return a / b\n    except Exception:\n        pass\n"
    )
    with ModelServer() as model:
        model.script(*(code(silenced) for _ in range(4)))
        done = fix_tests(folder, model)
    assert (folder / "pkg" / "stats.py").read_text() == before, done.stdout
    said = [line for line in done.stdout.splitlines() if "not fixed" in line]
    assert said and "silences the error" in said[0], done.stdout

    folder = project(tmp_path / "again", TESTS.replace("def test_mean", "def _mean"))
    guarded = "def ratio(a, b):\n    if b == 0:\n        return 0\n    return a / b\n"
    with ModelServer() as model:
        model.script(code(guarded))
        done = fix_tests(folder, model)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "pkg" / "stats.py").read_text().endswith(guarded)


def test_a_remote_executor_says_it_runs_no_tests(tmp_path: Path) -> None:
    folder = project(tmp_path)
    done = runfix("test", "--remote", "http://127.0.0.1:9", cwd=folder)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "runfix: error: cannot run the tests: a remote Jupyter Server runs code in its kernel "
        "only, away from this folder's files: runfix runs the project's tests with the local "
        "kernel or the sandbox (the `executor` setting)"
    )


@pytest.mark.model
def test_an_answer_that_rewrites_the_test_changes_no_file(tmp_path: Path) -> None:
    """The model answers with the test weakened (the assert made to match the bug): a test
    file is never a fix's target, so the answer goes where the module's function stood,
    fails the tests, and nothing is written — not the module, not the test."""
    folder = project(tmp_path, TESTS.replace("def test_ratio_of_zero", "def _not_a_test"))
    module, tests = folder / "pkg" / "stats.py", folder / "tests" / "test_stats.py"
    before = (module.read_text(), tests.read_text())
    weakened = "def test_mean():\n    values = [2, 4]\n    assert mean(values) == 2.0\n"
    with ModelServer() as model:
        model.script(*(code(weakened) for _ in range(4)))
        done = fix_tests(folder, model)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (module.read_text(), tests.read_text()) == before
    assert any("not fixed (test_mean)" in line for line in done.stdout.splitlines()), done.stdout


@pytest.mark.model
def test_fix_with_a_report_format_keeps_stdout_the_report(tmp_path: Path) -> None:
    tests = (
        "from pkg.stats import ratio\n\n\ndef test_ratio_of_zero():\n    assert ratio(1, 0) == 0\n"
    )
    folder = project(tmp_path, tests)
    with ModelServer() as model:
        model.script(code("def ratio(a, b):\n    return a / b if b else 0\n"))
        done = fix_tests(folder, model, "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)  # the report alone: what the fix did went to stderr
    assert [t["outcome"] for t in report["tests"]] == ["passed"]
    assert "note: fixed (attempt 1)" in done.stderr
