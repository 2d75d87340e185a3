"""What a statement showed, kept in the richest form a client can show, with a short line.

A kernel sends MIME bundles: a plot is `image/png` (with `text/plain` like
`<Figure size 640x480 with 1 Axes>`), a DataFrame `text/html` and `text/plain`,
and so on. Each becomes an `Output`: its one line for the hint or diagnostic
(`DataFrame 1,000×12`, `<figure 640×480>`, `<html table 5×3>`), the richest
form stored as a file under the folder's `.runfix/outputs/` (named by runfix
from its content's hash, never by the kernel), and what a hover shows (an
image, a markdown table of a DataFrame's first rows, the text).

Stored files are bounded: per run (`outputs.maxRunMB`: what does not fit is
kept as text only) and per folder (`outputs.maxFolderMB`: the oldest files go
first).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape as html_escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast

from lsp_server.folder_files import (
    OUTPUTS,
    RUNFIX,
    STORED_NAME,
    opened_folder,
    regular,
    write_new,
)

log = logging.getLogger(__name__)

FOLDER = Path(RUNFIX) / OUTPUTS
MB = 1024 * 1024

# The richest first: what a statement is shown as when it sent several.
_IMAGES = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}


@dataclass(frozen=True)
class Output:
    text: str
    """The plain text: what a diagnostic and `runfix run` show; its first line is the hint."""
    image: Path | None = None
    """A stored image (PNG, JPEG or SVG) a hover can show."""
    file: Path | None = None
    """The richest form stored (an image, HTML, markdown, LaTeX or JSON)."""
    kind: str = "text"
    """text, image, figure, svg, table (a DataFrame), html, markdown, latex or json."""
    table: str | None = None
    """A DataFrame's first rows as a markdown table, with its shape and column types."""
    markdown: str | None = None
    """Markdown the code displayed (a hover renders it)."""
    colored: str | None = None
    """Text that came with terminal colours, as HTML for a rich view (`colored_html`)."""
    printed: bool = False
    """Text the code printed (a stream), not a value it showed."""


class OutputFiles:
    """Where one run's outputs go: `<folder>/.runfix/outputs`, within the two limits."""

    def __init__(self, folder: Path, run_limit: int = 20 * MB, folder_limit: int = 200 * MB):
        self.root = folder
        self.folder = folder / FOLDER
        self.run_limit = run_limit
        self.folder_limit = folder_limit
        self.used = 0
        self._folder_size: int | None = None
        """The outputs folder's size as this run knows it: counted once, at its first new
        file, then kept up to date (a run showing 4,000 images counts the folder once)."""

    def save(self, data: bytes, suffix: str) -> Path | None:
        """The file holding `data` (the same content, the same file); None past the run's limit
        or when it cannot be written (a link where runfix keeps its files is never followed:
        `folder_files`)."""
        name = f"{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
        path = self.folder / name
        over = self.used + len(data) > self.run_limit or len(data) > self.folder_limit
        try:
            with opened_folder(self.root, RUNFIX, OUTPUTS, create=not over) as fd:
                if regular(fd, name, self.folder) is not None:
                    _touch(fd, name, path)  # used again: the last to go
                    return path
                if over:
                    return None
                self._make_room(fd, len(data))
                write_new(fd, self.folder, name, data)
        except FileNotFoundError:
            return None  # over the limit, and no folder to look in
        except OSError as exc:
            log.warning("could not keep an output in %s: %s", self.folder, exc)
            return None
        self.used += len(data)
        return path

    def _make_room(self, fd: int, size: int) -> None:
        """Remove the least recently used stored outputs until `size` more bytes fit the
        folder limit: only regular files with the names runfix gives. The folder is listed
        only when the limit may be reached."""
        if self._folder_size is not None and self._folder_size + size <= self.folder_limit:
            self._folder_size += size
            return
        files = []
        for name, info in _stored(fd, self.folder):
            files.append((info.st_mtime, info.st_size, name))
        total = sum(size for _, size, _ in files)
        self._folder_size = total + size
        for _, old_size, old in sorted(files):
            if total + size <= self.folder_limit:
                break
            try:
                if fd >= 0:
                    os.unlink(old, dir_fd=fd)
                else:
                    os.unlink(self.folder / old)
                total -= old_size
                self._folder_size -= old_size
            except OSError:
                pass


