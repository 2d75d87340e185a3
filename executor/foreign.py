"""Runs in another language's kernel, placed on their lines. Without runfix's helper
(which is Python) a kernel says nothing of which statement printed what: a value is the
last expression's, so it goes on the piece's last line of code (its colour codes
dropped; IRkernel shows values as displays, so R's go there too); what was printed goes
on the first line that prints by the language's own words (`print(`/`cat(` in R, `echo`/
`printf` in a shell, `console.log(` in TypeScript), else on the piece's first line.
Errors read as the language writes them: R's `Error in f(): …` without IRkernel's `ERROR`
and `eval(expr, envir, enclos)`, a failing shell command (bash_kernel's `ename` is empty,
its `evalue` the exit status) as its exit status.

Where an error was raised: R keeps the source line of each call a function made (`# at
line N of file <text>`, counted in the code it was given); R code is sent after as many
blank lines as the document has above it (`sent`), so those are the document's lines,
for a function a cell above defined too. They become the error's frames, as Python's
are, the outermost call found on the piece's lines by its text. Deno's traces name
`<anonymous>:LINE:COLUMN`, but of the code as Deno rewrote it (blank lines dropped,
declarations moved): not the document's lines, so they are not used."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import replace

from executor.events import (
    Display,
    Error,
    Event,
    Frame,
    RunOutcome,
    Span,
    Stream,
    Value,
    Variable,
)

_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SHELLS = ("bash", "sh", "shell", "zsh")
_R_ERROR = re.compile(r"Error(?: in (.*?))?: (.*)", re.S)
_R_CALL = re.compile(r"^\d+\. (.*?)(?:\s+# at line (\d+) of file <text>)?\s*$", re.M)
_R_NAME = re.compile(r"^([A-Za-z.][\w.]*|`[^`]+`)\s*\(")
_R_TEXTUAL = ("text/html", "text/markdown", "text/latex")
_PRINTS = {
    "r": re.compile(r"\s*(print|cat|message|writeLines|str|summary)\s*\("),
    "shell": re.compile(r"\s*(echo|printf|cat)\b"),
    "javascript": re.compile(r"\s*console\.(log|info|warn|error|table)\s*\("),
    "julia": re.compile(r"\s*(println|print|show|display|@show)\b"),
    "lua": re.compile(r"\s*(print|io\.write)\s*\("),
}
"""The statements that print, by language: what a piece printed goes on the first."""
_KIN = {"typescript": "javascript", **{name: "shell" for name in _SHELLS}}


def sent(code: str, language: str, first_line: int) -> str:
    """The code as a kernel of `language` gets it: R's after the document's lines above it
    as blank lines (R's source lines are then the document's; it shows nothing more)."""
    return "\n" * (first_line - 1) + code if language.lower() == "r" else code


def placed(
    outcome: RunOutcome,
    language: str,
    code: str,
    first_line: int,
    filename: str,
    ran: Mapping[int, str] | None = None,
) -> RunOutcome:
    """`outcome` of `code` (its first line is the document's `first_line`, 1-based; the
    document is `filename`) from a kernel of `language` (its kernelspec's), its value on
    the last line of code. `ran`: what the document's runs in this kernel put on each of
    its lines (1-based), this one's included."""
    if ran is None:
        ran = {first_line + i: row for i, row in enumerate(code.splitlines())}
    rows = code.splitlines()
    last = next((i for i in range(len(rows) - 1, -1, -1) if rows[i].strip()), 0)
    at_last = Span(first_line + last, first_line + last)
    language = language.lower()
    prints = _PRINTS.get(_KIN.get(language, language))
    printing = next((i for i, row in enumerate(rows) if prints and prints.match(row)), None)
    events: list[Event] = []
    for event in outcome.events:
        if isinstance(event, Stream) and event.span is None and printing is not None:
            event = replace(event, span=Span(first_line + printing, first_line + printing))
        if isinstance(event, (Value, Display)) and "text/plain" in event.data:
            plain = _ESCAPES.sub("", event.data["text/plain"])  # Deno colours its values
            event = replace(event, data={**event.data, "text/plain": plain})
        if language == "r" and isinstance(event, Display):
            event = replace(event, data=_r_shown(event.data))
        shown = isinstance(event, Value) or (isinstance(event, Display) and language == "r")
        if shown and event.span is None:
            event = replace(event, span=at_last)
        elif isinstance(event, Error):
            event = _read(event, language, rows, first_line, filename, ran)
        events.append(event)
    return replace(outcome, events=tuple(events))


def _r_shown(data: Mapping[str, str]) -> Mapping[str, str]:
    """IRkernel sends every value as HTML, Markdown and LaTeX too (`20` for `[1] 20`): those
    are kept where they hold a table (a data frame); else the value is its text."""
    if "text/plain" not in data or "<table" in data.get("text/html", ""):
        return data
    return {k: v for k, v in data.items() if k not in _R_TEXTUAL}


def _read(
    error: Error,
    language: str,
    rows: list[str],
    first_line: int,
    filename: str,
    ran: Mapping[int, str],
) -> Error:
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
    return replace(error, frames=_r_frames(error.text, rows, first_line, filename, ran))


def _r_frames(
    text: str, rows: list[str], first_line: int, filename: str, ran: Mapping[int, str]
) -> tuple[Frame, ...]:
    """R's traceback (`1. g(3)`, `2. half(k)   # at line 6 of file <text>`, …) as frames
    in the document, outermost first: the first call on the piece's line that holds it,
    each next one on the source line R kept (in the function the call before it called),
    while `ran` (what this document's runs in this kernel put on each line) shows that
    call there: R names no file, so a function another document defined ends them. None
    when the outermost call is not found on the piece's lines."""
    calls = [(call, int(line) if line else None) for call, line in _R_CALL.findall(text)]
    if not calls:
        return ()
    found = next((i for i, row in enumerate(rows) if _calls(row, calls[0][0])), None)
    if found is None:
        return ()
    frames = [Frame(filename, first_line + found, "<module>")]
    for (caller, _), (call, line) in itertools.pairwise(calls):
        if line is None or not _calls(ran.get(line, ""), call):
            break  # no source kept (a package's function), or of another document's code
        name = _R_NAME.match(caller)
        frames.append(Frame(filename, line, name.group(1) if name else caller))
    return tuple(frames)


def _calls(row: str, call: str) -> bool:
    """Whether a line of R code holds `call` (as R prints it: `stop("a", n)`): the whole
    call, or the function it calls where the call goes on over more lines."""
    line = _squeezed(row)
    name = _R_NAME.match(call)
    return bool(line) and (
        _squeezed(call) in line or (name is not None and f"{name.group(1)}(" in line)
    )


def _squeezed(text: str) -> str:
    """Code without its spaces, its quotes as R prints them (`stop('a')` → `stop("a")`)."""
    return re.sub(r"\s+", "", text).replace("'", '"')


R_VARIABLES = r"""local({
  e <- globalenv()
  for (n in ls(e)) {
    if (bindingIsActive(n, e)) { cat(n, "active binding", "", "", "", "", "\n", sep = "\t"); next }
    v <- get(n, envir = e)
    u <- unclass(v)
    k <- class(v)[1]
    d <- paste(attr(v, "dim", exact = TRUE), collapse = " ")
    l <- length(u)
    s <- ""
    cols <- ""
    if (is.data.frame(v)) {
      d <- paste(.row_names_info(v, 2L), l)
      cols <- paste(names(u), vapply(u, function(c) class(c)[1], ""), sep = "=", collapse = "\x1f")
    } else if (is.atomic(v) && is.null(attributes(v)) && l <= 5) {
      s <- substr(paste(if (is.character(v)) encodeString(v, quote = '"') else format(v),
        collapse = " "), 1, 80)
    }
    cat(n, k, d, l, gsub("[\t\n]", " ", s), cols, "\n", sep = "\t")
  }
})
"""
"""R's variables, listed by R without running any of the user's code: an active binding is
not read; `unclass` before `length` and no `format` of a classed value, so no S3 method of
theirs runs; a line per name, tab-separated (name, class, dims, length, summary, columns)."""


def r_variables(outcome: RunOutcome) -> list[Variable]:
    """The variables `R_VARIABLES` printed."""
    printed = "".join(e.text for e in outcome.events if isinstance(e, Stream))
    found: list[Variable] = []
    for row in printed.splitlines():
        cells = row.split("\t")
        if len(cells) < 6:
            continue
        name, kind, dims, length, summary, columns = cells[:6]
        shape = tuple(int(d) for d in dims.split() if d.isdigit()) or None
        pairs = (c.partition("=") for c in columns.split("\x1f") if c)
        found.append(
            Variable(
                name=name,
                type=kind,
                summary=summary.strip(),
                shape=shape,
                length=int(length) if length.isdigit() and shape is None else None,
                columns={c: t for c, _, t in pairs},
            )
        )
    return found
