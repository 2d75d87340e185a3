"""The live kernel where the user types: completion, hover and signature help from what the
folder's kernel holds (`executor/_kernel_live.py` answers in the kernel).

Only a kernel that already runs is asked: completion never starts one (an untrusted
folder has none: no items, no error), never runs the user's code, and never waits for
a cell (`JupyterKernel.ask_live`). Every answer comes within `BUDGET`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from executor.live import LiveAnswer

BUDGET = 0.08
"""Seconds the kernel has to answer (the editor's whole answer stays under 100 ms)."""

_ASSIGNED = re.compile(r"^\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*(?::[^=]*)?=(?!=)")
_DEFINED = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_LOOPED = re.compile(r"^\s*(?:async\s+)?for\s+([\w\s,()]+?)\s+in\b")
_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)")
_IMPORTED = re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+(.+)$")
_WORD = re.compile(r"[A-Za-z_]\w*")
_LINE_NAMES: dict[str, tuple[str, ...]] = {}
"""The names each line of text binds, by its text: a document's names cost a dictionary
look-up per line while the user types (parsing 10,000 lines took 30 ms a keystroke)."""
_LINE_NAMES_KEPT = 100_000
_CHAIN_AT = re.compile(
    r"[A-Za-z_][\w]*(?:\s*\.\s*[A-Za-z_]\w*|\[\s*(?:'[^'\\]*'|\"[^\"\\]*\"|-?\d+)\s*\])*"
)


@dataclass(frozen=True)
class LiveItem:
    label: str
    kind: str
    """key | column | attribute | name"""
    detail: str
    """The value's type (a column's dtype)."""


@dataclass(frozen=True)
class LiveCompletion:
    items: tuple[LiveItem, ...]
    start: int
    """The column the typed prefix starts at (what an item replaces runs to the cursor)."""
    incomplete: bool
    """From the picture of a busy kernel: the editor should ask again."""
    what: str
    """key | attribute | name"""


def bound_names(lines: Sequence[str]) -> set[str]:
    """The names the document binds itself (assigned, defined, imported, looped over, `as`):
    a static server knows those, so the kernel's are not offered again. Read line by line,
    so that the line being typed (not valid Python yet) does not hide the rest."""
    if len(_LINE_NAMES) > _LINE_NAMES_KEPT:
        _LINE_NAMES.clear()
    names: set[str] = set()
    for line in lines:
        found = _LINE_NAMES.get(line)
        if found is None:
            found = _LINE_NAMES[line] = _names_bound_by(line)
        names.update(found)
    return names


def _names_bound_by(line: str) -> tuple[str, ...]:
    names: list[str] = []
    for pattern in (_ASSIGNED, _DEFINED, _LOOPED):
        if (found := pattern.match(line)) is not None:
            names += _WORD.findall(found.group(1))
    if (imported := _IMPORTED.match(line)) is not None:
        for part in imported.group(1).split(","):
            words = part.replace("(", " ").replace(")", " ").split()
            if words and words[0] != "*":
                names.append(words[-1].split(".")[0])
    names += _AS.findall(line)
    return tuple(names)


def before_cursor(lines: Sequence[str], line: int, character: int) -> str:
    """The line's text before the cursor (`character` in code points)."""
    if not 0 <= line < len(lines):
        return ""
    return lines[line].rstrip("\r\n")[:character]


def expression_at(text: str, character: int) -> str | None:
    """The name, attribute chain or literal subscript under the cursor (`df`, `cfg.a`,
    `cfg["a"]`), cut after the part the cursor is on."""
    for found in _CHAIN_AT.finditer(text):
        if found.start() <= character <= found.end():
            if found.start() > 0 and text[found.start() - 1] in ".\"'":
                return None  # inside an attribute or a string: not an expression's head
            chain = found.group(0)
            cut = character - found.start()
            following = re.match(r"[\w]*", chain[cut:])
            end = cut + (following.end() if following else 0)
            return re.sub(r"\s+", "", chain[:end]).rstrip(".") or None
    return None


def completion(answer: LiveAnswer, before: str, bound: set[str]) -> LiveCompletion | None:
    """The kernel's answer as items; names the document binds (`bound`) left out."""
    said = answer.answer
    if not isinstance(said, dict) or not said.get("items"):
        return None
    prefix = str(said.get("prefix", ""))
    names = said.get("what") == "name"
    items = tuple(
        LiveItem(str(i.get("label", "")), str(i.get("kind", "")), str(i.get("detail", "")))
        for i in said["items"]
        if isinstance(i, dict) and i.get("label") and not (names and i["label"] in bound)
    )
    if not items:
        return None
    return LiveCompletion(
        items, len(before) - len(prefix), not answer.fresh, str(said.get("what", ""))
    )


def hover_text(about: Any, origin: str) -> str | None:
    """Markdown for a value `_kernel_live.describe` told of; `origin` says which run made it."""
    if not isinstance(about, dict) or not about.get("type"):
        return None
    head = f"`{about.get('expression', '')}`: {about['type']}"
    if "shape" in about:
        head += f" · shape {tuple(about['shape'])}"
    elif "length" in about:
        head += f" · len {about['length']}"
    parts = [f"{head} · *kernel*{origin}"]
    if about.get("signature"):
        parts.append(f"```python\n{about.get('expression', '')}{about['signature']}\n```")
    columns = about.get("columns")
    if isinstance(columns, dict) and columns:
        rows = "\n".join(f"| {name} | {dtype} |" for name, dtype in columns.items())
        parts.append(f"| column | dtype |\n|---|---|\n{rows}")
    attributes = about.get("attributes")
    if isinstance(attributes, dict) and attributes:
        parts.append(", ".join(f"`{n}`: {t}" for n, t in attributes.items()))
    if about.get("preview"):
        parts.append(f"```\n{about['preview']}\n```")
    if about.get("doc"):
        parts.append(str(about["doc"]))
    return "\n\n".join(parts)


def origin(
    edited_above: Callable[[int], str | None], lines: Sequence[str], line: int, name: str
) -> str:
    """ " · from line N" for the nearest line at or above `line` that binds `name` (the run it
    comes from), and " (stale)" when code above that line was edited since it ran."""
    head = re.escape(re.split(r"[.\[]", name, maxsplit=1)[0])
    binds = re.compile(
        rf"^\s*(?:(?:async\s+)?def\s+{head}\b|class\s+{head}\b|{head}\s*(?::[^=]*)?=(?!=)"
        rf"|(?:from\s+\S+\s+)?import\b.*\b{head}\b|for\b.*\b{head}\b.*\bin\b)"
    )
    for number in range(min(line, len(lines) - 1), -1, -1):
        if binds.match(lines[number]):
            stale = " (stale)" if edited_above(number) else ""
            return f" · from line {number + 1}{stale}"
    return ""
