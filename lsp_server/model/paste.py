"""The paste's way of asking: the whole file and its traceback, nothing else — what a person
does who pastes them into a chat. One of a fix's candidates is asked this way, so a fix the
plain request finds is always among runfix's (issue 69: narrower, evidence-rich requests
lost tasks the plain one won). Its answer is a whole file; the candidate is the part of it
that stands where the code being fixed stands.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from lsp_server.model.context import ReplyError, reply_block
from lsp_server.text.languages import PYTHON, Language
from lsp_server.text.positions import strip_eol

PASTE_SYSTEM = "You are a helpful programming assistant."

_IMPORT = re.compile(r"^\s*(import\s+\w|from\s+[\w.]+\s+import\s)")


def paste_messages(
    file: Sequence[str], name: str, error: str, language: Language = PYTHON
) -> list[dict[str, str]]:
    """The request: `file` (its lines) named `name`, and what running it raised."""
    text = "".join(file)
    fence = language.fences[0] if language.fences else ""
    user = (
        f"My {language.name} file {name}:\n```{fence}\n{text.rstrip()}\n```\n\nRunning it "
        f"raised:\n```\n{error.strip()}\n```\nFix it. Reply with the complete corrected file "
        f"in one ```{fence} block."
    )
    return [{"role": "system", "content": PASTE_SYSTEM}, {"role": "user", "content": user}]


def from_file(
    reply: str, file: Sequence[str], first: int, last: int, language: Language = PYTHON
) -> str:
    """The code the reply's file holds in place of lines first..last (0-based) of `file`;
    ReplyError where its changes lie elsewhere (an import line added at the top is kept,
    moved into the code: it runs there all the same)."""
    block = reply_block(reply, language)  # the file as it came: its cell markers too
    old = [strip_eol(line).rstrip() for line in file]
    new = [line.rstrip() for line in block.rstrip("\n").split("\n")]
    start, end = first, last + 1  # (last = first - 1: nothing there yet, code goes in at first)
    lo: int | None = None
    hi: int | None = None
    """Where lines first..last stand in the reply (its indices, end excluded)."""
    added: list[str] = []
    """Import lines the reply added outside lines first..last."""
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            if lo is None and i1 <= start <= i2:
                lo = j1 + (start - i1)
            if i1 <= end <= i2:
                hi = max(hi if hi is not None else 0, j1 + (end - i1))
            continue
        inside = i1 >= start and i2 <= end if i1 < i2 else start <= i1 <= end
        if inside:
            lo = j1 if lo is None or j1 < lo else lo
            hi = j2 if hi is None or j2 > hi else hi
            continue
        if op == "insert" and all(_IMPORT.match(line) or not line.strip() for line in new[j1:j2]):
            added += [line for line in new[j1:j2] if line.strip()]
            continue
        raise ReplyError("the reply changed other lines of the file than the code to fix")
    if lo is None or hi is None or hi < lo:
        raise ReplyError("the reply's file did not hold the code to fix")
    code = "\n".join(added + new[lo:hi]).strip("\n")
    if not code.strip():
        raise ReplyError("the reply's file left the code to fix out")
    return code + "\n"
