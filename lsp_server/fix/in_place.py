"""A module file's text with a fix's candidate in place, and whether it compiles: what both
of the fix loop's ports put into the module before its test runs (the kernel's, `ports`;
the project's tests', `tests_ports`). Below the loop: a port calls down into it, never back
into the loop's own module."""

from __future__ import annotations

from collections.abc import Sequence

from executor.events import Error, RunOutcome, RunStatus


def module_with(
    path: str, lines: Sequence[str], first: int, last: int, candidate: str
) -> tuple[str, RunOutcome | None]:
    """The text of the module file `path` (its `lines`) with `candidate` in place of lines
    first..last, and the error a run of it comes to when it does not compile (None: it
    does)."""
    rows = candidate.splitlines(keepends=True)
    if rows and not rows[-1].endswith("\n"):
        rows[-1] += "\n"
    text = "".join([*lines[:first], *rows, *lines[last + 1 :]])
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # (ValueError: a NUL in the text)
        said = str(getattr(exc, "msg", exc))
        error = Error(type(exc).__name__, said, (), f"{type(exc).__name__}: {exc}")
        return text, RunOutcome(RunStatus.ERROR, (error,), 0.0)
    return text, None