def _touch(fd: int, name: str, path: Path) -> None:
    with contextlib.suppress(OSError):
        if fd >= 0:
            os.utime(name, dir_fd=fd, follow_symlinks=False)
        else:
            os.utime(path, follow_symlinks=False)


def _stored(fd: int, folder: Path) -> list[tuple[str, os.stat_result]]:
    """The stored outputs in the outputs folder `fd`: regular files runfix named."""
    out = []
    with os.scandir(fd if fd >= 0 else folder) as entries:
        for entry in entries:
            if STORED_NAME.fullmatch(entry.name) and (info := regular(fd, entry.name, folder)):
                out.append((entry.name, info))
    return out


def render(
    data: Mapping[str, str], about: Mapping[str, Any] | None, files: OutputFiles | None
) -> Output:
    """A MIME bundle (and the kernel's `about` of a value) as an `Output`.

    Widgets and Plotly figures come with a static form (an image, HTML or text) in
    the same bundle, which is what is kept."""
    plain = data.get("text/plain", "")
    if about and about.get("type") == "DataFrame" and len(about.get("shape") or ()) == 2:
        return _dataframe(data, about, files)
    for mime in _IMAGES:
        if mime in data:
            image = _image(mime, data[mime], plain, files)
            if image is not None:
                return image
    if "text/html" in data:
        return _html(data["text/html"], files)
    if "text/markdown" in data:
        markdown = data["text/markdown"]
        stored = _store(files, markdown.encode(), ".md")
        return Output(_line(plain or markdown), file=stored, kind="markdown", markdown=markdown)
    if "text/latex" in data:
        latex = data["text/latex"]
        stored = _store(files, latex.encode(), ".tex")
        return Output(_line(plain or latex), file=stored, kind="latex")
    if "application/json" in data:
        text = data["application/json"]
        stored = _store(files, text.encode(), ".json")
        return Output(_line(plain or _compact_json(text)), file=stored, kind="json")
    text = plain or next((v for k, v in data.items() if k.startswith("text/")), "")
    return Output(_line(text))


