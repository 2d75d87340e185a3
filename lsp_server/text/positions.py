"""Columns: Python counts code points; LSP counts UTF-16 code units unless the
client negotiated another position encoding."""

from __future__ import annotations

from collections.abc import Callable

Width = Callable[[str], int]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def width_for(encoding: str | None) -> Width:
    """How to measure text in the negotiated position encoding (default UTF-16)."""
    if encoding == "utf-8":
        return utf8_len
    if encoding == "utf-32":
        return len
    return utf16_len


def strip_eol(line: str) -> str:
    return line.rstrip("\r\n")


def content_span(line: str, width: Width = utf16_len) -> tuple[int, int]:
    """Start and end of the line's text without indentation and line ending."""
    text = strip_eol(line)
    indent = len(text) - len(text.lstrip())
    return width(text[:indent]), width(text)
