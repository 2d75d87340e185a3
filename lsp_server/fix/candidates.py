"""Several candidates for one fix, chosen by what they do (issue 69).

A weak model's single answer is right less often than the largest group of its sampled
answers that agree on what the fixed code prints (AlphaCode's clustering, MBR-exec, CodeT).
The candidates that ran clean, held by no rule, are grouped by what the code printed and
returned; the largest group wins when no other is as large, and of its members the one
that changes the fewest lines is offered. Clean candidates that disagree with no group
holding most are not "fixed": what each prints is said instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

from executor.events import RunOutcome
from lsp_server.fix.silencing import said

SAMPLED_TEMPERATURE = 0.8
"""How warm the sampled candidates are: at 0 the `n` answers are one answer n times (the
greedy one and the paste's stay at the request's own temperature)."""
SHOWN = 60
"""Characters of what each disagreeing group prints, in the message."""


@dataclass
class Ran:
    """One candidate that ran clean, and how."""

    code: str
    outcome: RunOutcome
    defined: RunOutcome | None = None
    """Its own run where it went elsewhere than the piece (the piece was its test)."""
    how: str = "asked"
    """Which request wrote it: "asked" (runfix's request), "sampled" (the same, warmer),
    "paste" (the whole file and its traceback)."""
    votes: int = 1
    """How many answers were this very code (run once: the same code does the same)."""


def in_jail(outcome: RunOutcome) -> bool:
    """Whether a candidate's run was the jail's (a copy of the kernel): where it was not —
    no jail here, asked about and run in the kernel itself, or held — no other candidate
    runs (each would be a question, and a change to the kernel's state)."""
    return outcome.jailed is not None and outcome.jailed.available


def printed(ran: Ran) -> str:
    """What a candidate's run printed and returned, as candidates are compared."""
    return "\n".join(line.rstrip() for line in said(ran.outcome).strip().splitlines())


def changed(original: str, candidate: str) -> int:
    """How many lines a candidate changes, added and removed (whitespace at ends aside)."""
    a = [line.rstrip() for line in original.strip("\n").splitlines()]
    b = [line.rstrip() for line in candidate.strip("\n").splitlines()]
    return sum(
        max(i2 - i1, j2 - j1)
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes()
        if op != "equal"
    )


def grouped(clean: Sequence[Ran]) -> list[list[Ran]]:
    """The candidates grouped by what they print, the largest group first (ties: the group
    whose first member came first)."""
    groups: dict[str, list[Ran]] = {}
    for ran in clean:
        groups.setdefault(printed(ran), []).append(ran)
    return sorted(groups.values(), key=lambda group: -size(group))


def size(group: Sequence[Ran]) -> int:
    """The answers a group holds, each candidate counted as often as it was answered."""
    return sum(ran.votes for ran in group)


def agreed(groups: Sequence[Sequence[Ran]], original: str) -> Ran | None:
    """The chosen candidate: of the largest group, when no other group is as large, the one
    that changes the fewest lines of `original`; None where groups tie."""
    if not groups or (len(groups) > 1 and size(groups[1]) >= size(groups[0])):
        return None
    return min(groups[0], key=lambda ran: changed(original, ran.code))


def disagreement(groups: Sequence[Sequence[Ran]], ending: str = "none is called fixed") -> str:
    """What clean candidates that disagree print, as the flag of the one offered:
    `disagrees with 2 other candidates that ran clean: one prints `5`, one `4``."""

    def shown(group: Sequence[Ran]) -> str:
        text = " ".join(printed(group[0]).split()) or "nothing"
        text = text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"
        return f"`{text}`" if text != "nothing" else "nothing"

    counted = [f"{size(g)} print{'s' if size(g) == 1 else ''} {shown(g)}" for g in groups]
    total = sum(size(g) for g in groups)
    return (
        f"is one of {total} candidates that ran clean and disagree on what the code prints "
        f"({'; '.join(counted)}): {ending}"
    )
