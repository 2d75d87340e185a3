"""`runfix run --format github|sarif|json`: a run's errors as a CI system reads them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sarif_pydantic import Sarif

RUNFIX = [sys.executable, "-m", "lsp_server"]
SCRIPT = """\
# %%
total = sum([1, 2, 3])
print("total", total)

# %%
def ratio(a, b):
    return a / b

ratio(total, 0)
"""


def run(folder: Path, kind: str) -> subprocess.CompletedProcess[str]:
    (folder / "job.py").write_text(SCRIPT)
    return subprocess.run(
        [*RUNFIX, "run", "job.py", "--format", kind], cwd=folder, capture_output=True, text=True
    )


def test_github_annotations_on_the_raising_line(folder: Path) -> None:
    done = run(folder, "github")
    assert done.returncode == 1
    [annotation] = done.stdout.splitlines()  # one per error; results are not annotations
    assert annotation.startswith(
        "::error file=job.py,line=7,endLine=7,col=5,"
        "title=runfix%3A ZeroDivisionError%3A division by zero::"
    ), annotation
    assert "%0A" in annotation and "\n" not in annotation  # the traceback, one line


def test_sarif_is_a_valid_2_1_0_log_with_the_error_located(folder: Path) -> None:
    done = run(folder, "sarif")
    assert done.returncode == 1
    log = json.loads(done.stdout)
    Sarif.model_validate(log)  # SARIF 2.1.0's object model: required fields, enums, types
    assert log["version"] == "2.1.0"
    [result] = log["runs"][0]["results"]
    assert result["level"] == "error" and result["ruleId"] == "run-error"
    assert result["message"]["text"] == "ZeroDivisionError: division by zero"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "job.py"
    assert location["region"] == {"startLine": 7, "startColumn": 5}
    assert "line 9, in <module>" in result["properties"]["traceback"]


def test_json_has_the_results_and_the_problems(folder: Path) -> None:
    done = run(folder, "json")
    report = json.loads(done.stdout)
    assert report["file"] == "job.py"
    assert {"line": 3, "lastLine": 3, "summary": "total 6", "text": "total 6\n"} in report[
        "results"
    ]
    [problem] = report["problems"]
    assert (problem["line"], problem["severity"]) == (7, "error")


@pytest.mark.parametrize("kind", ["json", "sarif"])
def test_a_run_that_stops_early_still_prints_only_the_document(folder: Path, kind: str) -> None:
    """The run that stops before its last cell is the one CI formats are for: remarks
    (`stopped; 1 later cell(s) not run`) go to stderr, stdout is the document alone."""
    (folder / "job.py").write_text("# %%\n1 / 0\n\n# %%\nprint('never')\n")
    done = subprocess.run(
        [*RUNFIX, "run", "job.py", "--format", kind], cwd=folder, capture_output=True, text=True
    )
    assert done.returncode == 1
    json.loads(done.stdout)  # nothing but the document
    assert "stopped; 1 later cell(s) not run" in done.stderr
