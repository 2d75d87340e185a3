"""A terminal screen (tmux `capture-pane -e`, ANSI colours) → HTML → PNG via headless Chromium.

For screenshots of terminal editors taken by the tests; only the SGR codes tmux emits."""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

_BASE = [
    "#1e1e1e", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
]  # fmt: skip
_SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _color(n: int) -> str:
    if n < 16:
        return _BASE[n]
    if n < 232:
        n -= 16
        levels = [0, 95, 135, 175, 215, 255]
        return _hex(levels[n // 36], levels[(n // 6) % 6], levels[n % 6])
    grey = 8 + (n - 232) * 10
    return _hex(grey, grey, grey)


def _hex(red: int, green: int, blue: int) -> str:
    return f"#{red:02x}{green:02x}{blue:02x}"


def to_html(screen: str, title: str) -> str:
    style: dict[str, str] = {}
    out: list[str] = []
    pos = 0
    for match in _SGR.finditer(screen):
        out.append(html.escape(screen[pos : match.start()]))
        pos = match.end()
        codes = [int(c) if c else 0 for c in match.group(1).split(";")]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                style = {}
            elif code == 1:
                style["font-weight"] = "bold"
            elif code == 3:
                style["font-style"] = "italic"
            elif code == 4:
                style["text-decoration"] = "underline"
            elif code in (22, 23, 24):
                style.pop({22: "font-weight", 23: "font-style", 24: "text-decoration"}[code], None)
            elif 30 <= code <= 37 or 90 <= code <= 97:
                style["color"] = _BASE[code - 30 if code < 90 else code - 82]
            elif 40 <= code <= 47 or 100 <= code <= 107:
                style["background"] = _BASE[code - 40 if code < 100 else code - 92]
            elif code in (38, 48) and i + 1 < len(codes):
                key = "color" if code == 38 else "background"
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    style[key] = _color(codes[i + 2])
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    style[key] = _hex(*codes[i + 2 : i + 5])
                    i += 4
            elif code == 39:
                style.pop("color", None)
            elif code == 49:
                style.pop("background", None)
            i += 1
        css = ";".join(f"{k}:{v}" for k, v in style.items())
        out.append(f'</span><span style="{css}">')
    out.append(html.escape(screen[pos:]))
    body = "".join(out)
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        "<style>body{margin:0;background:#1e1e1e;overflow:hidden}pre{margin:0;padding:8px;color:#e5e5e5;"
        "font:15px/1.25 'DejaVu Sans Mono',monospace}</style>"
        f"<pre><span>{body}</span></pre>"
    )


def screenshot(screen: str, png: Path, size: tuple[int, int]) -> None:
    page = png.with_suffix(".html")
    page.write_text(to_html(screen, png.stem), encoding="utf-8")
    subprocess.run(
        [
            "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", page.as_uri(),
        ],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
