"""The VS Code extension, packaged, in a real VS Code (code-server) driven in headless
Chromium: open an example, run the cell from the command palette, and check what a user sees
— the result hint in the editor, the error in the Problems panel on the right line, the
kernel state in the status bar, a project's pyproject.toml setting honoured; and `input()`
answered in VS Code's input box; and the output panel with a plot and a DataFrame, where no
script of the kernel's HTML runs. The screenshots land in the test's output folder."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from executor.kernelspecs import find_spec
from tests.conftest import editor_missing, kernel_missing
from tests.editors.test_nvim import LIVE_DOC, notebook_written_by_neovim

ROOT = Path(__file__).parents[2]
VSCODE = ROOT / "editors" / "vscode"
CODE_SERVER = VSCODE / ".e2e" / "node_modules" / ".bin" / "code-server"
VSIX = VSCODE / "runfix.vsix"
EXAMPLE = """\
prices = {"tea": 3.5, "cake": 4.2}
print("total", sum(prices.values()))
prices["coffee"]
"""


R_EXAMPLE = "# %%\nx <- 4\nx * 5\n"


def _missing() -> str | None:
    if not CODE_SERVER.exists():
        return "code-server is not set up (scripts/editors sets it up under editors/vscode/.e2e)"
    if not VSIX.exists():
        return "the extension is not packaged (scripts/editors builds editors/vscode/runfix.vsix)"
    if shutil.which("chromium") is None:
        return "chromium is not installed (apt-get install chromium, or scripts/editors)"
    return None


def _code_server(
    tmp_path: Path,
    scenario: str,
    prepare: Callable[[Path], None] | None = None,
    more_env: dict[str, str] | None = None,
) -> tuple[dict[str, Any], Path]:
    """Run editors/vscode/test/e2e.mjs in one scenario (`prepare` fills the workspace
    folder first); its report and output folder."""
    if (why := _missing()) is not None:
        editor_missing(why)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    if prepare is not None:
        prepare(workspace)
    (workspace / "example.py").write_text(EXAMPLE)
    (workspace / "ask.py").write_text("name = input('Your name? ')\nf'Hello, {name}'\n")
    (workspace / "analysis.R").write_text(R_EXAMPLE)
    # A project setting reaches the server through VS Code (which must not send its defaults
    # over it): values show in the Problems panel too.
    (workspace / "pyproject.toml").write_text('[tool.runfix]\nresults = "both"\n')
    out = tmp_path / "vscode"
    out.mkdir()
    runfix = Path(sys.executable).parent / "runfix"
    env = {
        **os.environ,
        "RUNFIX_E2E_SCENARIO": scenario,
        "RUNFIX_E2E_WORKSPACE": str(workspace),
        "RUNFIX_E2E_OUT": str(out),
        "RUNFIX_E2E_VSIX": str(VSIX),
        "RUNFIX_E2E_RUNFIX": str(runfix),
        "RUNFIX_E2E_PYTHON": sys.executable,
        **({"RUNFIX_E2E_R": "1"} if find_spec(("r",)) is not None else {}),
        **(more_env or {}),
    }
    # Each scenario's budget covers its own waits, so that a slow step still leaves a report.
    timeout = {
        "live-model": 900,
        "install": 900,
        "notebook": 600,
        "first-hour": 600,
        "held": 600,
    }.get(scenario, 300)
    subprocess.run(
        ["node", str(VSCODE / "test" / "e2e.mjs")], env=env, timeout=timeout, check=False
    )
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report, out


@pytest.mark.timeout(360)
def test_run_cell_from_the_palette_in_code_server(tmp_path: Path) -> None:
    report, out = _code_server(tmp_path, "main")
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    shots = (
        "vscode.png",
        "vscode-input.png",
        "vscode-output.png",
        "vscode-completion.png",
        "vscode-r.png",
        "failure.png",
    )
    for name in (*shots, "report.json", "code-server.log"):
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    assert "error" not in report, report["error"]
    assert report["installed"] is True, report["installed"]
    assert report["hint"], report.get("editorText")
    assert report["problem"], report.get("problems")
    assert "KeyError: 'coffee'" in report["problems"]
    assert "[Ln 3, Col 1]" in report["problems"]  # the raising line
    assert "total 7.7" in report["problems"]  # results = "both" from pyproject.toml
    assert report["idle"] and "runfix: idle · kernel" in report["statusBar"]
    assert (out / "vscode.png").stat().st_size > 10_000
    assert report["asked"], "no input box for input()"
    assert report["answered"], "the answer did not reach the code"

    # The output panel opened by itself (runfix.openOutput: always) on the plotting cell.
    panel = report["panel"]
    assert report["panel"], f"no output panel with the plot and the table: {panel}"
    assert "plots.py, lines 1–5" in panel["text"]
    assert "<figure 640×480>" in panel["text"] and "DataFrame 2×2" in panel["text"]
    assert any(width > 100 for width in panel["images"]), panel  # the plot, loaded
    frames = "\n".join(panel["frameTexts"])
    assert "Lima" in frames and "19.5" in frames, frames  # the DataFrame's table
    # It followed the cursor to the next cell, whose HTML's scripts did not run.
    assert report["followed"], report["canary"]
    canary = report["canary"]
    assert "plots.py, lines 6–8" in canary["text"]
    assert canary["frameTexts"] == ["no script ran"], canary
    # runfix: Show History lists the file's runs, newest first; Enter reveals the newest.
    assert report["history"], report.get("historyRows")
    rows = report["historyRows"]
    assert rows.index("plots.py:7") < rows.index("plots.py:2"), rows
    assert "user" in rows and "CPU" in rows
    assert report["revealed"], "the chosen run's code was not revealed"
    assert report["calls"] == [], "a kernel script ran and called out"
    # Typing `df["` in a file whose DataFrame ran: the suggest widget lists its columns.
    assert report["suggested"], report.get("suggestText")
    assert "qty" in report["suggestText"] and "kernel" in report["suggestText"]
    # Another language: an R file's value on its line (checked last, so that the Python
    # steps are checked where no R kernel is installed).
    if find_spec(("r",)) is None:
        kernel_missing("no R kernel (IRkernel): scripts/kernels installs one")
    assert report["rHint"], report.get("rText")


@pytest.mark.timeout(360)
def test_setting_runfix_path_after_it_was_not_found_starts_the_server(tmp_path: Path) -> None:
    """No runfix to be found: the extension says so; the user clicks "Open Settings", types
    runfix.path into the Settings UI while the window is open, and Run Cell works."""
    report, _ = _code_server(tmp_path, "path-later")
    assert "error" not in report, report["error"]
    assert report["notFound"], "no 'not found' notification"
    assert report["pathSet"], "runfix.path could not be typed into the Settings UI"
    assert report["idle"], "the server did not start after runfix.path was set"
    assert report["hint"], report.get("editorText")


@pytest.mark.timeout(360)
def test_restricted_mode_runs_nothing_of_a_hostile_repository(tmp_path: Path) -> None:
    """Workspace Trust on and the folder not trusted: opening its file runs nothing it ships
    (its `.venv` python, `.pth`, a shadowing launcher), and Run Cell says why."""
    from tests.e2e.test_trust import hostile

    marks: list[Path] = []

    def prepare(workspace: Path) -> None:
        marks.append(hostile(workspace))
        (workspace / "venv.py").write_text(f"open({str(marks[0] / 'venv')!r}, 'w').close()\n")
        (workspace / ".venv" / "bin" / "python3").symlink_to("python")

    # The folder's .venv/bin first on PATH, as an activated shell would have it.
    path = f"{tmp_path / 'workspace' / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"
    report, out = _code_server(tmp_path, "restricted", prepare, {"PATH": path})
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    if (out / "vscode-restricted.png").exists():
        shutil.copy(out / "vscode-restricted.png", saved / "vscode-restricted.png")
    assert "error" not in report, report["error"]
    assert report["opened"], report
    assert report["restrictedSaid"], "Run Cell did not say the workspace must be trusted"
    assert "runfix: idle" not in report["statusBar"]
    # Issue 47 S3 11: "Install runfix" before trust is refused, and runs nothing of the folder.
    assert "trusted workspace" in report["installBeforeTrust"], report["installBeforeTrust"]
    assert not list((out / "user-data" / "User" / "globalStorage").glob("*/runfix-venv"))
    assert list(marks[0].iterdir()) == []


@pytest.mark.timeout(1000)
def test_run_and_fix_and_generate_with_a_real_model_in_code_server(
    tmp_path: Path, live_model: Any
) -> None:
    """VS Code against the real small model (issue 35): Run and Fix on the cell that calls
    a broken function, then Generate from Prompt. Where the fix and the code land is
    runfix's; whether the model gets them right is the model's: the screenshot shows it."""
    model = {f"runfix.model.{k}": v for k, v in live_model.options()["model"].items()}

    def prepare(workspace: Path) -> None:
        (workspace / "sales.py").write_text(LIVE_DOC)

    report, out = _code_server(
        tmp_path, "live-model", prepare, {"RUNFIX_E2E_MODEL": json.dumps(model)}
    )
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in ("vscode-live-model.png", "failure.png", "report.json", "code-server.log"):
        if (out / name).exists():
            shutil.copy(out / name, saved / (name if "live" in name else f"live-{name}"))
    assert "error" not in report, report["error"]
    shown = report["editorText"].replace("\u00a0", " ")
    assert "print(round(average(sales), 2))" in shown  # the call is never rewritten
    assert "ai: print the largest value in sales" in shown
    assert shown.count("# %%") == 3  # no cell split off the prompt
    assert (out / "vscode-live-model.png").stat().st_size > 10_000


@pytest.mark.timeout(660)
def test_a_held_candidate_shows_as_a_diff_and_a_fix_says_what_it_now_prints_in_code_server(
    tmp_path: Path,
) -> None:
    """Issue 59: the model's first candidate silences the error — the file stays as it is
    and the notification names the rule and shows the change as a diff; the second is a
    fix, and the notification says what the code now prints."""
    from tests.conftest import API_KEY_ENV
    from tests.support.model_server import ModelServer, code

    source = 'unique = set(["c", "a", "b", "a"])\n# %%\nprint("first", unique[0])\n'

    def prepare(workspace: Path) -> None:
        (workspace / "first.py").write_text(source)

    with ModelServer() as model:
        model.script(code('print("first", unique)'), code('print("first", sorted(unique)[0])'))
        settings = {
            "runfix.model.baseUrl": model.url,
            "runfix.model.candidates": 1,  # one answer a request: the replies are scripted in order
            "runfix.model.name": "test-model",
            "runfix.model.apiKeyEnv": API_KEY_ENV,
            "runfix.fix.maxAttempts": 1,
        }
        report, out = _code_server(
            tmp_path, "held", prepare, {"RUNFIX_E2E_MODEL": json.dumps(settings)}
        )
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in ("vscode-held.png", "vscode-fixed-says.png"):
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    assert "error" not in report, report["error"]
    assert report["held"] and report["fixed"], report
    held = report["heldToast"].replace("\u00a0", " ")
    assert "removes the operation that raised (`unique[0]`)" in held, held
    assert '-print("first", unique[0])' in held and '+print("first", unique)' in held, held
    assert "unique[0]" in report["heldText"].replace("\u00a0", " ")
    assert "it now prints `first a`" in report["fixedToast"], report["fixedToast"]
    assert "sorted(unique)[0]" in report["editorText"].replace("\u00a0", " ")


@pytest.mark.timeout(960)
def test_with_no_runfix_anywhere_the_extension_installs_its_own(tmp_path: Path) -> None:
    """Issue 39: a fresh profile, no runfix.path, no .venv in the workspace, none on PATH: the
    notification offers "Install runfix", which makes a venv in the extension's storage with
    python3, installs the wheel the .vsix carries (its packages from the index), starts it,
    and a cell's result shows on its line."""
    report, out = _code_server(tmp_path, "install")
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in ("vscode-installing.png", "vscode-installed.png", "failure.png", "report.json"):
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    assert "error" not in report, report["error"]
    assert report["notFound"], "no 'not found' notification offering the install"
    assert report["progress"], "no progress while installing"
    assert report["idle"], "the server did not start after the install"
    assert report["hint"], report.get("editorText")
    storage = out / "user-data" / "User" / "globalStorage"
    assert list(storage.glob("*/runfix-venv/bin/runfix")), (
        "not installed in the extension's storage"
    )
    # Issue 46: code-server stopped by SIGTERM and started again, twice: runfix starts at once,
    # not reinstalled (the marker is a file beside the environment, not globalState).
    assert [r["idle"] for r in report["restarts"]] == [True, True], report["restarts"]
    for restart in report["restarts"]:
        assert "updating runfix" not in restart["notifications"], restart
    logs = [f.read_text() for f in (out / "user-data" / "logs").rglob("*runfix*.log")]
    assert sum(log.count("runfix: installed runfix_lsp") for log in logs) == 1, logs
    assert list(storage.glob("*/runfix-venv.installed"))


