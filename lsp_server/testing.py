"""What a run of the project's tests says, on the lines that said it: a failing test on
the line of its test file that failed (the assert, with the values pytest compared), the
innermost frame of the project's own code it went through (a module, not a test file) as
the place that raised, and the frames between as the chain. `runfix test` prints these;
the CI formats write them (`github`, `sarif`, `json`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.testing import Frame, TestResult, TestRun
from lsp_server import __version__
from lsp_server.record.ci_formats import SARIF_SCHEMA
from lsp_server.record.store import RecordedRun


def is_test_file(path: Path) -> bool:
    """A file pytest collects tests from, or its conftest (never a fix's target)."""
    name = path.name
    return (
        name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    )


_TEST_DEF = re.compile(r"^(?:async\s+)?def\s+(test\w*)\s*\(|^class\s+(Test\w*)\b")


def tests_in(lines: Sequence[str]) -> list[tuple[int, str]]:
    """The top-level tests of a test file: each `def test_…` and `class Test…`, with its line
    (0-based)."""
    found = []
    for number, line in enumerate(lines):
        match = _TEST_DEF.match(line)
        if match:
            found.append((number, match.group(1) or match.group(2)))
    return found


def test_at(lines: Sequence[str], line: int) -> str | None:
    """The name of the top-level test holding `line` (the last one starting at or above it,
    if no top-level code stands between)."""
    name = None
    for text in lines[: line + 1]:
        match = _TEST_DEF.match(text)
        if match:
            name = match.group(1) or match.group(2)
        elif text.strip() and not text[0].isspace() and not text.lstrip().startswith(("#", "@")):
            name = None  # top-level code of its own
    return name


@dataclass(frozen=True)
class Place:
    path: Path
    line: int
    """From 1."""
    name: str
    """The function there."""


@dataclass(frozen=True)
class Failure:
    """One failing test, placed."""

    test: TestResult
    at: Place
    """Where it failed in its test file: the test's innermost frame there (the assert)."""
    raised: Place | None
    """The innermost frame of the project's own code outside its tests, if the failure
    came from one (the module a fix would change)."""
    chain: tuple[Place, ...]
    """Every frame of the project's code it went through, outermost first."""

    @property
    def message(self) -> str:
        """pytest's first line: `AssertionError: assert 2.0 == 3`."""
        first = (self.test.error or self.test.outcome).strip().splitlines()
        return first[0] if first else self.test.outcome

    @property
    def detail(self) -> list[str]:
        """The lines after it: pytest's explanation of the compared values (`+  where …`)."""
        return [line for line in (self.test.error or "").splitlines()[1:] if line.strip()]

    @property
    def values(self) -> dict[str, str]:
        """The innermost frame's local names and values, as pytest's traceback held them."""
        return dict(self.test.frames[-1].locals) if self.test.frames else {}


def _place(frame: Frame) -> Place:
    return Place(Path(frame.path), frame.line, frame.name)


def failures(run: TestRun) -> list[Failure]:
    """The run's failing tests, each placed on its test file and the module that raised."""
    out = []
    for test in run.failed:
        chain = tuple(_place(f) for f in test.frames)
        in_tests = [p for p in chain if is_test_file(p.path)]
        outside = [p for p in chain if not is_test_file(p.path)]
        at = in_tests[-1] if in_tests else Place(Path(test.path), test.line, test.name)
        out.append(Failure(test, at, outside[-1] if outside else None, chain))
    return out


TESTED = "test"
"""The origin the run record gives a test's run (`runfix history` says who ran what)."""


def recorded(run: TestRun) -> list[RecordedRun]:
    """Each test the run ran, as the run record keeps it: on its test function's line (of
    its test file), its node id for code — never a document's code, so nothing restores it
    as a cell's result — with its outcome, duration and, failed, pytest's first line."""
    now = time.time()
    failed = {f.test.id: f for f in failures(run)}
    out = []
    for test in run.results:
        failure, line = failed.get(test.id), max(test.line - 1, 0)
        out.append(
            RecordedRun(
                path=test.path,
                first=line,
                last=line,
                code=test.id,
                origin=TESTED,
                status=test.outcome,
                started=now - test.duration,
                duration=test.duration,
                error=failure.message if failure is not None else None,
            )
        )
    return out


def summary(run: TestRun, seconds: float) -> str:
    """`3 passed, 1 failed, 1 skipped in 0.52 s`."""
    counts: dict[str, int] = {}
    for result in run.results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    order = ("passed", "failed", "error", "hung", "skipped", "xfailed", "xpassed")
    said = ", ".join(f"{counts[o]} {o}" for o in order if counts.get(o))
    return f"{said or 'no tests ran'} in {seconds:.2f} s"


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _column(place: Place) -> int:
    """The column (from 1) of the first character of the line's code."""
    try:
        with place.path.open(encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if number == place.line:
                    return len(line) - len(line.lstrip()) + 1
    except OSError:
        pass
    return 1


def text_lines(failure: Failure, root: Path) -> list[str]:
    """Compiler-style lines: the failure at its test line, pytest's detail, where it raised."""
    test = failure.test
    name = test.id.rsplit("::", 1)[-1]
    at = f"{_shown(failure.at.path, root)}:{failure.at.line}:{_column(failure.at)}"
    lines = [f"{at}: error: {name} {test.outcome}: {failure.message}"]
    lines += [f"{at}: note: {line.rstrip()}" for line in failure.detail[:8]]
    if failure.raised is not None:
        raised = failure.raised
        where = f"{_shown(raised.path, root)}:{raised.line}:{_column(raised)}"
        lines.append(f"{where}: note: raised here (in {failure.raised.name}), called by {name}")
    return lines


def github(found: Sequence[Failure], root: Path) -> list[str]:
    """GitHub Actions annotations: each failure on its test line (and where it raised)."""
    out = []
    for f in found:
        body = "\n".join([f.message, *f.detail]).replace("%", "%25").replace("\n", "%0A")
        name = f.test.id.rsplit("::", 1)[-1]
        out.append(
            f"::error file={_shown(f.at.path, root)},line={f.at.line},"
            f"title=runfix%3A {name} {f.test.outcome}::{body}"
        )
    return out


def as_json(run: TestRun, found: Sequence[Failure], root: Path, seconds: float) -> dict[str, Any]:
    failing = {f.test.id: f for f in found}

    def one(test: TestResult) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": test.id,
            "outcome": test.outcome,
            "durationMs": round(test.duration * 1000, 1),
            "file": _shown(Path(test.path), root),
            "line": test.line,
        }
        f = failing.get(test.id)
        if f is not None:
            item["message"] = f.message
            item["detail"] = f.detail
            item["at"] = {"file": _shown(f.at.path, root), "line": f.at.line}
            if f.raised is not None:
                item["raised"] = {"file": _shown(f.raised.path, root), "line": f.raised.line}
            item["values"] = f.values
        return item

    return {
        "tests": [one(t) for t in run.results],
        "summary": summary(run, seconds),
        "exit": run.exit,
        "stopped": run.stopped,
    }


def sarif(found: Sequence[Failure], root: Path) -> dict[str, Any]:
    """A SARIF 2.1.0 log: one result per failing test, at its test line."""
    results = []
    for f in found:
        location = {
            "physicalLocation": {
                "artifactLocation": {"uri": _shown(f.at.path, root), "uriBaseId": "SRCROOT"},
                "region": {"startLine": f.at.line},
            }
        }
        results.append(
            {
                "ruleId": "test-failed",
                "level": "error",
                "message": {"text": f"{f.test.id}: {f.message}"},
                "locations": [location],
                "properties": {"detail": f.detail},
            }
        )
    rule = {"id": "test-failed", "shortDescription": {"text": "A test of the project failed."}}
    tool = {"driver": {"name": "runfix", "version": __version__, "rules": [rule]}}
    run = {
        "tool": tool,
        "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render(kind: str, run: TestRun, root: Path, seconds: float) -> str:
    found = failures(run)
    if kind == "github":
        return "\n".join(github(found, root))
    if kind == "sarif":
        return json.dumps(sarif(found, root), indent=1, ensure_ascii=False)
    return json.dumps(as_json(run, found, root, seconds), indent=1, ensure_ascii=False)
