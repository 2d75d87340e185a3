"""Runs in another language's kernel, placed on their lines. Without runfix's helper
(which is Python) a kernel says nothing of which statement printed what: a value is the
last expression's, so it goes on the piece's last line of code (its colour codes
dropped); what was printed and an error go on the piece's first line. Deno's traces name
`<anonymous>:LINE:COLUMN`, but of the code as Deno rewrote it (blank lines dropped,
declarations moved): not the document's lines, so they are not used. A failing shell
command (bash_kernel's `ename` is empty, its `evalue` the exit status) says so."""

from __future__ import annotations

import re
from dataclasses import replace

from executor.events import Display, Error, Event, RunOutcome, Span, Value

_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SHELLS = ("bash", "sh", "shell", "zsh")


def placed(outcome: RunOutcome, language: str, code: str, first_line: int) -> RunOutcome:
    """`outcome` of `code` (its first line is the document's `first_line`, 1-based) from a
    kernel of `language` (its kernelspec's), its value on the last line of code."""
    rows = code.splitlines()
    last = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].strip()), 0)
    at_last = Span(first_line + last, first_line + last)
    shell = language.lower() in _SHELLS
    events: list[Event] = []
    for event in outcome.events:
        if isinstance(event, (Value, Display)) and "text/plain" in event.data:
            plain = _ESCAPES.sub("", event.data["text/plain"])  # Deno colours its values
            event = replace(event, data={**event.data, "text/plain": plain})
        if isinstance(event, Value) and event.span is None:
            event = replace(event, span=at_last)
        elif isinstance(event, Error) and shell and not event.ename.strip():
            status = event.evalue.strip()
            event = replace(event, ename="command failed", evalue=f"exit status {status}")
        events.append(event)
    return replace(outcome, events=tuple(events))