@pytest.mark.timeout(720)
def test_a_notebook_runs_in_the_runfix_kernel_and_is_fixed_in_code_server(tmp_path: Path) -> None:
    """Issue 49: a Jupyter notebook in VS Code with only runfix's extension: the runfix kernel
    in the picker, Run All → text, a plot and an error land in their cells; Run and Fix on
    the cell that calls another cell's broken function → that cell is edited (a scripted
    model's answer, over HTTP), the caller unchanged."""
    import nbformat
    from nbformat import v4

    from tests.conftest import API_KEY_ENV
    from tests.support.model_server import ModelServer, code

    def prepare(workspace: Path) -> None:
        nb = v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nb.metadata["language_info"] = {"name": "python"}
        nb.cells = [
            v4.new_markdown_cell("# Prices"),
            v4.new_code_cell("prices = [3, 4, 5]\nprint('n =', len(prices))"),
            v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot(prices)\nplt.show()"),
            v4.new_code_cell("total = sum(prices)\ntotal"),
            v4.new_code_cell("def mean(xs):\n    return sum(xs) / count"),
            v4.new_code_cell("mean(prices)"),
        ]
        nbformat.write(nb, workspace / "analysis.ipynb")
        # a notebook Neovim opened, ran, fixed and wrote (`:w`): VS Code opens it with its outputs
        nvim = shutil.which("nvim")
        if nvim is None:
            editor_missing("nvim is not installed (scripts/editors): it writes the notebook")
        elsewhere = tmp_path / "neovim"
        elsewhere.mkdir()
        written = notebook_written_by_neovim(nvim, elsewhere, elsewhere / "sales.ipynb")
        assert written.get("clean"), written
        shutil.copy(elsewhere / "sales.ipynb", workspace / "from-neovim.ipynb")

    with ModelServer() as model:
        model.script(code("def mean(xs):\n    return sum(xs) / len(xs)"))
        settings = {
            "runfix.model.baseUrl": model.url,
            "runfix.model.candidates": 1,  # one answer a request: the replies are scripted in order
            "runfix.model.name": "test-model",
            "runfix.model.apiKeyEnv": API_KEY_ENV,
        }
        report, out = _code_server(
            tmp_path, "notebook", prepare, {"RUNFIX_E2E_MODEL": json.dumps(settings)}
        )
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    shots = (
        "vscode-notebook.png",
        "vscode-notebook-stale.png",
        "vscode-notebook-fixed.png",
        "vscode-notebook-agent.png",
        "vscode-notebook-edited.png",
        "vscode-notebook-from-neovim.png",
    )
    for name in (*shots, "failure.png"):
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    for name in ("report.json", "code-server.log"):
        if (out / name).exists():
            shutil.copy(out / name, saved / f"notebook-{name}")
    assert "error" not in report, report["error"]
    assert report["kernelPicked"], report["steps"]
    # Run All, then saved by VS Code's own serializer: each cell's outputs in the file
    ran = report["savedAfterRun"]
    assert report["notebookOutputs"], ran
    outputs = [c.get("outputs", []) for c in ran["cells"]]
    text = [
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for o in itertools.chain(*outputs)
    ]
    assert any("n = 3" in t for t in text) and any("12" in t for t in text), outputs
    assert any("image/png" in o.get("data", {}) for o in outputs[2]), outputs[2]  # the plot
    assert [o["output_type"] for o in outputs[5]] == ["error"], outputs[5]
    assert "NameError" in outputs[5][0]["ename"] + outputs[5][0]["evalue"]
    # … what nbclient saves for the same notebook: output types, texts, counts, and the
    # traceback's frames as IPython names them (issue 70)
    from tests.support.notebooks import as_jupyter_saves, cells

    vscode_saved = nbformat.reads(json.dumps(ran), as_version=4)
    assert cells(vscode_saved) == cells(as_jupyter_saves(vscode_saved, allow_errors=True))
    assert report["notebookImages"] >= 1, "the plot was not shown in its cell"
    # An edit in the first code cell marks the values below it stale, on their cells
    assert report["notebookStale"], report.get("staleCells")
    # Run and Fix from the caller: the function's cell edited, the caller unchanged
    assert report["notebookFixed"], report.get("savedAfterFix")
    sources = ["".join(c["source"]) for c in report["savedAfterFix"]["cells"]]
    assert sources[4] == "def mean(xs):\n    return sum(xs) / len(xs)", sources
    assert sources[5] == "mean(prices)", sources
    # … and the caller's cell shows what that run gave (a run the kernel did not start)
    assert report["callerShown"], report["savedAfterFix"]["cells"][5]
    # An agent's run of a cell (allowed in VS Code's notification) lands in that cell
    assert report["agentAllowed"], report.get("agentAnswer")
    assert json.loads(report["agentAnswer"])["status"] == "ok", report["agentAnswer"]
    assert report["agentShown"], report["savedAfterAgent"]["cells"][1]
    # Twenty structural edits from the palette: every cell shows what it showed, and what
    # a fresh run of the notebook shows
    assert report["structuralEdits"] == 20
    firsts = [[kind, source.split("\n")[0]] for kind, source in report["orderAfterEdits"]]
    assert firsts == [
        ["markdown", "# Prices"],
        ["code", "prices = [3, 4, 5, 6]"],
        ["code", "import matplotlib.pyplot as plt"],
        ["code", "def mean(xs):"],
        ["code", "total = sum(prices)"],  # split, then joined again
        ["code", "mean(prices)"],
    ], report["editTrace"]
    before, edited, fresh = (
        report["cellsBefore"],
        report["cellsAfterEdits"],
        report["cellsAfterRun"],
    )
    assert any("→ 18" in text for text in before), before  # (what a cell's hint looks like)
    assert sorted(edited) == sorted(before), (before, edited)
    assert edited == fresh, (edited, fresh)
    # The notebook Neovim wrote opens with its outputs
    assert report["neovimOutputsShown"], report["steps"]


