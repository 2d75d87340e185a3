"""Pure conversions: runfix results → lsprotocol types. No I/O, no server."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from lsp_server.contract import SOURCE, BadArguments, ProblemData, structure, to_json
from lsp_server.outputs.results import DocumentResults, Front, Problem, StatementResult
from lsp_server.text.positions import Width, content_span, strip_eol, utf16_len

HOVER_LIMIT = 100_000


def _line(lines: Sequence[str], index: int) -> str:
    return strip_eol(lines[index]) if 0 <= index < len(lines) else ""


def line_range(
    lines: Sequence[str], first: int, last: int | None = None, width: Width = utf16_len
) -> lsp.Range:
    """From the first non-blank character of `first` to the end of `last`."""
    last = first if last is None else last
    start, _ = content_span(_line(lines, first), width)
    return lsp.Range(lsp.Position(first, start), lsp.Position(last, width(_line(lines, last))))


def problem_range(lines: Sequence[str], problem: Problem, width: Width = utf16_len) -> lsp.Range:
    if problem.column is None:
        return line_range(lines, problem.first, problem.last, width)
    text = _line(lines, problem.first)
    column = min(problem.column, len(text))
    end_column = len(text) if problem.end_column is None else min(problem.end_column, len(text))
    if end_column <= column:  # point at one character, or at the end of the line
        end_column = min(column + 1, len(text))
    return lsp.Range(
        lsp.Position(problem.first, width(text[:column])),
        lsp.Position(problem.first, width(text[:end_column])),
    )


def _problem_diagnostic(
    uri: str, lines: Sequence[str], problem: Problem, width: Width, stale: Front | None = None
) -> lsp.Diagnostic:
    related = [
        lsp.DiagnosticRelatedInformation(
            location=lsp.Location(
                uri=uri if r.path is None else _file_uri(r.path),
                range=line_range(lines, r.line, width=width)
                if r.path is None
                else lsp.Range(lsp.Position(r.line, 0), lsp.Position(r.line, 0)),
            ),
            message=r.name,
        )
        for r in problem.related
    ]
    return lsp.Diagnostic(
        range=problem_range(lines, problem, width),
        message=problem.message + (f" (stale: {stale.reason})" if stale else ""),
        tags=[lsp.DiagnosticTag.Unnecessary] if stale else None,
        severity=lsp.DiagnosticSeverity.Error
        if problem.severity == "error"
        else lsp.DiagnosticSeverity.Warning,
        source=SOURCE,
        code=problem_code(problem),
        related_information=related or None,
        data=problem_data(problem),
    )


def problem_code(problem: Problem) -> str | None:
    """The exception's name (`NameError`), or `safety` for a scan finding."""
    if problem.kind in ("safety", "trust"):
        return problem.kind
    name = problem.message.split(":", 1)[0]
    return name if name.isidentifier() else None


def problem_data(problem: Problem) -> Any:
    """What code actions need to rebuild a fix from the diagnostic alone."""
    return to_json(ProblemData(problem.kind, problem.message, problem.piece))


def data_of(diagnostic: lsp.Diagnostic) -> ProblemData | None:
    """What `problem_data` put on a runfix diagnostic, as a code action gets it back (None:
    not runfix's, or data a client changed)."""
    if diagnostic.source != SOURCE:
        return None
    try:
        return structure(diagnostic.data, ProblemData)
    except BadArguments:
        return None


def result_diagnostics_json(
    lines: Sequence[str], results: DocumentResults, width: Width = utf16_len
) -> list[dict[str, Any]]:
    """The statements' results as diagnostics (`results: "diagnostics"`): Information at the
    end of each statement's last line, faded when stale. Made as JSON, not lsprotocol objects
    (~20 µs each to make and convert): a document can have ten thousand, published after
    every edit that moves them."""
    out = []
    fronts = results.fronts
    for first, line, result in results.placed():
        summary = result.summary
        if not summary:
            continue
        text = _line(lines, line)
        start, _ = content_span(text, width)
        item: dict[str, Any] = {
            "range": {
                "start": {"line": line, "character": start},
                "end": {"line": line, "character": width(text)},
            },
            "message": f"→ {summary}",
            "severity": INFORMATION,
            "source": SOURCE,
        }
        stale = results.stale_at(first, result.made) if fronts else None
        if stale is not None:  # shown faded: from before a change above it
            item["message"] += f" (stale: {stale.reason})"
            item["tags"] = [UNNECESSARY]
        out.append(item)
    return out


INFORMATION = lsp.DiagnosticSeverity.Information.value
UNNECESSARY = lsp.DiagnosticTag.Unnecessary.value
STALE = "*stale: {reason}; run it again for a result of the code as it is now*"


