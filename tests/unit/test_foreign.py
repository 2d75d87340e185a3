"""Issue 38: another language's run, placed on its lines without runfix's helper."""

from __future__ import annotations

from executor.events import Display, Error, RunOutcome, RunStatus, Span, Stream, Value
from executor.foreign import placed


def _outcome(*events: object) -> RunOutcome:
    return RunOutcome(RunStatus.OK, tuple(events), 0.1)  # type: ignore[arg-type]


def test_a_value_goes_on_the_last_line_of_code_without_its_colours() -> None:
    code = "const n = 6;\nn * 7\n\n"
    ran = placed(
        _outcome(Value({"text/plain": "\x1b[33m42\x1b[39m"}, None)), "typescript", code, 10
    )
    [value] = ran.events
    assert isinstance(value, Value) and value.span == Span(11, 11)
    assert value.data["text/plain"] == "42"


def test_an_error_of_deno_stays_on_the_piece_its_lines_are_not_the_document_s() -> None:
    """Deno's `<anonymous>:L:C` counts the code as Deno rewrote it (here the throw is on
    line 2 and Deno says 3): it is not used."""
    trace = "Error: boom\n    at f (<anonymous>:3:9)\n    at <anonymous>:5:1"
    ran = placed(_outcome(Error("Error", "boom", (), trace)), "typescript", "a\nb\nc\n", 5)
    [error] = ran.events
    assert isinstance(error, Error) and error.span is None and error.message == "Error: boom"


def test_a_failing_shell_command_says_its_exit_status() -> None:
    ran = placed(
        _outcome(Stream("stdout", "x\n", None), Error("", "1", (), "")), "bash", "false\n", 1
    )
    error = ran.events[1]
    assert isinstance(error, Error) and error.message == "command failed: exit status 1"
    assert ran.events[0] == Stream("stdout", "x\n", None)  # what it printed: as it came


def test_an_r_value_shown_as_a_display_goes_on_the_last_line() -> None:
    """IRkernel shows `x * 5` as `display_data` (`text/plain` `[1] 20`), not a result."""
    shown = Display({"text/plain": "[1] 20", "text/html": "20"}, None)
    ran = placed(_outcome(Stream("stdout", "a\n", None), shown), "R", "x <- 4\nx * 5\n", 3)
    assert ran.events[0] == Stream("stdout", "a\n", None)
    assert isinstance(ran.events[1], Display) and ran.events[1].span == Span(4, 4)
    assert ran.events[1].data == {"text/plain": "[1] 20"}  # its text, not `20` as HTML
    table = {"text/plain": "  a\n1 1", "text/html": "<table><tr><td>1</td></tr></table>"}
    [frame] = placed(_outcome(Display(table, None)), "R", "head(d)\n", 1).events
    assert isinstance(frame, Display) and frame.data == table  # a data frame stays rich


def test_an_r_error_reads_as_r_writes_it_where_its_source_says() -> None:
    top = Error("ERROR", "Error in eval(expr, envir, enclos): boom\n", (), '1. stop("boom")')
    [error] = placed(_outcome(top), "R", "stop('boom')\n", 7).events
    assert isinstance(error, Error) and error.message == "Error: boom" and error.span is None
    trace = (
        'Error in f(): inner\nTraceback:\n\n1. f()\n2. stop("inner")   # at line 1 of file <text>'
    )
    inner = Error("ERROR", "Error in f(): inner\n", (), trace)
    code = "f <- function() stop('inner')\ny <- 1\nf()\n"
    [error] = placed(_outcome(inner), "R", code, 7).events
    assert isinstance(error, Error) and error.message == "Error in f(): inner"
    assert error.span == Span(7, 7)  # the line of the function that raised