@pytest.mark.timeout(600)
def test_a_notebook_users_first_hour_in_code_server(tmp_path: Path) -> None:
    """Issue 61: in VS Code with only runfix's extension — a 6-row DataFrame's cell saved
    with pandas' own text/html and its execution count; the preferred quick fix of a
    NameError whose name a cell above defines runs that cell (no model asked); Run and Fix
    asked on the error's line in the defining cell fixes it; Generate and run in a one-line
    prompt cell writes and runs the code in that cell. Screenshots of each."""
    import nbformat
    from nbformat import v4

    from tests.conftest import API_KEY_ENV
    from tests.support.model_server import ModelServer, code

    def prepare(workspace: Path) -> None:
        nb = v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        # no `language_info` (nbformat's, or a kernelspec alone): VS Code's ipynb serializer
        # then saved every count as null (issue 70, 4) until runfix's kernel names it
        nb.cells = [
            v4.new_code_cell(
                "import pandas as pd\ndf = pd.DataFrame({'month': range(6), 'units': range(6)})\ndf"
            ),
            v4.new_code_cell("total = 3"),
            v4.new_code_cell("total * 2"),
            v4.new_code_cell("def mean(xs):\n    return sum(xs) / count"),
            v4.new_code_cell("print(mean([2, 4]))"),
            v4.new_code_cell("# ai: twice the units of df, summed"),
        ]
        nbformat.write(nb, workspace / "first.ipynb")

    with ModelServer() as model:
        model.script(
            code("def mean(xs):\n    return sum(xs) / len(xs)"),
            # (it starts a process: asked first, in a dialog that stays — issue 70, 3)
            code("import subprocess\nsubprocess.run(['true'])\nprint((df.units * 2).sum())"),
        )
        settings = {
            "runfix.model.baseUrl": model.url,
            "runfix.model.candidates": 1,  # one answer a request: the replies are scripted in order
            "runfix.model.name": "test-model",
            "runfix.model.apiKeyEnv": API_KEY_ENV,
        }
        report, out = _code_server(
            tmp_path, "first-hour", prepare, {"RUNFIX_E2E_MODEL": json.dumps(settings)}
        )
        asked = len(model.requests)
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in [p.name for p in out.glob("vscode-first-hour-*.png")] + ["failure.png"]:
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    if (out / "report.json").exists():
        shutil.copy(out / "report.json", saved / "first-hour-report.json")
    assert "error" not in report, report["error"]
    frame = report["savedFrame"]
    [value] = [o for o in frame["outputs"] if o["output_type"] == "execute_result"]
    assert "text/html" in value["data"] and "<table" in "".join(value["data"]["text/html"])
    assert "".join(value["data"]["text/plain"]).splitlines()[-1].split() == ["5", "5", "5"]
    assert frame["execution_count"] == value["execution_count"] == 1  # the kernel's count
    assert report["savedLanguage"] == {"name": "python"}, report["savedLanguage"]
    # … the same outputs Jupyter saves for the cell (nbclient runs it: nbconvert's engine)
    from tests.support.notebooks import as_jupyter_saves, notebook

    jupyter = as_jupyter_saves(notebook(v4.new_code_cell("".join(frame["source"]))))
    [expected] = jupyter.cells[0].outputs

    def said(output: dict[str, Any]) -> tuple[str, Any, list[str], str]:
        data = output["data"]
        return (
            output["output_type"],
            output.get("execution_count"),
            sorted(data),
            "".join(data["text/plain"]),
        )

    assert said(value) == said(expected)
    assert report["aboveOffered"] and report["aboveFixed"], report["savedAbove"]
    assert report["whereOffered"] and report["whereFixed"], report["savedWhere"]
    assert report["savedWhere"][1] == "print(mean([2, 4]))"  # the caller unchanged
    assert report["generateOffered"] and report["generated"], report["savedGenerated"]
    generated = "".join(report["savedGenerated"]["source"])
    assert generated.startswith("# ai: twice the units of df, summed\n"), generated
    assert "starts a process" in report["flaggedAsked"], report["flaggedAsked"]
    assert "Run it in the local kernel?" in report["flaggedAsked"], report["flaggedAsked"]
    assert asked == 2  # the fix of the defining cell and Generate; the NameError none


