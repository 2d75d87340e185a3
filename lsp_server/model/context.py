"""What runfix tells the model, and what it takes back from the reply.

Requests are small on purpose: the prompt (or the failing code and its
traceback), the kernel's live state, and as much of the document around the
spot as the character budget allows, nearest lines first. From a reply only a
code block is taken, and only if it parses.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass

from executor.events import Variable
from executor.safety import without_magics
from lsp_server.positions import strip_eol

Message = dict[str, str]
MAX_CODE = 20_000  # characters of code accepted from one reply

GENERATE_SYSTEM = (
    "You write {language} code that runs in a persistent Jupyter kernel, inside the user's "
    "file, under a comment that says what they want. The kernel already holds the variables "
    "listed; reuse them instead of recomputing. Reply with exactly one ```{fence} code block "
    "holding only the code that goes under the comment: no explanation, no repeated comment, "
    "no code from elsewhere in the file."
)
FIX_SYSTEM = (
    "You fix {language} code that runs in a persistent Jupyter kernel. You get the code that "
    "failed, its error, the kernel's variables and any earlier attempts that failed too. "
    "Reply with exactly one ```{fence} code block holding the complete corrected code that "
    "replaces the failing code, and nothing else. Keep the user's intent; change only what "
    "the error needs."
)


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


def excerpt(lines: Sequence[str], first: int, last: int, budget: int, skip: bool = False) -> str:
    """The document around lines first..last, nearest lines first, within `budget` characters.

    With `skip`, lines first..last themselves are left out (shown as a marker)."""
    texts = [strip_eol(line) for line in lines]
    keep: set[int] = set() if skip else set(range(first, last + 1))
    used = sum(len(texts[i]) + 1 for i in keep)
    above, below = first - 1, last + 1
    while used < budget and (above >= 0 or below < len(texts)):
        for index in (above, below):
            if 0 <= index < len(texts) and used + len(texts[index]) + 1 <= budget:
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
        if skip and first <= i <= last:
            if i == first:
                out.append("# <<< the code goes here >>>")
            continue
        if i in keep:
            if gap:
                out.append(f"# … ({gap} lines left out)")
                gap = 0
            out.append(text)
        else:
            gap += 1
    if gap:
        out.append(f"# … ({gap} lines left out)")
    return "\n".join(out)


def _split(budget: int) -> tuple[int, int]:
    """Budget for the kernel state, and for the document."""
    state = budget // 3
    return state, budget - state


def generate_messages(
    instruction: str,
    lines: Sequence[str],
    prompt_line: int,
    body: tuple[int, int],
    variables: Sequence[Variable],
    budget: int,
    language: str = "python",
) -> list[Message]:
    state_budget, doc_budget = _split(budget)
    first, last = body
    around = (
        excerpt(lines, first, max(last, first - 1), doc_budget, skip=True)
        if first <= last
        else excerpt(lines, prompt_line, prompt_line, doc_budget)
    )
    comment = strip_eol(lines[prompt_line]).strip()
    user = (
        f"Request: {instruction}\n\n"
        f"Variables in the kernel:\n{variables_text(variables, state_budget)}\n\n"
        f"The file around the request (the request is the comment `{comment}`):\n"
        f"```{language}\n{around}\n```"
    )
    system = GENERATE_SYSTEM.format(language=language.capitalize(), fence=language)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def fix_messages(
    code: str,
    error: str,
    lines: Sequence[str],
    piece: tuple[int, int],
    variables: Sequence[Variable],
    attempts: Sequence[Attempt],
    budget: int,
    language: str = "python",
) -> list[Message]:
    state_budget, doc_budget = _split(budget)
    earlier = "".join(
        f"\nAttempt {n}:\n```{language}\n{a.code.rstrip()}\n```\nIt failed with:\n```\n"
        f"{a.error.rstrip()}\n```\n"
        for n, a in enumerate(attempts, 1)
    )
    doc_budget = max(doc_budget - len(code) - len(error) - len(earlier), 0)
    user = (
        f"This code failed:\n```{language}\n{code.rstrip()}\n```\n"
        f"Error:\n```\n{error.rstrip()}\n```\n\n"
        f"Variables in the kernel:\n{variables_text(variables, state_budget)}\n"
        + (f"\nEarlier attempts to fix it that failed too:\n{earlier}" if attempts else "")
        + (
            f"\nThe file around it (the failing code is marked):\n```{language}\n"
            f"{excerpt(lines, piece[0], piece[1], doc_budget, skip=True)}\n```"
            if doc_budget > 200
            else ""
        )
    )
    system = FIX_SYSTEM.format(language=language.capitalize(), fence=language)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def error_text(message: str, traceback: str, limit: int = 3000) -> str:
    """An error for the model: the message, and the traceback's end (where the cause is)."""
    text = traceback.strip() or message
    if message not in text:
        text = f"{text}\n{message}"
    return text if len(text) <= limit else "…\n" + text[-limit:]


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_CODE_LANGS = {"", "python", "py", "python3", "ipython", "jupyter"}


def extract_code(reply: str, prompt_line: str | None = None, limit: int = MAX_CODE) -> str:
    """The reply's code block, checked to parse; ReplyError says why there is none."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    code_blocks = [body for lang, body in blocks if lang in _CODE_LANGS]
    if code_blocks:
        code = max(code_blocks, key=len) if len(code_blocks) > 1 else code_blocks[0]
    elif blocks:
        raise ReplyError(f"the reply's code block is {blocks[0][0]}, not Python")
    else:
        code = reply
        if not _looks_like_code(code):
            raise ReplyError("the reply had no code block (prose only)")
    code = _drop_echo(code.strip("\n"), prompt_line)
    if not code.strip():
        raise ReplyError("the reply's code block was empty")
    if len(code) > limit:
        raise ReplyError(
            f"the reply's code is too long ({len(code):,} characters; limit {limit:,})"
        )
    try:
        ast.parse(without_magics(code))
    except SyntaxError as exc:
        raise ReplyError(
            f"the reply's code does not parse: {exc.msg} (line {exc.lineno} of the code)"
        ) from None
    return code.rstrip() + "\n"


def _looks_like_code(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(
        not (isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)))
        for node in tree.body
    )


def _drop_echo(code: str, prompt_line: str | None) -> str:
    """Models often repeat the prompt comment as the first line: it is already there."""
    if prompt_line is None:
        return code
    lines = code.split("\n")
    if lines and lines[0].strip() == prompt_line.strip():
        return "\n".join(lines[1:])
    return code
