"""End to end, on a real kernel with pandas and matplotlib: what a cell shows comes back as a
short hint, a hover a client can render, and files runfix names and bounds."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_server.contract import OUTPUTS, SHOW_OUTPUT
from tests.conftest import command_at, hints, hover_text, init_params, open_doc, run

CELLS = """\
# %% a plot
import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
# %% a DataFrame
import pandas as pd
df = pd.DataFrame({"n": range(1000), "name|x": [f"row {i}" for i in range(1000)]})
df
# %% HTML and SVG
from IPython.display import HTML, SVG, display
display(HTML("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"))
SVG('<svg xmlns="http://www.w3.org/2000/svg" width="80" height="20"><rect width="8"/></svg>')
# %% a progress bar
for i in range(5):
    print(f"\\rloading {i * 25}%", end="")
print()
"""


async def test_plots_tables_html_svg_and_progress_bars(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "analysis.py", CELLS)
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer

    labels = {h.position.line: h.label for h in await hints(initialized, uri)}
    assert labels[2] == "→ <figure 640×480>"
    assert labels[6] == "→ DataFrame 1,000×2"
    assert labels[9] == "→ <html table 1×2>"
    assert labels[10] == "→ <svg 80×20>"
    assert labels[13] == "→ loading 100%"  # the bar's last frame, at the end of its loop

    plot = await hover_text(initialized, uri, 2)
    stored = folder / ".runfix" / "outputs"
    [png] = stored.glob("*.png")
    assert f"![<figure 640×480>]({png.as_uri()})" in plot
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    table = await hover_text(initialized, uri, 6)
    assert table.startswith("*DataFrame 1,000×2 (first 5 of 1,000 rows)*")
    assert "|  | n | name\\|x |" in table
    assert "| *type* | *int64* |" in table
    assert "| **4** | 4 | row 4 |" in table
    [html] = [p for p in stored.glob("*.html") if "dataframe" in p.read_text()]
    assert "row 999" in html.read_text()  # the whole table is kept, the hover shows its head

    svg = await hover_text(initialized, uri, 10)
    [svg_file] = stored.glob("*.svg")
    assert f"({svg_file.as_uri()})" in svg


async def test_rich_outputs_past_the_run_limit_are_said_but_not_stored(
    client: LanguageClient, folder: Path
) -> None:
    params = init_params(folder, options={"outputs": {"maxRunMB": 0}})
    await client.initialize_session(params)
    text = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
    uri = open_doc(client, folder / "plot.py", text)
    assert (await run(client, uri))["status"] == "ok"

    assert [h.label for h in await hints(client, uri)] == ["→ <figure 640×480>"]
    assert not list((folder / ".runfix" / "outputs").glob("*.png"))
    assert "![" not in await hover_text(client, uri, 1)


async def test_show_output_opens_a_local_page_with_the_plot(
    initialized: LanguageClient, folder: Path
) -> None:
    """What an eglot, Helix or Zed user gets: the client is asked to open a loopback page
    that shows the statement's figure, served by the server."""
    uri = open_doc(
        initialized, folder / "plot.py", "import matplotlib.pyplot as plt\nplt.plot([3, 1])\n"
    )
    assert (await run(initialized, uri))["status"] == "ok"

    position = {"line": 1, "character": 0}
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(SHOW_OUTPUT, [{"uri": uri, "position": position}])
    )
    [shown] = initialized.shown_documents  # the test client says yes
    assert answer["shown"] is True and shown.uri == answer["url"] and shown.external
    assert answer["url"].startswith("http://127.0.0.1:")

    def fetch(url: str) -> tuple[int, bytes]:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()

    status, page = await asyncio.to_thread(fetch, answer["url"])
    assert status == 200 and b"plot.py, line 2" in page
    [png] = (folder / ".runfix" / "outputs").glob("*.png")
    image = re.search(rb"<img src='([^']+)' alt='&lt;figure 640\xc3\x97480&gt;'>", page)
    assert image is not None
    base = answer["url"].split("/view")[0].rsplit("/", 1)[0]
    status, served = await asyncio.to_thread(fetch, base + image.group(1).decode())
    assert status == 200 and served == png.read_bytes()


async def _until(check: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not in time")


async def test_the_output_view_follows_the_cursor_and_hears_of_new_plots(
    client: LanguageClient, folder: Path
) -> None:
    """What VS Code's panel and Neovim's float ask for (`runfix.outputs`): the statement
    under the cursor, else its cell's; and `runfix/outputs` when a run made a plot."""
    params = init_params(folder)
    params.capabilities.experimental = {"runfixOutputs": True}
    await client.initialize_session(params)
    text = (
        "# %% a plot\n"
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 3, 2])\n"
        "# %% colour\n"
        'print("\\x1b[31mred\\x1b[0m and <plain>")\n'
        "x = 1\n"
    )
    uri = open_doc(client, folder / "view.py", text)
    before = await command_at(client, OUTPUTS, uri, 2)
    assert before["first"] is None and before["outputs"] == [] and before["images"] == []
    assert (await run(client, uri))["status"] == "ok"
    await _until(lambda: client.outputs_changed)
    assert client.outputs_changed == [{"uri": uri, "rich": [2]}]

    plot = await command_at(client, OUTPUTS, uri, 2)
    [png] = (folder / ".runfix" / "outputs").glob("*.png")
    assert (plot["first"], plot["last"]) == (2, 2)
    line2d, figure = plot["outputs"]  # what plt.plot returned, then the figure it drew
    assert line2d["kind"] == "text" and "Line2D" in line2d["text"]
    assert figure["kind"] == "figure" and figure["text"] == "<figure 640×480>\n"
    assert figure["image"] == str(png) and plot["images"] == [str(png)]
    assert plot["outputsDir"] == str(folder / ".runfix" / "outputs")

    # A line with no output of its own (x = 1): its cell's outputs, colours kept as HTML.
    cell = await command_at(client, OUTPUTS, uri, 5)
    assert (cell["first"], cell["last"]) == (3, 5)
    [printed] = cell["outputs"]
    assert printed["text"] == "red and <plain>\n"
    assert printed["colored"] == '<span style="color:#cd3131">red</span> and &lt;plain&gt;\n'


async def test_the_run_limit_is_for_the_whole_run_not_each_cell(
    client: LanguageClient, folder: Path
) -> None:
    """Two cells of 20 KB of SVG each, 30 KB allowed a run: a whole-file run stores the
    first and says the second in text only."""
    params = init_params(folder, options={"outputs": {"maxRunMB": 30 / 1024}})
    await client.initialize_session(params)
    cell = (
        "# %%\nfrom IPython.display import SVG\n"
        'SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="{n}" height="9">\''
        " + '<!-- -->' * 2500 + '</svg>')\n"
    )
    uri = open_doc(client, folder / "two.py", cell.format(n=1) + cell.format(n=2))
    assert (await run(client, uri))["status"] == "ok"
    assert [h.label for h in await hints(client, uri)] == ["→ <svg 1×9>", "→ <svg 2×9>"]
    [stored] = (folder / ".runfix" / "outputs").glob("*.svg")
    assert 'width="1"' in stored.read_text()
