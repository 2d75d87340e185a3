"""What runfix tells the model, and what it takes back from the reply.

Requests are small on purpose: the prompt (or the failing code and its
traceback), the kernel's live state, and as much of the document around the
spot as the character budget allows, nearest lines first. From a reply only a
code block is taken, and only if it parses.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from executor.events import Variable
from executor.safety import without_magics
from lsp_server.text.languages import PYTHON, Language
from lsp_server.text.positions import strip_eol

Message = dict[str, str]
MAX_CODE = 20_000  # characters of code accepted from one reply

GENERATE_SYSTEM = (
    "You write {language} code for a Jupyter kernel, to go under a comment in the user's file "
    "that says what they want. {state} Reply with one ```{fence} block holding only the new "
    "code: no explanation, no repeated comment, no cell markers, no code from elsewhere."
)
FIX_SYSTEM = (
    "You fix {language} code that runs in a persistent Jupyter kernel. You get the code to "
    "fix, the error it raised, the kernel's variables and any earlier attempts that failed "
    "too. Reply with exactly one ```{fence} code block holding the complete corrected version "
    "of the code to fix, and nothing else: no other code of the file, no cell markers. Keep "
    "every statement the user wrote and what it does; change only what the error needs."
)
_STATE = {
    True: "The kernel holds the variables listed; reuse them.",
    False: "Reuse what the file's code above defines.",
}
LAYOUTS = ("first", "last", "slot", "stable")
"""How a fix request is laid out: `first` — the code to fix and what it raised (its last
lines, not the frames) first, then its caller, the rest of the file, earlier attempts and
the kernel's variables; `last` — the rest of the file first, the code to fix and its whole
traceback at the end; `slot` — the file with a placeholder where the code goes (what
runfix sent before: Qwen2.5-Coder-0.5B echoed it in 36 of 46 replies). Asked with the
frames, that model answered the code unchanged more often; on the whole bench `first` and
`last` are within its noise (`scripts/bench_fix_live.py --layout`); `stable` — what stays
the same between one fix's attempts first (the rest of the file, the caller, the code to
fix), then what changes (the kernel's variables, the error, earlier attempts): an endpoint
that reuses the longest prefix it already read (llama.cpp's server, OpenAI's prompt cache)
reads only the end of a second attempt."""
SLOT = "# <<< the code goes here >>>"
TOKENS_PER_CHAR = 1 / 3.6
"""Tokens a character of code takes, about (the bound on an answer is made from it)."""


def answer_bound(code: str, cap: int, floor: int = 256) -> int:
    """The most tokens an answer to fix `code` needs: twice the code, and room for a fence
    and a short explanation the reply may carry anyway; never more than `cap`."""
    return min(cap, max(floor, int(2 * len(code) * TOKENS_PER_CHAR) + 128))


GENERATE_BOUND = 600
"""Tokens a generated body may take (a cell's worth of code: ~60 lines)."""


class ReplyError(Exception):
    """The reply holds no code runfix can offer; the message says why."""


@dataclass(frozen=True)
class Attempt:
    code: str
    error: str


def describe_variable(v: Variable) -> str:
    parts = [f"{v.name}: {v.type}"]
    if v.shape is not None:
        parts.append(f"shape={tuple(v.shape)}")
    elif v.length is not None:
        parts.append(f"len={v.length}")
    if v.columns:
        cols = ", ".join(f"{k}:{t}" for k, t in v.columns.items())
        parts.append(f"columns [{cols}]")
    if v.summary:
        parts.append(f"= {v.summary}")
    return " ".join(parts)


def variables_text(variables: Sequence[Variable], budget: int) -> str:
    if not variables:
        return "(no variables yet)"
    out: list[str] = []
    used = 0
    for v in variables:
        line = describe_variable(v)[:300]
        if used + len(line) + 1 > budget:
            out.append(f"… and {len(variables) - len(out)} more")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def excerpt(
    lines: Sequence[str],
    first: int,
    last: int,
    budget: int,
    skip: bool = False,
    slot: str | None = SLOT,
    leave_out: Sequence[tuple[int, int]] = (),
    comment: str = "#",
) -> str:
    """The document around lines first..last, nearest lines first, within `budget` characters.

    With `skip`, lines first..last themselves are left out (shown as `slot`, or with nothing
    in their place when `slot` is None); `leave_out` are more spans left out silently (code
    shown elsewhere in the request); a gap is said in `comment`, the language's line comment."""
    texts = [strip_eol(line) for line in lines]
    hidden = {i for a, b in leave_out for i in range(a, b + 1)}
    if skip:
        hidden |= set(range(first, last + 1))
    keep: set[int] = set() if skip else set(range(first, last + 1)) - hidden
    used = sum(len(texts[i]) + 1 for i in keep)
    above, below = first - 1, last + 1
    while used < budget and (above >= 0 or below < len(texts)):
        for index in (above, below):
            fits = 0 <= index < len(texts) and used + len(texts[index]) + 1 <= budget
            if fits and index not in hidden:
                keep.add(index)
                used += len(texts[index]) + 1
        if (above < 0 or used + len(texts[above]) + 1 > budget) and (
            below >= len(texts) or used + len(texts[below]) + 1 > budget
        ):
            break
        above, below = above - 1, below + 1
    out: list[str] = []
    gap = 0
    for i, text in enumerate(texts):
        if i in hidden:
            if skip and i == first and slot is not None:
                out.append(slot)
            continue
        if i in keep:
            if gap:
                out.append(f"{comment} … ({gap} lines left out)")
                gap = 0
            out.append(text)
        else:
            gap += 1
    if gap:
        out.append(f"{comment} … ({gap} lines left out)")
    return "\n".join(out)


def _split(budget: int) -> tuple[int, int]:
    """Budget for the kernel state, and for the document."""
    state = budget // 3
    return state, budget - state


def mentioned_text(instruction: str, variables: Sequence[Variable]) -> str:
    """The kernel's values of the names a prompt mentions, said right under it ("" when it
    names none): a small model uses a name's columns or type when it sees them where it
    writes."""
    words = set(re.findall(r"[A-Za-z_]\w*", instruction))
    named = [v for v in variables if v.name in words][:6]
    if not named:
        return ""
    return "\n(" + "; ".join(describe_variable(v)[:200] for v in named) + ")"


def generate_messages(
    instruction: str,
    lines: Sequence[str],
    prompt_line: int,
    body: tuple[int, int],
    variables: Sequence[Variable],
    budget: int,
    language: Language = PYTHON,
) -> list[Message]:
    """The file (the prompt's old body left out), the kernel's state, then the request:
    what the model is to write comes last, next to where it writes; asked in `language`."""
    state_budget, doc_budget = _split(budget)
    first, last = body
    gaps = language.comment
    around = (
        excerpt(lines, first, max(last, first - 1), doc_budget, skip=True, slot=None, comment=gaps)
        if first <= last
        else excerpt(lines, prompt_line, prompt_line, doc_budget, comment=gaps)
    )
    comment = strip_eol(lines[prompt_line]).strip()
    user = (
        f"The file, for reference (do not repeat it):\n```{language.fence}\n{around}\n```\n\n"
        + (
            f"Variables in the kernel:\n{variables_text(variables, state_budget)}\n\n"
            if language.python and variables
            else ""
        )
        + f"Write the code that goes right under the comment `{comment}`: {instruction}"
        + mentioned_text(instruction, variables)
    )
    system = GENERATE_SYSTEM.format(
        language=language.name, fence=language.fence, state=_STATE[bool(variables)]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def fix_messages(
    code: str,
    error: str,
    lines: Sequence[str],
    piece: tuple[int, int],
    variables: Sequence[Variable],
    attempts: Sequence[Attempt],
    budget: int,
    language: Language = PYTHON,
    *,
    caller: tuple[str, tuple[int, int] | None] | None = None,
    layout: str = "first",
    where: str | None = None,
    evidence: str = "",
    note: str = "",
) -> list[Message]:
    """A request to fix `code` (lines `piece` of `lines`) that raised `error`. `caller`: the
    code that ran and reached it from elsewhere (another cell, with its lines in `lines`;
    or the document, when `where` names the module file `lines` are of): shown as the test
    the fix must pass, never as code to change. `evidence`: what the live kernel held when
    it raised (`fix.evidence`), right under the error; `note`: one line on what was wrong
    with the last answer (the code unchanged, no code), said before the request."""
    state_budget, doc_budget = _split(budget)
    fence, gaps = language.fence, language.comment
    earlier = "".join(
        f"\nAttempt {n}:\n```{fence}\n{a.code.rstrip()}\n```\nIt failed: {a.error.rstrip()}\n"
        for n, a in enumerate(attempts, 1)
    )
    called = (
        f"\nThis code calls it; it runs again after your fix and must then succeed (do not "
        f"change or repeat it):\n```{fence}\n{caller[0].rstrip()}\n```\n"
        if caller is not None
        else ""
    )
    shown = len(code) + len(error) + len(earlier) + len(called) + len(evidence) + len(note)
    held, said = _said(evidence), _said(note)
    doc_budget = max(doc_budget - shown, 0)
    leave_out = [caller[1]] if caller is not None and caller[1] is not None else []
    rest = f"The rest of {where}" if where else "The rest of the file"
    state = f"Variables in the kernel:\n{variables_text(variables, state_budget)}\n"
    tried = f"\nEarlier attempts to fix it that failed too:\n{earlier}" if attempts else ""
    # The rest of the file, the code to fix left out (the `first` and `last` layouts).
    rest_of_file = excerpt(
        lines, piece[0], piece[1], doc_budget, skip=True, slot=None, leave_out=leave_out,
        comment=gaps,
    )  # fmt: skip
    if layout == "first":
        around = rest_of_file
        told = _told(attempts, fence)
        user = (
            f"The code to fix{f' (in {where})' if where else ''}:\n"
            f"```{fence}\n{code.rstrip()}\n```\n"
            f"It raised:\n```\n{headline(error)}\n```\n{held}"
            + (
                f"when called by this code, which runs again after your fix and must then "
                f"succeed (do not change or repeat it):\n```{fence}\n{caller[0].rstrip()}\n```\n"
                if caller is not None
                else ""
            )
            + (
                f"\n{rest}, for reference (already run; do not repeat it):\n"
                f"```{fence}\n{around}\n```\n"
                if doc_budget > 200 and around.strip()
                else ""
            )
            + (f"\nEarlier attempts to fix it that failed too:\n{told}" if attempts else "")
            + (f"\n{state}" if variables else "")
            + f"\n{said}Reply with the corrected code to fix, complete, in one ```{fence} block."
        )
    elif layout == "stable":
        around = rest_of_file
        told = _told(attempts, fence)
        user = (
            (
                f"{rest}, for reference (already run; do not repeat it):\n"
                f"```{fence}\n{around}\n```\n\n"
                if doc_budget > 200 and around.strip()
                else ""
            )
            + (
                f"This code calls the code to fix; it runs again after your fix and must then "
                f"succeed (do not change or repeat it):\n```{fence}\n{caller[0].rstrip()}\n```\n\n"
                if caller is not None
                else ""
            )
            + f"The code to fix{f' (in {where})' if where else ''}:\n"
            f"```{fence}\n{code.rstrip()}\n```\n"
            + (f"\n{state}" if variables else "")
            + f"\nIt raised:\n```\n{headline(error)}\n```\n{held}"
            + (f"\nEarlier attempts to fix it that failed too:\n{told}" if attempts else "")
            + f"\n{said}Reply with the corrected code to fix, complete, in one ```{fence} block."
        )
    elif layout == "slot":
        around = excerpt(
            lines, piece[0], piece[1], doc_budget, skip=True, leave_out=leave_out, comment=gaps
        )
        user = (
            f"This code failed:\n```{fence}\n{code.rstrip()}\n```\n"
            f"Error:\n```\n{error.rstrip()}\n```\n{held}\n{state}{called}{tried}{said}"
            + (
                f"\nThe file around it (the failing code is marked):\n```{fence}\n{around}\n```"
                if doc_budget > 200
                else ""
            )
        )
    else:
        around = rest_of_file
        context = (
            f"{rest}, for reference (already run; do not repeat it):\n```{fence}\n{around}\n```\n\n"
            if doc_budget > 200 and around.strip()
            else ""
        )
        user = (
            f"{context}{state}{tried}{called}\n"
            f"The code to fix{f' (in {where})' if where else ''}:\n"
            f"```{fence}\n{code.rstrip()}\n```\n"
            f"It raised:\n```\n{error.rstrip()}\n```\n{held}{said}"
            f"Reply with the corrected code to fix, complete, in one ```{fence} block."
        )
    system = FIX_SYSTEM.format(language=language.name, fence=fence)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


LINE_SYSTEM = (
    "You fix one line of {language} code. You get the code with the line that raised marked, "
    "the error, and what the program's variables held. Reply with exactly one ```{fence} "
    "code block holding only the new line (or lines) that replace the marked line, and "
    "nothing else."
)
RAISED = "<- this line raised"
"""How the narrower request marks the line that raised (a comment on it)."""
LINE_BOUND = 200
"""Tokens an answer to the failing line alone may take."""


def _told(attempts: Sequence[Attempt], fence: str) -> str:
    """Earlier attempts as a request says them: each one's code and the first lines of what
    it raised."""
    return "".join(
        f"\nAttempt {n}:\n```{fence}\n{a.code.rstrip()}\n```\nIt failed: {headline(a.error)}\n"
        for n, a in enumerate(attempts, 1)
    )


def _said(text: str) -> str:
    """A part of a request that may be empty: its text and a line end, or nothing."""
    return f"{text.rstrip()}\n" if text.strip() else ""


def line_messages(
    code: str,
    line: int,
    error: str,
    evidence: str,
    note: str,
    language: Language = PYTHON,
) -> list[Message]:
    """A narrower request, asked after an answer that changed nothing (or had no code): the
    code to fix with line `line` (0-based, of `code`) marked, the error and what the kernel
    held, and "rewrite this line so that it no longer raises". A small model that repeats
    a whole block it was given can often still change one line."""
    rows = code.rstrip("\n").split("\n")
    marked = [
        f"{row}  {language.comment} {RAISED}" if i == line else row for i, row in enumerate(rows)
    ]
    fence = language.fence
    failing = rows[line].strip() if 0 <= line < len(rows) else ""
    user = (
        f"```{fence}\n" + "\n".join(marked) + "\n```\n"
        f"The marked line raised:\n```\n{headline(error)}\n```\n"
        + _said(evidence)
        + _said(note)
        + f"Rewrite the line `{failing}` so that it no longer raises and does what it was "
        f"meant to do. Reply with only the new line (or lines) in one ```{fence} block."
    )
    system = LINE_SYSTEM.format(language=language.name, fence=fence)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _blocks(reply: str, language: Language) -> tuple[list[str], list[tuple[str, str]]]:
    """A reply's code blocks in `language` (else its untagged ones), and all its blocks with
    their tags; ReplyError for an empty reply."""
    if not reply.strip():
        raise ReplyError("the model's answer was empty")
    blocks = [(str(lang).lower(), str(body)) for lang, body in _FENCE.findall(reply)]
    code = [body for lang, body in blocks if lang in language.fences] or [
        body for lang, body in blocks if lang == ""
    ]
    return code, blocks


def reply_block(reply: str, language: Language = PYTHON) -> str:
    """The code of a reply: its block in `language` (or an untagged one), else the reply
    itself where it has no block and reads as code; ReplyError otherwise."""
    code, blocks = _blocks(reply, language)
    if code:
        return code[0]
    if blocks:
        raise ReplyError(f"the reply's code block is {blocks[0][0]}, not {language.name}")
    if language.python and _looks_like_code(textwrap.dedent(reply.strip("\n"))):
        return reply
    raise ReplyError("the reply had no code block (prose only)")


_MARKED = re.compile(rf"\s*(#|//|--)\s*{re.escape(RAISED)}\s*$")


def _without_context(new: list[str], before: list[str], after: list[str]) -> list[str]:
    """An answer's lines without those that repeat the code around the marked line (the
    lines just above it at its start, just below it at its end); one line is always kept."""

    def same(a: list[str], b: list[str]) -> bool:
        return [x.strip() for x in a] == [y.strip() for y in b]

    head = next(
        (n for n in range(min(len(new) - 1, len(before)), 0, -1) if same(new[:n], before[-n:])),
        0,
    )
    rest = new[head:]
    tail = next(
        (n for n in range(min(len(rest) - 1, len(after)), 0, -1) if same(rest[-n:], after[:n])),
        0,
    )
    return rest[: len(rest) - tail]


def splice_line(code: str, line: int, reply: str) -> str:
    """`code` with its line `line` (0-based) replaced by the lines of `reply`, indented as
    the line was; a reply that starts as the code does (its `def` line again) is taken as
    the whole code."""
    rows = code.rstrip("\n").split("\n")
    new = [_MARKED.sub("", r) for r in reply.rstrip("\n").split("\n")]
    while new and not new[0].strip():
        new.pop(0)
    if not new or not 0 <= line < len(rows):
        return code
    if len(rows) > 1 and len(new) > 1 and line != 0 and new[0].strip() == rows[0].strip():
        return "\n".join(new) + "\n"  # it starts as the code does: the whole code again
    if len(new) == 1 and new[0].strip() == rows[line].strip() and len(rows) > 1:
        return code  # the marked line itself again
    new = _without_context(new, rows[:line], rows[line + 1 :])  # (one line at least is left)
    indent = rows[line][: len(rows[line]) - len(rows[line].lstrip())]
    least = min(len(r) - len(r.lstrip()) for r in new if r.strip())
    placed = [indent + r[least:] if r.strip() else "" for r in new]
    return "\n".join([*rows[:line], *placed, *rows[line + 1 :]]) + "\n"


_FRAME = re.compile(r"^(\s|Traceback \(|During handling|The above exception|File \")")


def headline(error: str, limit: int = 1200) -> str:
    """What an error says, without its frames: the exception's lines (and what follows
    them: Python's suggestion, a note). A small model given the frames as well answers
    with the code unchanged more often; the code to fix is shown beside it anyway."""
    before, found, frames = error.rstrip().partition("Traceback (most recent call last):")
    if not found:
        text = error.strip()
    else:
        lines = frames.split("\n")
        start = len(lines) - 1
        while start > 0 and not _FRAME.match(lines[start - 1]) and lines[start - 1].strip():
            start -= 1
        text = (before + "\n".join(lines[start:]).strip()).strip()
    return text if len(text) <= limit else text[:limit] + " …"


def error_text(message: str, traceback: str, limit: int = 3000) -> str:
    """An error for the model: the message, and the traceback's end (where the cause is)."""
    text = traceback.strip() or message
    if message not in text:
        text = f"{text}\n{message}"
    return text if len(text) <= limit else "…\n" + text[-limit:]


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(
    reply: str,
    prompt_line: str | None = None,
    limit: int = MAX_CODE,
    *,
    asked: str | None = None,
    context: Sequence[str] = (),
    language: Language = PYTHON,
) -> str:
    """The reply's code block, trimmed to the code asked for and checked to parse;
    ReplyError says why there is none.

    Trimmed: runfix's own words (the placeholder, "lines left out"), cell markers (where the
    reply holds several cells, the one asked for: most like `asked`, the code being fixed, or
    under the repeated prompt), the prompt line repeated, prose inside the fence. A reply
    that only repeats `context` (the file shown with the request) is no code.

    Only Python is parsed: in another `language` the block tagged as that language (or
    untagged) is taken as it is, and a reply without one is no code."""
    code_blocks, blocks = _blocks(reply, language)
    if code_blocks:
        code = _best_block(code_blocks, asked, language.python)
    elif blocks:
        raise ReplyError(f"the reply's code block is {blocks[0][0]}, not {language.name}")
    elif not language.python:
        raise ReplyError(f"the reply had no ```{language.fence} code block")
    else:
        code = reply
        if not _looks_like_code(_without_ours(code)):
            raise ReplyError("the reply had no code block (prose only)")
    code = _trimmed(code.strip("\n"), prompt_line, asked, context, language.comment)
    if asked is not None:
        code = _without_neighbours(code, asked, context)
    if not code.strip():
        raise ReplyError("the reply's code block was empty")
    if len(code) > limit:
        raise ReplyError(
            f"the reply's code is too long ({len(code):,} characters; limit {limit:,})"
        )
    if language.python:
        code = _parsing(code)
    if _echo(code, context, language.comment) and (asked is None or _likeness(code, asked) < 0.5):
        raise ReplyError("the reply only repeated other code of the file")
    return code.rstrip() + "\n"


def _without_neighbours(code: str, asked: str, context: Sequence[str]) -> str:
    """`code` without the lines at its start and end that repeat other code of the file (a
    neighbouring cell the model wrote out again) and are not in the code asked for: run as a
    fix, they would run that cell's code again in the user's kernel. Kept whole when
    nothing else would be left (that echo is refused as such)."""
    shown = {strip_eol(line).strip() for line in context if line.strip()}
    own = {line.strip() for line in asked.splitlines() if line.strip()}
    lines = code.split("\n")

    def neighbour(line: str) -> bool:
        text = line.strip()
        return bool(text) and text in shown and text not in own

    first, last = 0, len(lines)
    while first < last and (neighbour(lines[first]) or not lines[first].strip()):
        first += 1
    while last > first and (neighbour(lines[last - 1]) or not lines[last - 1].strip()):
        last -= 1
    kept = lines[first:last]
    if not any(line.strip() for line in kept) or kept == lines:
        return code
    return "\n".join(kept)


def _best_block(blocks: Sequence[str], asked: str | None, python: bool = True) -> str:
    """Of several code blocks (the code, then a traceback or usage the model added), the one
    that parses and is most like the code asked for (else the longest that parses; in
    another language than Python, of them all)."""
    if len(blocks) == 1:
        return blocks[0]
    parsing = []
    for block in blocks if python else ():
        try:
            ast.parse(without_magics(_without_ours(block)))
        except SyntaxError:
            continue
        parsing.append(block)
    pool = parsing or list(blocks)
    if asked is not None:
        return max(pool, key=lambda b: _likeness(b, asked))
    return max(pool, key=len)


_OURS = re.compile(r"^\s*(?:#|//|--)\s*(<<<.*>>>|… \(\d+ lines? left out\))\s*$")
_MARKER = re.compile(r"^\s*(#|//|--)\s*%%")


def _without_ours(code: str) -> str:
    """Without the lines runfix itself wrote into the request (a placeholder, a gap)."""
    return "\n".join(line for line in code.split("\n") if not _OURS.match(line))


def _norm(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _likeness(a: str, b: str) -> float:
    import difflib

    return difflib.SequenceMatcher(None, _norm(a), _norm(b)).ratio()


def _echo(code: str, context: Sequence[str], comment: str = "#") -> bool:
    """Whether every line of `code` is a line of the context shown (or a `comment`)."""
    if not context:
        return False
    shown = {strip_eol(line).strip() for line in context}
    lines = [
        ln.strip() for ln in code.splitlines() if ln.strip() and not ln.strip().startswith(comment)
    ]
    return bool(lines) and all(line in shown for line in lines)


def _trimmed(
    code: str, prompt_line: str | None, asked: str | None, context: Sequence[str], comment: str
) -> str:
    lines = [line for line in code.split("\n") if not _OURS.match(line)]
    prompt = prompt_line.strip() if prompt_line else None
    if any(_MARKER.match(line) for line in lines):
        lines = _one_cell(lines, prompt, asked, context, comment)
    if prompt is not None:
        lines = [line for line in lines if line.strip() != prompt]
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def _one_cell(
    lines: list[str], prompt: str | None, asked: str | None, context: Sequence[str], comment: str
) -> list[str]:
    """Of a reply holding cell markers, the cell asked for, its marker dropped."""
    cells: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        if _MARKER.match(line):
            cells.append((line, []))
        else:
            cells[-1][1].append(line)
    filled = [(head, body) for head, body in cells if any(ln.strip() for ln in body)]
    if not filled:
        return []
    if asked is not None:
        return max(filled, key=lambda c: _likeness("\n".join(c[1]), asked))[1]
    if prompt is not None:
        words = prompt.split(":", 1)[-1].strip()
        for head, body in filled:
            if words and words in head:
                return body
            for i, line in enumerate(body):
                if line.strip() == prompt:
                    return body[i + 1 :]
    fresh = [c for c in filled if not _echo("\n".join(c[1]), context, comment)]
    return (fresh or filled)[-1][1]


def _parsing(code: str) -> str:
    """`code`, or the most of it that parses once prose lines around it are dropped (a
    sentence inside the fence); ReplyError when nothing does."""
    try:
        ast.parse(without_magics(code))
        return code
    except SyntaxError as exc:
        error = exc
    lines = code.split("\n")
    for drop in range(1, min(4, len(lines))):
        for head in range(drop + 1):
            tail = drop - head
            kept = lines[head : len(lines) - tail]
            if not any(line.strip() for line in kept):
                continue
            try:
                ast.parse(without_magics("\n".join(kept)))
            except SyntaxError:
                continue
            dropped = lines[:head] + lines[len(lines) - tail :]
            if all(_prose(line) for line in dropped):
                return "\n".join(kept)
    raise ReplyError(
        f"the reply's code does not parse: {error.msg} (line {error.lineno} of the code)"
    )


def _prose(line: str) -> bool:
    """A line of English, not of code: words and spaces, ending like a sentence."""
    text = line.strip()
    if not text:
        return True
    try:
        ast.parse(text)
        return False
    except SyntaxError:
        pass
    return bool(re.match(r"^[A-Z][\w ,'’()-]*[.:!]?$", text)) and " " in text


def _looks_like_code(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)))
        for node in tree.body
    )
