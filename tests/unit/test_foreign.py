"""Issue 38: another language's run, placed on its lines without runfix's helper."""

from __future__ import annotations

from executor.events import Error, RunOutcome, RunStatus, Span, Stream, Value
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
