"""Lines as Python and LSP count them: they end only at `\\n`, `\\r\\n` or `\\r`.

`str.splitlines` also breaks at form feed, `\\x1c`–`\\x1e`, `\\x85` and
U+2028/U+2029, which Python source may hold (a form feed between functions, a
U+2028 inside a string): every line after one would be off by one.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its line ending (the last may have none)."""
    return _LINE.findall(text)
