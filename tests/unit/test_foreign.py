"""Issue 38: another language's run, placed on its lines without runfix's helper."""

from __future__ import annotations

from executor.events import Display, Error, Frame, RunOutcome, RunStatus, Span, Stream, Value
from executor.foreign import placed, sent

DOC = "/work/doc"


def _outcome(*events: object) -> RunOutcome:
    return RunOutcome(RunStatus.OK, tuple(events), 0.1)  # type: ignore[arg-type]


def test_a_value_goes_on_the_last_line_of_code_without_its_colours() -> None:
    code = "const n = 6;\nn * 7\n\n"
    ran = placed(
        _outcome(Value({"text/plain": "\x1b[33m42\x1b[39m"}, None)), "typescript", code, 10, DOC
    )
    [value] = ran.events
    assert isinstance(value, Value) and value.span == Span(11, 11)
    assert value.data["text/plain"] == "42"


def test_an_error_of_deno_stays_on_the_piece_its_lines_are_not_the_document_s() -> None:
    """Deno's `<anonymous>:L:C` counts the code as Deno rewrote it (here the throw is on
    line 2 and Deno says 3): it is not used."""
    trace = "Error: boom\n    at f (<anonymous>:3:9)\n    at <anonymous>:5:1"
    ran = placed(_outcome(Error("Error", "boom", (), trace)), "typescript", "a\nb\nc\n", 5, DOC)
    [error] = ran.events
    assert isinstance(error, Error) and error.span is None and error.message == "Error: boom"


def test_a_failing_shell_command_says_its_exit_status() -> None:
    ran = placed(
        _outcome(Stream("stdout", "x\n", None), Error("", "1", (), "")), "bash", "false\n", 1, DOC
    )
    error = ran.events[1]
    assert isinstance(error, Error) and error.message == "command failed: exit status 1"
    assert ran.events[0] == Stream("stdout", "x\n", None)  # what it printed: as it came


def test_an_r_value_shown_as_a_display_goes_on_the_last_line() -> None:
    """IRkernel shows `x * 5` as `display_data` (`text/plain` `[1] 20`), not a result."""
    shown = Display({"text/plain": "[1] 20", "text/html": "20"}, None)
    ran = placed(_outcome(Stream("stdout", "a\n", None), shown), "R", "x <- 4\nx * 5\n", 3, DOC)
    assert ran.events[0] == Stream("stdout", "a\n", None)
    assert isinstance(ran.events[1], Display) and ran.events[1].span == Span(4, 4)
    assert ran.events[1].data == {"text/plain": "[1] 20"}  # its text, not `20` as HTML
    table = {"text/plain": "  a\n1 1", "text/html": "<table><tr><td>1</td></tr></table>"}
    [frame] = placed(_outcome(Display(table, None)), "R", "head(d)\n", 1, DOC).events
    assert isinstance(frame, Display) and frame.data == table  # a data frame stays rich


def test_an_r_error_reads_as_r_writes_it_on_the_call_that_raised() -> None:
    top = Error("ERROR", "Error in eval(expr, envir, enclos): boom\n", (), '1. stop("boom")')
    [error] = placed(_outcome(top), "R", "x <- 1\nstop('boom')\n", 7, DOC).events
    assert isinstance(error, Error) and error.message == "Error: boom"
    assert error.frames == (Frame(DOC, 8, "<module>"),)  # its line, found by its text


def test_r_code_is_sent_on_the_document_s_lines_so_r_s_source_lines_are_its_own() -> None:
    assert sent("f()\n", "R", 4) == "\n\n\nf()\n"
    assert sent("echo hi\n", "bash", 4) == "echo hi\n"  # other languages: as it is


def test_an_r_error_in_a_function_of_a_cell_above_has_its_frames_there() -> None:
    """R's `# at line N of file <text>` counts the code sent, which starts on the
    document's line (`sent`): line 4 here, in a cell that ran before this one."""
    trace = (
        "Error in half(k): not yet: 3\nTraceback:\n\n1. g(3)\n"
        "2. half(k)   # at line 6 of file <text>\n"
        '3. stop("not yet: ", m)   # at line 4 of file <text>'
    )
    error = Error("ERROR", "Error in half(k): not yet: 3\n", (), trace)
    above = "half <- function(n) {\n  m <- n\n  stop('not yet: ', m)\n}\ng <- function(k) half(k)\n"
    ran = {2 + i: row for i, row in enumerate(above.splitlines())}
    ran[9] = "g(3)"
    [read] = placed(_outcome(error), "R", "g(3)\n", 9, DOC, ran).events
    assert isinstance(read, Error) and read.message == "Error in half(k): not yet: 3"
    assert read.frames == (Frame(DOC, 9, "<module>"), Frame(DOC, 6, "g"), Frame(DOC, 4, "half"))
    # Defined by another document's run: its lines here hold other code, so the frames end.
    elsewhere = {9: "g(3)", 6: "z <- 2", 4: "w <- 3"}
    [read] = placed(_outcome(error), "R", "g(3)\n", 9, DOC, elsewhere).events
    assert isinstance(read, Error) and read.frames == (Frame(DOC, 9, "<module>"),)


def test_what_was_printed_goes_on_the_first_line_that_prints_by_the_language_s_words() -> None:
    """Issue 46: R's `print(`, a shell's `echo`, Deno's `console.log(`; with none, the
    piece's first line (the kernel does not say which statement printed)."""
    printed = _outcome(Stream("stdout", "hi\n", None))
    cases = [
        ("r", "x <- 4\nprint(x)\n", Span(11, 11)),
        ("bash", "name=a\n  echo $name\n", Span(11, 11)),
        ("typescript", "const a = 1;\nconsole.log(a);\n", Span(11, 11)),
        ("r", "x <- 4\nx\n", None),  # nothing prints by name: left to the piece's first line
        ("bash", "name=a\nprintfoo\n", None),  # a word that only starts like one
    ]
    for language, code, span in cases:
        [stream] = placed(printed, language, code, 10, DOC).events
        assert isinstance(stream, Stream) and stream.span == span, (language, code)