def diagnostics(
    uri: str, lines: Sequence[str], results: DocumentResults, *, width: Width = utf16_len
) -> list[lsp.Diagnostic]:
    """The problems' diagnostics (errors, warnings, safety and trust findings); the
    statements' results are `result_diagnostics_json`."""
    fronts = results.fronts
    return [
        _problem_diagnostic(
            uri, lines, p, width, results.stale(p) if fronts and p.kind == "run" else None
        )
        for p in results.problems
    ]


def inlay_hints(
    lines: Sequence[str],
    results: DocumentResults,
    width: Width = utf16_len,
    *,
    resolve_uri: str | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """The inlay hints of a document as JSON, with their lines: one at the end of each
    statement that produced something. With `resolve_uri`, the tooltip (the whole
    output, which can be long) is left for `inlayHint/resolve`: `data` says where."""
    hints = []
    for result in results.statements:
        if not result.summary:
            continue
        stale = results.stale(result) if results.fronts else None
        hint: dict[str, Any] = {
            "position": {"line": result.last, "character": width(_line(lines, result.last))},
            "label": f"→ {result.summary}" + (" (stale)" if stale else ""),
            "paddingLeft": True,
        }
        if resolve_uri is None:
            hint["tooltip"] = inlay_tooltip(result, stale)
        else:
            hint["data"] = {"uri": resolve_uri, "line": result.last}
        hints.append((result.last, hint))
    return hints


def inlay_tooltip(result: StatementResult, stale: Front | None = None) -> dict[str, str]:
    """The whole output of a statement, as the markdown an inlay hint's tooltip holds."""
    value = _output_markdown(result)
    if stale is not None:
        value = STALE.format(reason=stale.reason) + "\n\n" + value
    return {"kind": "markdown", "value": value}


def tooltip_at(results: DocumentResults, line: int) -> dict[str, str] | None:
    """The tooltip of the hint at the end of `line`, if a statement with output ends there."""
    result = results.statement_at(line)
    if result is None or result.last != line or not result.summary:
        return None
    return inlay_tooltip(result, results.stale(result))


def _fence(text: str) -> str:
    """A code block no line of `text` can close: its fence is longer than any run of backticks."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


def _output_markdown(result: StatementResult) -> str:
    """The statement's outputs in order: text in code blocks, images shown, a DataFrame as a
    table of its first rows, displayed markdown as itself, other rich forms by their file."""
    parts: list[str] = []
    text: list[str] = []
    budget = HOVER_LIMIT

    def flush_text() -> None:
        nonlocal budget
        joined = "".join(text)
        text.clear()
        if len(joined) > budget:
            joined = joined[:budget] + "\n…"
        budget = max(0, budget - len(joined))
        if joined.strip():
            parts.append(_fence(joined))

    for output in result.outputs:
        if output.kind == "text":
            text.append(output.text)
            continue
        flush_text()
        if output.table is not None:
            parts.append(output.table)
        elif output.image is not None:
            parts.append(f"![{output.text.strip()}]({output.image.as_uri()})")
        elif output.markdown is not None:
            parts.append(output.markdown)
        else:
            where = (
                f" ([{output.file.suffix[1:]} file]({output.file.as_uri()}))" if output.file else ""
            )
            parts.append(f"`{output.text.strip()}`{where}")
    flush_text()
    if result.truncated:
        parts.append(f"*Output truncated: {result.truncated:,} characters dropped.*")
    return "\n\n".join(parts)


def hover(
    lines: Sequence[str], results: DocumentResults, line: int, width: Width = utf16_len
) -> lsp.Hover | None:
    parts = []
    problem = results.problem_at(line)
    if problem is not None:
        if problem.kind == "run" and (stale := results.stale(problem)) is not None:
            parts.append(STALE.format(reason=stale.reason))
        parts.append(f"**{problem.message}**")
        if problem.text and problem.text.strip() != problem.message:
            parts.append(_fence(problem.text))
    statement = results.statement_at(line)
    if statement is not None:
        if (stale := results.stale(statement)) is not None:
            parts.append(STALE.format(reason=stale.reason))
        parts.append(_output_markdown(statement))
    if not parts:
        return None
    ran = (statement.ran if statement is not None else "") or (problem.ran if problem else "")
    if ran:
        parts.append(f"*ran {ran}*")
    first = min(x.first for x in (problem, statement) if x is not None)
    last = max(x.last for x in (problem, statement) if x is not None)
    return lsp.Hover(
        contents=lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n".join(parts)),
        range=line_range(lines, first, last, width),
    )


def _file_uri(path: str) -> str:
    return Path(path).as_uri()
