"""Prompts: a line comment starting with a marker (`# ai: plot df.age`), and its body.

The body is the code under the prompt up to the next cell marker or prompt,
without the blank lines that end it. "Generate" writes it and "Regenerate"
replaces it. Lines are 0-based.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lsp_server.text.cells import is_marker, prompt_text


@dataclass(frozen=True)
class Prompt:
    line: int
    text: str
    """The instruction after the marker."""
    body_first: int
    body_last: int
    """body_last < body_first: no body yet."""

    @property
    def has_body(self) -> bool:
        return self.body_last >= self.body_first


def prompt_at(lines: Sequence[str], line: int, markers: Sequence[str]) -> Prompt | None:
    if not 0 <= line < len(lines):
        return None
    text = prompt_text(lines[line], markers)
    if text is None:
        return None
    end = line + 1
    while (
        end < len(lines) and not is_marker(lines[end]) and prompt_text(lines[end], markers) is None
    ):
        end += 1
    last = end - 1
    while last > line and not lines[last].strip():
        last -= 1
    return Prompt(line, text, line + 1, last)


def prompt_lines(lines: Sequence[str], markers: Sequence[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if prompt_text(line, markers) is not None]
