"""Columns: Python counts code points, LSP counts UTF-16 code units."""

from __future__ import annotations


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def to_utf16(line: str, column: int) -> int:
    """A code-point column of `line` as a UTF-16 column."""
    return utf16_len(line[:column])


def strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def content_span(line: str) -> tuple[int, int]:
    """UTF-16 start and end of the line's text without indentation and line ending."""
    text = strip_eol(line)
    indent = len(text) - len(text.lstrip())
    return to_utf16(text, indent), utf16_len(text)