@pytest.mark.timeout(400)
def test_test_failures_show_in_the_problems_panel_of_code_server(tmp_path: Path) -> None:
    """Issue 50: a project's test file in VS Code: ▶ Run tests lenses, and "runfix: Run
    Tests" puts each failure in the Problems panel on the test's line (pytest's compared
    values) and on the module's line that raised. Screenshot `vscode-tests.png`."""
    from tests.kernel.test_cli_tests import STATS, TESTS

    def prepare(workspace: Path) -> None:
        (workspace / "pkg").mkdir()
        (workspace / "tests").mkdir()
        (workspace / "pkg" / "__init__.py").write_text("")
        (workspace / "pkg" / "stats.py").write_text(STATS)
        (workspace / "tests" / "test_stats.py").write_text(TESTS)

    report, out = _code_server(tmp_path, "tests", prepare)
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in ("vscode-tests.png", "failure.png"):
        if (out / name).exists():
            shutil.copy(out / name, saved / name)
    assert "error" not in report, report["error"]
    assert report["lenses"] and report["lenses"][0] == "▶ Run tests", report["lenses"]
    assert report["testProblems"], report.get("problems")
    problems = report["problems"]
    assert "test_mean failed: AssertionError: assert 2.0 == 3" in problems, problems
    assert "where 2.0 = mean([2, 4])" in problems
    assert "ZeroDivisionError: division by zero (in ratio, when test_ratio_of_zero ran)" in problems


