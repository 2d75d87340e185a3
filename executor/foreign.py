"""Runs in another language's kernel, placed on their lines. Without runfix's helper
(which is Python) a kernel says nothing of which statement printed what: a value is the
last expression's, so it goes on the piece's last line of code (its colour codes
dropped; IRkernel shows values as displays, so R's go there too); what was printed and an
error go on the piece's first line, unless the error says where: R's traceback names the
source line of a function that raised (`# at line N of file <text>`). Deno's traces name
`<anonymous>:LINE:COLUMN`, but of the code as Deno rewrote it (blank lines dropped,
declarations moved): not the document's lines, so they are not used. Errors read as the
language writes them: R's `Error in f(): …` without IRkernel's `ERROR` and `eval(expr,
envir, enclos)`, a failing shell command (bash_kernel's `ename` is empty, its `evalue`
the exit status) as its exit status."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from executor.events import Display, Error, Event, RunOutcome, Span, Value

_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SHELLS = ("bash", "sh", "shell", "zsh")
_R_ERROR = re.compile(r"Error(?: in (.*?))?: (.*)", re.S)
_R_SOURCE = re.compile(r"# at line (\d+) of file <text>")
_R_TEXTUAL = ("text/html", "text/markdown", "text/latex")


def placed(outcome: RunOutcome, language: str, code: str, first_line: int) -> RunOutcome:
    """`outcome` of `code` (its first line is the document's `first_line`, 1-based) from a
    kernel of `language` (its kernelspec's), its value on the last line of code."""
    rows = code.splitlines()
    last = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].strip()), 0)
    at_last = Span(first_line + last, first_line + last)
    language = language.lower()
    events: list[Event] = []
    for event in outcome.events:
        if isinstance(event, (Value, Display)) and "text/plain" in event.data:
            plain = _ESCAPES.sub("", event.data["text/plain"])  # Deno colours its values
            event = replace(event, data={**event.data, "text/plain": plain})
        if language == "r" and isinstance(event, Display):
            event = replace(event, data=_r_shown(event.data))
        shown = isinstance(event, Value) or (isinstance(event, Display) and language == "r")
        if shown and event.span is None:
            event = replace(event, span=at_last)
        elif isinstance(event, Error):
            event = _read(event, language, first_line, len(rows))
        events.append(event)
    return replace(outcome, events=tuple(events))


def _r_shown(data: Mapping[str, str]) -> Mapping[str, str]:
    """IRkernel sends every value as HTML, Markdown and LaTeX too (`20` for `[1] 20`): those
    are kept where they hold a table (a data frame); else the value is its text."""
    if "text/plain" not in data or "<table" in data.get("text/html", ""):
        return data
    return {k: v for k, v in data.items() if k not in _R_TEXTUAL}


def _read(error: Error, language: str, first_line: int, height: int) -> Error:
    """An error as its language writes it, where it says it was raised."""
    if language in _SHELLS and not error.ename.strip():
        return replace(error, ename="command failed", evalue=f"exit status {error.evalue.strip()}")
    if language != "r":
        return error
    said = _R_ERROR.match(error.evalue.strip())
    if said is not None:
        where = said.group(1)
        ename = "Error" if not where or where.startswith("eval(") else f"Error in {where}"
        error = replace(error, ename=ename, evalue=said.group(2).strip())
    lines = [int(n) for n in _R_SOURCE.findall(error.text)]
    if lines and 1 <= lines[-1] <= height:
        line = first_line + lines[-1] - 1
        error = replace(error, span=Span(line, line))
    return error