def _line(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _store(files: OutputFiles | None, data: bytes, suffix: str) -> Path | None:
    return files.save(data, suffix) if files is not None else None


def _compact_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return text


def _image(mime: str, content: str, plain: str, files: OutputFiles | None) -> Output | None:
    if mime == "image/svg+xml":
        raw = content.encode()
        size = _svg_size(content)
        what = "svg"
    else:
        try:
            raw = base64.b64decode(content, validate=False)
        except (binascii.Error, ValueError):
            return None
        size = _png_size(raw) if mime == "image/png" else _jpeg_size(raw)
        what = "image"
        if figure := _FIGURE.match(plain):  # matplotlib's own size (its PNG is cropped)
            what, size = "figure", f"{figure.group(1)}×{figure.group(2)}"
    path = _store(files, raw, _IMAGES[mime])
    label = f"<{what} {size}>" if size else f"<{what}>"
    return Output(f"{label}\n", image=path, file=path, kind=what)


def _png_size(png: bytes) -> str:
    """Width × height from the IHDR chunk, if the header is one (PNG allows 1 to 2³¹−1 each:
    a malformed header shows no size rather than a made-up one)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR" or len(png) < 24:
        return ""
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    if not (0 < width < 2**31 and 0 < height < 2**31):
        return ""
    return f"{width}×{height}"


def _jpeg_size(jpeg: bytes) -> str:
    """Width × height from the first start-of-frame marker."""
    at = 2
    while at + 9 <= len(jpeg) and jpeg[at] == 0xFF:
        marker, length = jpeg[at + 1], int.from_bytes(jpeg[at + 2 : at + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height = int.from_bytes(jpeg[at + 5 : at + 7], "big")
            width = int.from_bytes(jpeg[at + 7 : at + 9], "big")
            return f"{width}×{height}"
        at += 2 + length
    return ""


_FIGURE = re.compile(r"<Figure size (\d+)x(\d+)")
_SVG_SIZE = re.compile(r"<svg\b[^>]*?\bwidth=\"([\d.]+)(?:px|pt)?\"[^>]*?\bheight=\"([\d.]+)")


def _svg_size(svg: str) -> str:
    match = _SVG_SIZE.search(svg)
    return f"{float(match.group(1)):g}×{float(match.group(2)):g}" if match else ""


class _Tables(HTMLParser):
    """The first table of an HTML document: its rows of data (a row of only `th` is a
    header) and its widest row's cells."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.tables = 0
        self.rows = 0
        self.columns = 0
        self._cells = 0
        self._data = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.depth += 1
            self.tables += self.depth == 1
        elif self.depth == 1 and self.tables == 1 and tag == "tr":
            self._cells = self._data = 0
        elif self.depth == 1 and self.tables == 1 and tag in ("td", "th"):
            self._cells += 1
            self._data += tag == "td"

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.depth = max(0, self.depth - 1)
        elif self.depth == 1 and self.tables == 1 and tag == "tr":
            self.columns = max(self.columns, self._cells)
            self.rows += self._data > 0


def _html(html: str, files: OutputFiles | None) -> Output:
    stored = _store(files, html.encode(), ".html")
    tables = _Tables()
    try:
        tables.feed(html)
    except Exception:  # HTMLParser is lenient; anything else is not a table we can count
        tables.tables = 0
    label = f"<html table {tables.rows:,}×{tables.columns:,}>" if tables.tables else "<html>"
    return Output(f"{label}\n", file=stored, kind="html")


def _dataframe(
    data: Mapping[str, str], about: Mapping[str, Any], files: OutputFiles | None
) -> Output:
    rows, columns = about["shape"]
    label = f"DataFrame {rows:,}×{columns:,}"
    html = data.get("text/html")
    stored = _store(files, html.encode(), ".html") if html else None
    return Output(f"{label}\n", file=stored, kind="table", table=_markdown_table(about))


def _escape(cell: str) -> str:
    return cell.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _markdown_table(about: Mapping[str, Any]) -> str | None:
    """The first rows as a markdown table, under a line with the shape and column types."""
    columns, rows, index = about.get("columns"), about.get("rows"), about.get("index")
    if not isinstance(columns, list) or not isinstance(rows, list):
        return None
    dtypes = about.get("dtypes") or []
    index = index if isinstance(index, list) and len(index) == len(rows) else [""] * len(rows)
    head = ["", *(_escape(str(c)) for c in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    if dtypes:
        lines.append("| *type* | " + " | ".join(f"*{_escape(str(t))}*" for t in dtypes) + " |")
    for name, row in zip(index, rows, strict=True):
        cells = [f"**{_escape(str(name))}**", *(_escape(str(c)) for c in row)]
        lines.append("| " + " | ".join(cells) + " |")
    shape = about["shape"]
    shown = f"first {len(rows)} of {shape[0]:,} rows" if shape[0] > len(rows) else "all rows"
    more = f", first {len(columns)} of {shape[1]:,} columns" if shape[1] > len(columns) else ""
    return f"*DataFrame {shape[0]:,}×{shape[1]:,} ({shown}{more})*\n\n" + "\n".join(lines)


def latest_images(folder: Path, count: int) -> list[Path]:
    """The folder's stored images, the most recently made (or shown again) first."""
    outputs = folder / FOLDER
    try:
        with opened_folder(folder, RUNFIX, OUTPUTS) as fd:
            stored = _stored(fd, outputs)
    except OSError:
        return []
    found = [
        (info.st_mtime, name) for name, info in stored if name.endswith((".png", ".jpg", ".svg"))
    ]
    found.sort(reverse=True)
    return [outputs / name for _, name in found[:count]]


# -- terminal colours as HTML -----------------------------------------------------------

_TERMINAL = re.compile(
    r"\x1b\[([0-9;:]*)m"  # colour and style: kept
    r"|\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"  # dropped
    r"|\r"
)
_PALETTE = (
    "#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
)  # fmt: skip
_Style = tuple[str | None, str | None, bool, bool, bool]
"""Foreground, background, bold, italic, underline."""
_PLAIN: _Style = (None, None, False, False, False)


def _color_256(n: int) -> str | None:
    if 0 <= n < 16:
        return _PALETTE[n]
    if 16 <= n < 232:
        n -= 16
        r, g, b = (n // 36, n // 6 % 6, n % 6)
        return "#" + "".join(f"{0 if c == 0 else 55 + 40 * c:02x}" for c in (r, g, b))
    if 232 <= n < 256:
        return "#" + f"{8 + 10 * (n - 232):02x}" * 3
    return None


_SETS: dict[int, tuple[int, object]] = {
    1: (2, True),
    3: (3, True),
    4: (4, True),
    22: (2, False),
    23: (3, False),
    24: (4, False),
    39: (0, None),
    49: (1, None),
}
"""SGR codes that set one part of the style: code → (index in `_Style`, value)."""


def _sgr(style: _Style, params: str) -> _Style:
    """The style after one `ESC[…m` (16 colours, 256 colours, 24-bit, bold/italic/underline)."""
    current: list[object] = list(style)
    codes = [int(p) if p.isdigit() else 0 for p in params.replace(":", ";").split(";")]
    at = 0
    while at < len(codes):
        code = codes[at]
        if code == 0:
            current = list(_PLAIN)
        elif code in _SETS:
            index, value = _SETS[code]
            current[index] = value
        elif 30 <= code <= 37 or 90 <= code <= 97:
            current[0] = _PALETTE[code - 30 if code < 90 else code - 82]
        elif 40 <= code <= 47 or 100 <= code <= 107:
            current[1] = _PALETTE[code - 40 if code < 100 else code - 92]
        elif code in (38, 48) and at + 1 < len(codes):
            current[0 if code == 38 else 1], at = _extended_color(codes, at)
        at += 1
    return cast(_Style, tuple(current))


def _extended_color(codes: list[int], at: int) -> tuple[str | None, int]:
    """`38;5;N` (256 colours) or `38;2;R;G;B` (24-bit) at `at`: the colour (None: neither)
    and the index of its last code."""
    if codes[at + 1] == 5 and at + 2 < len(codes):
        return _color_256(codes[at + 2]), at + 2
    if codes[at + 1] == 2 and at + 4 < len(codes):
        rgb = (min(max(c, 0), 255) for c in codes[at + 2 : at + 5])
        return "#" + "".join(f"{c:02x}" for c in rgb), at + 4
    return None, at


def _span(style: _Style, text: str) -> str:
    fg, bg, bold, italic, underline = style
    css = []
    if fg:
        css.append(f"color:{fg}")
    if bg:
        css.append(f"background:{bg}")
    if bold:
        css.append("font-weight:bold")
    if italic:
        css.append("font-style:italic")
    if underline:
        css.append("text-decoration:underline")
    escaped = html_escape(text)
    return f'<span style="{";".join(css)}">{escaped}</span>' if css else escaped


def colored_html(raw: str) -> str | None:
    """Text with terminal colour codes as HTML (None: it has none): each `\\r` rewrites its
    line as a terminal does (a coloured progress bar ends at its last frame), codes other
    than colour and style are dropped, and all text is escaped."""
    if "\x1b[" not in raw:
        return None
    style = _PLAIN
    lines: list[str] = []
    for line in raw.replace("\r\n", "\n").split("\n"):
        shown = _Line()
        at = 0
        for match in _TERMINAL.finditer(line):
            shown.write(line[at : match.start()], style)
            if match.group(0) == "\r":
                shown.column = 0
            elif match.group(1) is not None:
                style = _sgr(style, match.group(1))
            at = match.end()
        shown.write(line[at:], style)
        lines.append(shown.html())
    return "\n".join(lines)


_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class _Line:
    """One line of a terminal: characters and their styles; `\\r` writes over it."""

    def __init__(self) -> None:
        self.cells: list[tuple[str, _Style]] = []
        self.column = 0

    def write(self, text: str, style: _Style) -> None:
        for char in _CONTROL_CHARS.sub("", text):
            if self.column < len(self.cells):
                self.cells[self.column] = (char, style)
            else:
                self.cells.append((char, style))
            self.column += 1

    def html(self) -> str:
        parts: list[str] = []
        run: list[str] = []
        run_style = _PLAIN
        for char, style in self.cells:
            if style != run_style and run:
                parts.append(_span(run_style, "".join(run)))
                run = []
            run_style = style
            run.append(char)
        if run:
            parts.append(_span(run_style, "".join(run)))
        return "".join(parts)