@pytest.mark.timeout(360)
def test_debug_cell_stops_at_a_breakpoint_in_another_cells_function_in_code_server(
    tmp_path: Path,
) -> None:
    """Issue 60: a breakpoint in the function one cell defines, the "Debug cell" lens of the
    cell that calls it: VS Code stops there (runfix's debug adapter, the folder's kernel) with
    the Variables view; continue, and the run's result lands on its line."""
    source = (
        "# %% defs\ndef total(rows):\n    s = 0\n    for r in rows:\n"
        '        s += r["price"] * r["qty"]\n    return s\n'
        '# %% call\nrows = [{"price": 2.0, "qty": 3}, {"price": 1.5, "qty": 2}]\n'
        'print("total", total(rows))\n'
    )

    def prepare(workspace: Path) -> None:
        (workspace / "debugged.py").write_text(source)

    report, out = _code_server(tmp_path, "debug", prepare)
    saved = VSCODE / "test-output"
    saved.mkdir(exist_ok=True)
    for name in ("vscode-debug.png", "vscode-debug-done.png", "report.json"):
        if (out / name).exists():
            shutil.copy(out / name, saved / ("debug-" + name if name == "report.json" else name))
    assert "error" not in report, report["error"]
    assert report["lenses"] == 2, report
    assert report["stopped"], report
    assert "rows" in report["variables"] and "s" in report["variables"], report["variables"]
    assert report["stoppedLine"] >= 1, report
    assert report["landed"], report.get("editorText")
