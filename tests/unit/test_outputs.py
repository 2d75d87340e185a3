"""Rich outputs: what each MIME bundle becomes, where it is stored, and the limits."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from lsp_server.outputs.bundles import (
    FOLDER,
    Output,
    OutputFiles,
    colored_html,
    latest_images,
    render,
)
from lsp_server.outputs.results import DocumentResults, StatementResult
from lsp_server.outputs.view import statements_at


def png(width: int, height: int, filler: int = 0) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
        + width.to_bytes(4, "big")
        + height.to_bytes(4, "big")
        + bytes([filler]) * 64
    )


def test_a_plot_is_a_figure_with_its_size_and_its_png_is_stored(tmp_path: Path) -> None:
    data = {
        "image/png": base64.b64encode(png(640, 480)).decode(),
        "text/plain": "<Figure size 640x480 with 1 Axes>",
    }
    output = render(data, None, OutputFiles(tmp_path))
    assert output.text == "<figure 640×480>\n" and output.kind == "figure"
    assert output.image is not None and output.image.parent == tmp_path / FOLDER
    assert output.image.read_bytes() == png(640, 480) and output.image.suffix == ".png"
    again = render(data, None, OutputFiles(tmp_path))
    assert again.image == output.image  # the same picture: the same file


def test_jpeg_and_svg_sizes_and_files(tmp_path: Path) -> None:
    jpeg = b"\xff\xd8" + b"\xff\xe0\x00\x04\x00\x00" + b"\xff\xc0\x00\x11\x08\x00\x32\x00\x64"
    output = render({"image/jpeg": base64.b64encode(jpeg).decode()}, None, OutputFiles(tmp_path))
    assert output.text == "<image 100×50>\n" and output.image is not None
    assert output.image.suffix == ".jpg"
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="30.5"><rect/></svg>'
    output = render({"image/svg+xml": svg, "text/plain": "<SVG>"}, None, OutputFiles(tmp_path))
    assert output.text == "<svg 120×30.5>\n" and output.kind == "svg"
    assert output.image is not None and output.image.read_text() == svg


def test_html_tables_are_counted_by_their_data_rows(tmp_path: Path) -> None:
    html = (
        "<table><thead><tr><th></th><th>a</th><th>b</th></tr></thead>"
        "<tbody><tr><th>0</th><td>1</td><td>2</td></tr><tr><th>1</th><td>3</td><td>4</td></tr>"
        "<tr><td><table><tr><td>nested</td></tr></table></td></tr></tbody></table>"
    )
    output = render({"text/html": html, "text/plain": "<HTML>"}, None, OutputFiles(tmp_path))
    assert output.text == "<html table 3×3>\n" and output.kind == "html"
    assert output.file is not None and output.file.read_text() == html
    assert render({"text/html": "<b>hi</b>"}, None, None).text == "<html>\n"


def test_a_dataframe_is_its_shape_inline_and_a_table_of_its_first_rows(tmp_path: Path) -> None:
    about = {
        "type": "DataFrame",
        "shape": [1000, 12],
        "columns": ["a", "b|c"],
        "dtypes": ["int64", "object"],
        "index": ["0", "1"],
        "rows": [["1", "x"], ["2", "y"]],
    }
    output = render({"text/html": "<table></table>", "text/plain": "..."}, about, None)
    assert output.text == "DataFrame 1,000×12\n" and output.kind == "table"
    assert output.table is not None
    assert output.table.startswith("*DataFrame 1,000×12 (first 2 of 1,000 rows, first 2 of 12")
    assert "|  | a | b\\|c |" in output.table  # a pipe in a name does not split the column
    assert "| *type* | *int64* | *object* |" in output.table
    assert "| **1** | 2 | y |" in output.table


def test_markdown_latex_and_json_keep_their_text_and_a_file(tmp_path: Path) -> None:
    files = OutputFiles(tmp_path)
    markdown = render({"text/markdown": "# Title\nbody"}, None, files)
    assert markdown.markdown == "# Title\nbody" and markdown.text.startswith("# Title")
    latex = render({"text/latex": "$x^2$", "text/plain": "<Math>"}, None, files)
    assert latex.kind == "latex" and latex.file is not None and latex.file.suffix == ".tex"
    data = render({"application/json": '{"a": [1, 2]}'}, None, files)
    assert data.text == '{"a":[1,2]}\n' and data.kind == "json"


def test_a_run_stores_up_to_its_limit_and_then_keeps_text_only(tmp_path: Path) -> None:
    files = OutputFiles(tmp_path, run_limit=150, folder_limit=10_000)
    first = render({"image/png": base64.b64encode(png(1, 1, 1)).decode()}, None, files)
    second = render({"image/png": base64.b64encode(png(2, 2, 2)).decode()}, None, files)
    assert first.image is not None and second.image is None
    assert second.text == "<image 2×2>\n"  # still said, not stored


def test_the_folder_keeps_its_limit_by_dropping_the_oldest(tmp_path: Path) -> None:
    old = OutputFiles(tmp_path, folder_limit=200).save(b"a" * 90, ".png")
    middle = OutputFiles(tmp_path, folder_limit=200).save(b"b" * 90, ".png")
    assert old is not None and middle is not None
    os.utime(old, (1, 1))  # the oldest
    newest = OutputFiles(tmp_path, folder_limit=200).save(b"c" * 90, ".png")
    assert newest is not None and newest.exists() and middle.exists()
    assert not old.exists()
    names = sorted(p.name for p in (tmp_path / FOLDER).iterdir())
    assert all(len(n.split(".")[0]) == 16 for n in names)  # runfix's names, not the kernel's


def test_terminal_colours_become_escaped_html_and_a_bar_ends_at_its_last_frame() -> None:
    red, bold_green, reset = "\x1b[31m", "\x1b[1;32m", "\x1b[0m"
    raw = f"{red}error{reset}: <b>&\n{bold_green} 10%\r 99%\r100%{reset} done\x1b[2K\x1b[?25l"
    assert colored_html(raw) == (
        '<span style="color:#cd3131">error</span>: &lt;b&gt;&amp;\n'
        '<span style="color:#0dbc79;font-weight:bold">100%</span> done'
    )
    assert colored_html("plain text\r over") is None  # no colour: the plain text serves
    # 256 colours and 24-bit colour, a background, and a style carried to the next line.
    assert colored_html("\x1b[38;5;196;48;2;0;0;255mx\ny\x1b[m") == (
        '<span style="color:#ff0000;background:#0000ff">x</span>\n'
        '<span style="color:#ff0000;background:#0000ff">y</span>'
    )


def test_the_view_shows_the_statement_under_the_cursor_else_its_cells(tmp_path: Path) -> None:
    lines = ["# %% a\n", "a = 1\n", "a\n", "print(a)\n", "# %% b\n", "b = 2\n", "\n"]
    shown = [
        StatementResult(2, 2, (Output("1\n"),), ("a",)),
        StatementResult(3, 3, (Output("1\n"),), ("print(a)",)),
    ]
    results = DocumentResults(statements=shown)
    assert statements_at(results, lines, 3) == (3, 3, [shown[1]])
    assert statements_at(results, lines, 1) == (0, 3, shown)  # a = 1 showed nothing: its cell
    assert statements_at(results, lines, 5) is None  # cell b has not shown anything
    # The empty line after the last newline is in the last cell.
    assert statements_at(results, lines[:4], 4) == (0, 3, shown)


def test_latest_images_are_the_folders_stored_images_newest_first(tmp_path: Path) -> None:
    files = OutputFiles(tmp_path)
    old, new = files.save(png(1, 1), ".png"), files.save(png(2, 2), ".png")
    assert old is not None and new is not None
    files.save(b"<p>", ".html")
    (tmp_path / FOLDER / "kernel-named.png").write_bytes(png(3, 3))  # not a name runfix made
    os.utime(old, (1, 1))
    assert latest_images(tmp_path, 10) == [new, old]
    assert latest_images(tmp_path, 1) == [new]
    assert latest_images(tmp_path / "nowhere", 10) == []


def test_a_malformed_png_header_shows_no_made_up_size() -> None:
    from lsp_server.outputs.bundles import _png_size

    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\x0dIHDR"
    assert _png_size(header + (640).to_bytes(4, "big") + (480).to_bytes(4, "big")) == "640×480"
    assert (
        _png_size(header + (2476854340).to_bytes(4, "big") + (3135205546).to_bytes(4, "big")) == ""
    )
    assert _png_size(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16) == ""  # no IHDR where it must be
