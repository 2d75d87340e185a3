"""A notebook's saved error as IPython writes it (issue 70, 6): Jupyter opens a notebook's
traceback as a list of ANSI-coloured entries, each frame named by the run that compiled
it — `Cell In[2], line 2` — with its lines numbered from that run's first, and the call as
`in f(x)`. runfix's kernel side says, per frame, the run's execution count, the line within
it, the call and its lines (`executor.events.Frame`); this writes them in IPython 9's
layout and colours. What differs from IPython's own: the code is not syntax-coloured, and
a few lines before the frame's are shown, not IPython's whole piece."""

from __future__ import annotations

from executor.events import Error, Frame

WIDTH = 75
"""IPython's traceback width (its rule and its header line)."""
NUMBERS = 7
"""The width of a line's number, its arrow included (`----> 2`)."""
RED, GREEN, CYAN, BLUE, END = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[34m", "\x1b[39m"
HEADING = "Traceback (most recent call last)"
SHOWN_REPEATS = 10
"""A frame repeated more often (recursion) is shown twice, a line for the rest, once more."""


def ipython_traceback(error: Error) -> list[str] | None:
    """The error as IPython's saved `traceback` list; None where no frame is a run's code
    (a syntax error, a magic's error, an older kernel side): Python's text is kept then."""
    if not any(f.ran_as is not None for f in error.frames):
        return None
    pad = " " * max(WIDTH - len(error.ename) - len(HEADING), 1)
    out = [f"{RED}{'-' * WIDTH}{END}", f"{RED}{error.ename}{END}{pad}{HEADING}"]
    for frame in error.frames:
        shown = _frame(frame)
        times = 1 + frame.repeats
        if times <= SHOWN_REPEATS:
            out += [shown] * times
            continue
        at = frame.ran_as[1] if frame.ran_as else frame.line
        skipped = f"{frame.call.partition('(')[0] or frame.name} at line {at} ({times - 3} times)"
        out += [shown, shown, f"    {RED}[... skipping similar frames: {skipped}]{END}\n", shown]
    out.append(f"{RED}{error.ename}{END}: {error.evalue}" if error.evalue else error.ename)
    return out


def _frame(frame: Frame) -> str:
    if frame.filename == "..." and frame.line == 0:  # the kernel side's cut of a deep one
        return f"    {RED}[... skipping similar frames: {frame.name}]{END}\n"
    if frame.ran_as is not None:
        count, line = frame.ran_as
        head = f"{CYAN}Cell{END}{CYAN} {END}{GREEN}In[{count}]{END}{GREEN}, line {line}{END}"
    else:
        line = frame.line
        head = f"{CYAN}File {END}{GREEN}{frame.filename}:{line}{END}"
    if frame.call:
        name, _, args = frame.call.partition("(")
        head += f", in {CYAN}{name}{END}{BLUE}({args}{END}"
    rows = [head]
    first = line - len(frame.context) + 1
    for number, text in enumerate(frame.context, first):
        code = text.rstrip("\r\n")
        if number == line:
            arrow = "-" * (NUMBERS - len(str(number)) - 2) + "> "
            rows.append(f"{GREEN}{arrow}{END}{GREEN}{number}{END} {code}")
        else:
            rows.append(f"{GREEN}{number:>{NUMBERS}}{END} {code}")
    return "\n".join(rows) + "\n"
