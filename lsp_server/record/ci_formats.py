"""`runfix run --format github|sarif|json`: a run's errors as a CI system reads them.

- github: workflow commands (`::error file=…,line=…,col=…,title=…::message`), which
  GitHub Actions turns into annotations on the lines;
- sarif: a SARIF 2.1.0 log (code scanning, GitLab, Azure DevOps and most CI
  dashboards read it): one result per error or warning, with its location;
- json: everything the run showed — results and problems — as one object.

The text format (`path:line:col: error: …`) stays the default.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_server import __version__
from lsp_server.outputs.results import DocumentResults, Problem

FORMATS = ("text", "github", "sarif", "json")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_RULES = {
    "run": ("run-error", "The code raised an exception when it ran."),
    "safety": ("model-code-flagged", "Model-written code does something risky."),
}


def _column(problem: Problem, lines: Sequence[str]) -> int:
    if problem.column is not None:
        return problem.column + 1
    text = lines[problem.first] if 0 <= problem.first < len(lines) else ""
    return len(text) - len(text.lstrip()) + 1


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(shown: str, lines: Sequence[str], results: DocumentResults) -> list[str]:
    """GitHub Actions workflow commands, one per problem."""
    out = []
    for p in sorted(results.problems, key=lambda p: p.first):
        kind = "error" if p.severity == "error" else "warning"
        where = (
            f"file={_escape_property(shown)},line={p.first + 1},endLine={p.last + 1},"
            f"col={_column(p, lines)},title={_escape_property('runfix: ' + p.message)}"
        )
        body = p.text.strip() if p.text.strip() else p.message
        out.append(f"::{kind} {where}::{_escape_data(body)}")
    return out


def as_json(shown: str, lines: Sequence[str], results: DocumentResults) -> dict[str, Any]:
    return {
        "file": shown,
        "results": [
            {"line": s.first + 1, "lastLine": s.last + 1, "summary": s.summary, "text": s.text}
            for s in results.statements
        ],
        "problems": [
            {
                "line": p.first + 1,
                "lastLine": p.last + 1,
                "column": _column(p, lines),
                "severity": p.severity,
                "kind": p.kind,
                "message": p.message,
                "text": p.text,
            }
            for p in results.problems
        ],
    }


def sarif(shown: str, lines: Sequence[str], results: DocumentResults, root: Path) -> dict[str, Any]:
    """A SARIF 2.1.0 log with one run: runfix's results for one file."""
    path = Path(shown).resolve()
    uri = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_uri()
    found = []
    for p in sorted(results.problems, key=lambda p: p.first):
        rule = _RULES.get(p.kind, _RULES["run"])[0]
        region: dict[str, Any] = {"startLine": p.first + 1, "startColumn": _column(p, lines)}
        if p.last != p.first:
            region["endLine"] = p.last + 1
        result: dict[str, Any] = {
            "ruleId": rule,
            "level": "error" if p.severity == "error" else "warning",
            "message": {"text": p.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri, "uriBaseId": "SRCROOT"},
                        "region": region,
                    }
                }
            ],
        }
        if p.text.strip():
            result["properties"] = {"traceback": p.text}
        found.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "runfix",
                        "version": __version__,
                        "rules": [
                            {"id": rule, "shortDescription": {"text": text}}
                            for rule, text in _RULES.values()
                        ],
                    }
                },
                "originalUriBaseIds": {"SRCROOT": {"uri": root.as_uri() + "/"}},
                "results": found,
            }
        ],
    }


def render(
    kind: str, shown: str, lines: Sequence[str], results: DocumentResults, root: Path
) -> str:
    """The whole report in `kind` (github, sarif or json)."""
    if kind == "github":
        return "\n".join(github(shown, lines, results))
    if kind == "sarif":
        return json.dumps(sarif(shown, lines, results, root), indent=1, ensure_ascii=False)
    return json.dumps(as_json(shown, lines, results), indent=1, ensure_ascii=False)
