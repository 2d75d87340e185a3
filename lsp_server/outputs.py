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
import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FOLDER = Path(".runfix") / "outputs"
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


class OutputFiles:
    """Where one run's outputs go: `<folder>/.runfix/outputs`, within the two limits."""

    def __init__(self, folder: Path, run_limit: int = 20 * MB, folder_limit: int = 200 * MB):
        self.folder = folder / FOLDER
        self.run_limit = run_limit
        self.folder_limit = folder_limit
        self.used = 0

    def save(self, data: bytes, suffix: str) -> Path | None:
        """The file holding `data` (the same content, the same file); None past the run's limit
        or when it cannot be written."""
        path = self.folder / f"{hashlib.sha256(data).hexdigest()[:16]}{suffix}"
        if path.exists():
            os.utime(path)  # used again: the last to go
            return path
        if self.used + len(data) > self.run_limit or len(data) > self.folder_limit:
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self._make_room(len(data))
            path.write_bytes(data)
        except OSError as exc:
            log.warning("could not keep an output in %s: %s", self.folder, exc)
            return None
        self.used += len(data)
        return path

    def _make_room(self, size: int) -> None:
        """Remove the least recently used files until `size` more bytes fit the folder limit."""
        files = []
        for entry in os.scandir(self.folder):
            if entry.is_file():
                info = entry.stat()
                files.append((info.st_mtime, info.st_size, entry.path))
        total = sum(size for _, size, _ in files)
        for _, old_size, old in sorted(files):
            if total + size <= self.folder_limit:
                break
            try:
                os.remove(old)
                total -= old_size
            except OSError:
                pass


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
    if png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) >= 24:
        return f"{int.from_bytes(png[16:20], 'big')}×{int.from_bytes(png[20:24], 'big')}"
    return ""


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
