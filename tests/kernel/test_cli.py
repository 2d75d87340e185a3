"""`runfix run` and `runfix doctor` as a user runs them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.remote_server import TOKEN, TOKEN_ENV, JupyterServer

RUNFIX = [sys.executable, "-m", "lsp_server"]
EXAMPLE = Path(__file__).parents[2] / "examples" / "demo.py"


def runfix(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RUNFIX, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_run_prints_compiler_style_lines_and_fails_on_an_error() -> None:
    done = runfix("run", str(EXAMPLE))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"{EXAMPLE}:9:1: note: total 10.5" in lines
    assert f"{EXAMPLE}:12:1: note: 18.84955592153876" in lines
    assert f"{EXAMPLE}:16:5: error: KeyError: 'coffee'" in lines
    assert f"{EXAMPLE}:19:1: note: called from here" in lines


def test_run_one_cell_that_passes_exits_zero(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("# %%\nprint('first')\n# %%\n1/0\n")
    done = runfix("run", "s.py", "--cell", "1", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["s.py:2:1: note: first"]
    assert runfix("run", "s.py", "--cell", "3", cwd=tmp_path).returncode == 2


def test_run_dependents_of_a_line_runs_the_cells_up_to_it_then_its_readers(
    tmp_path: Path,
) -> None:
    script = tmp_path / "s.py"
    script.write_text(
        "# %%\nrate = 2\n# %%\nprint('b', rate)\n# %%\nprint('c')\n# %%\nprint('d', rate)\n"
    )
    done = runfix("run", "s.py", "--dependents-of", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["s.py:4:1: note: b 2", "s.py:8:1: note: d 2"]
    assert runfix("run", "s.py", "--dependents-of", "99", cwd=tmp_path).returncode == 2


def test_run_timeout_is_reported(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import time\ntime.sleep(30)\n")
    done = runfix("run", str(script), "--timeout", "1")
    assert done.returncode == 1
    assert f"{script}:2:1: warning: Timed out after 1s" in done.stdout


def test_doctor_reports_a_missing_ipykernel(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tmp_path / ".venv")], check=True
    )
    done = runfix("doctor", str(tmp_path))
    assert done.returncode == 1
    assert "ipykernel:      MISSING" in done.stdout
    assert "-m pip install ipykernel" in done.stdout


def test_doctor_starts_a_kernel(tmp_path: Path) -> None:
    done = runfix("doctor", str(tmp_path))
    assert done.returncode == 0, done.stdout
    assert "kernel start:" in done.stdout


def _sandboxed_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    project.chmod(0o777)  # the sandbox's user (nobody, when the tests run as root) enters it
    (project / "pyproject.toml").write_text('[tool.runfix]\nexecutor = "docker"\n')
    return project


@pytest.mark.docker
def test_doctor_reports_the_engine_the_image_and_a_container_start(
    tmp_path: Path, sandbox_image: str
) -> None:
    done = runfix("doctor", str(_sandboxed_project(tmp_path)))
    assert done.returncode == 0, done.stdout
    assert "executor:       docker" in done.stdout
    assert "docker:         engine " in done.stdout
    assert f"sandbox image:  {sandbox_image} (" in done.stdout
    assert "container start:" in done.stdout


@pytest.mark.docker
def test_run_headless_in_the_sandbox(tmp_path: Path, sandbox_image: str) -> None:
    project = _sandboxed_project(tmp_path)
    (project / "s.py").write_text("import os\nprint(os.getcwd(), os.getuid() != 0)\n")
    done = runfix("run", "s.py", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["s.py:2:1: note: /workspace True"]


@pytest.mark.remote
def test_doctor_and_run_on_a_remote_server(tmp_path: Path, jupyter_server: JupyterServer) -> None:
    where = ["--remote", jupyter_server.url, "--token-env", TOKEN_ENV]
    before = jupyter_server.kernels()

    done = runfix("doctor", str(tmp_path), *where)

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"remote:         {jupyter_server.url}  (token from {TOKEN_ENV} (set))" in done.stdout
    assert "server:         Jupyter Server (server API 2." in done.stdout
    assert "round trip:" in done.stdout
    assert TOKEN not in done.stdout + done.stderr
    script = tmp_path / "s.py"
    script.write_text(f"import os\nprint(os.getcwd() == os.path.realpath({str(tmp_path)!r}))\n")
    ran = runfix("run", str(script), *where)
    assert ran.stdout.splitlines() == [f"{script}:2:1: note: False"]  # it ran over there
    assert jupyter_server.kernels() == before  # neither left a kernel behind
    refused = runfix("doctor", str(tmp_path), "--remote", jupyter_server.url)
    assert refused.returncode == 1
    assert "refused runfix (HTTP 403)" in refused.stdout
    assert "set runfix's remote.tokenEnv" in refused.stdout


def test_a_syntax_error_in_a_later_cell_has_its_own_column(tmp_path: Path) -> None:
    """Python reads a SyntaxError's line from the file on disk by the cell's own line number
    (the file's line 1, here `# %%`) and clamps the column to it: the cell is parsed under a
    name that is no file."""
    script = tmp_path / "later.py"
    script.write_text("# %%\nx = 1\n\n# %%\ntotal = 3 -* 4\n")
    done = runfix("run", str(script))
    assert f"{script}:5:12: error: SyntaxError: invalid syntax" in done.stdout, done.stdout


def _sigint_as_usual() -> None:
    """In a child: Ctrl-C as a terminal's is (a suite started in the background by a
    non-interactive shell hands its children SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_says_interrupted_once_and_exits_130_and_the_run_is_in_history(
    tmp_path: Path,
) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    process = subprocess.Popen(
        [*RUNFIX, "run", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_sigint_as_usual,
    )  # fmt: skip
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "started" not in (process.stdout.readline() or ""):
        pass
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert err.strip() == "runfix: interrupted", err
    # Issue 39: the interrupted run was missing from history; it is there, as it ended.
    shown = json.loads(runfix("history", str(script), "--json").stdout)
    assert [(r["first"], r["status"]) for r in shown] == [(1, "cancelled")], shown


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "the file is empty"),
        ("not json", "not JSON"),
        ('{"metadata": {}}', "not a notebook"),
        ('{"nbformat": 3, "worksheets": []}', "nbformat 3"),
    ],
)
def test_import_of_what_is_not_a_notebook_is_one_clear_line(
    tmp_path: Path, content: str, why: str
) -> None:
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(content)
    done = runfix("import", str(notebook))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and why in done.stderr, done.stderr
    assert not (tmp_path / "nb.py").exists()


def test_export_makes_a_missing_folder_and_like_import_never_overwrites(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("# %%\n1 + 1\n")
    target = tmp_path / "missing" / "dir" / "s.ipynb"
    assert runfix("export", str(script), "-o", str(target)).returncode == 0
    again = runfix("export", str(script), "-o", str(target))
    assert again.returncode == 2 and "--force" in again.stderr  # a mistake in what was asked
    assert runfix("export", str(script), "-o", str(target), "--force").returncode == 0


def test_doctor_on_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    done = runfix("doctor", str(tmp_path / "missing"))
    assert done.returncode == 2 and "is not a folder" in done.stderr


def test_help_texts_say_what_each_command_takes() -> None:
    top = runfix("--help").stdout
    assert "exit status" in top and "130" in top
    assert "(# %)" not in top
    assert "`# %%` lines split it into cells" in runfix("run", "--help").stdout


def test_history_json_is_one_array_as_its_help_says(tmp_path: Path) -> None:
    said = " ".join(runfix("history", "--help").stdout.split())
    assert "as one JSON array of runs, newest first" in said, said
    script = tmp_path / "two.py"
    script.write_text("# %%\nx = 1\n# %%\ny = 2\n")
    assert runfix("run", str(script)).returncode == 0
    shown = json.loads(runfix("history", str(script), "--json").stdout)
    assert isinstance(shown, list) and [r["first"] for r in shown] == [4, 2], shown


def test_history_json_counts_lines_from_1_like_its_text(tmp_path: Path) -> None:
    script = tmp_path / "h.py"
    script.write_text("x = 1\n\nprint(x + 1)\n")
    assert runfix("run", str(script), cwd=tmp_path).returncode == 0
    [run] = json.loads(runfix("history", "--json", cwd=tmp_path).stdout)
    text = runfix("history", cwd=tmp_path).stdout
    assert (run["first"], run["last"]) == (1, 3) and "h.py:1-3" in text
    assert [o["line"] for o in run["outputs"]] == [3]


def test_run_names_the_file_a_plot_was_stored_in(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    script = tmp_path / "plot.py"
    script.write_text(
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"
    )
    done = runfix("run", "plot.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stdout.splitlines() if "<figure" in x]
    stored = line.rsplit("(", 1)[1].rstrip(")")
    assert stored.startswith(".runfix/outputs/") and (tmp_path / stored).is_file()


def test_input_at_a_terminal_asks_there(tmp_path: Path) -> None:
    import os
    import pty

    script = tmp_path / "ask.py"
    script.write_text("name = input('Your name? ')\nf'Hello, {name}'\n")
    main, terminal = pty.openpty()
    process = subprocess.Popen(
        [*RUNFIX, "run", str(script)], stdin=terminal, stdout=subprocess.PIPE, text=True
    )
    os.close(terminal)
    assert process.stdout is not None
    seen = ""
    while "Your name? " not in seen:
        seen += process.stdout.read(1)
    os.write(main, b"Ada\n")
    out, _ = process.communicate(timeout=60)
    os.close(main)
    assert process.returncode == 0
    assert "note: 'Hello, Ada'" in out


def test_input_without_a_terminal_says_why_it_cannot_ask(tmp_path: Path) -> None:
    script = tmp_path / "ask.py"
    script.write_text("name = input('Your name? ')\n")
    done = subprocess.run(
        [*RUNFIX, "run", str(script)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "StdinNotImplementedError" in done.stdout
    assert "input() asks at a terminal; stdin is not one here" in done.stdout


def test_what_a_long_cell_prints_shows_as_it_comes(tmp_path: Path) -> None:
    """The cell waits for a file the test makes only after reading the cell's first line:
    that line came while the cell still ran (and is not said twice at its end)."""
    go = tmp_path / "go"
    script = tmp_path / "long.py"
    script.write_text(
        "import os, time\nprint('ready', flush=True)\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\nprint('after')\n"
    )
    process = subprocess.Popen([*RUNFIX, "run", str(script)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.strip() == f"{script}:2:1: note: ready"
    go.touch()
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert rest.strip() == f"{script}:5:1: note: after"


def test_runfix_run_imports_neither_pygls_nor_the_server(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('headless')\n")
    probe = (
        "import json, sys\n"
        "from lsp_server.cli.main import main\n"
        f"code = main(['run', {str(script)!r}])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    *printed, last = done.stdout.splitlines()
    report = json.loads(last)
    assert report["code"] == 0, done.stdout + done.stderr
    assert printed == [f"{script}:1:1: note: headless"]
    loaded = set(report["modules"])
    lsp_machinery = {"pygls", "lsprotocol", "lsp_server.lsp.server", "lsp_server.lsp.app"}
    lsp_machinery |= {"lsp_server.lsp.editor", "lsp_server.lsp.features", "lsp_server.lsp.convert"}
    assert not loaded & lsp_machinery, sorted(loaded & lsp_machinery)
    assert {"lsp_server.flow", "lsp_server.cli.run"} <= loaded  # the same flow as the editor's
    assert "openai" not in loaded  # imported when a model is first asked, not before


def test_run_a_typescript_file_in_deno(deno_kernel: None, tmp_path: Path) -> None:
    """Issue 38: `runfix run` runs any language its kernel is installed for."""
    (tmp_path / "main.ts").write_text("// %%\nconst n: number = 6;\nn * 7\n")
    done = runfix("run", "main.ts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "main.ts:3:" in done.stdout and "42" in done.stdout, done.stdout


def test_run_a_file_of_a_language_without_a_kernel_says_how_to_get_one(tmp_path: Path) -> None:
    (tmp_path / "plot.lua").write_text("x = 1 + 1\n")
    done = runfix("run", "plot.lua", cwd=tmp_path)
    assert done.returncode == 2
    assert "No Jupyter kernel for Lua" in done.stdout + done.stderr


def test_an_r_script_exports_naming_its_kernel_and_imports_back_as_r(
    r_kernel: None, tmp_path: Path
) -> None:
    """Issue 38: a notebook keeps its kernelspec and language both ways."""
    script = tmp_path / "analysis.R"
    script.write_text("# %%\nx <- 4\n\n# %%\nx * 5\n")
    assert runfix("run", str(script)).returncode == 0
    assert runfix("export", str(script)).returncode == 0
    notebook = json.loads((tmp_path / "analysis.ipynb").read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "ir"
    assert notebook["metadata"]["kernelspec"]["language"] == "R"
    assert ["".join(c["source"]) for c in notebook["cells"]] == ["x <- 4", "x * 5"]
    shown = json.dumps(notebook["cells"][1]["outputs"])
    assert "[1] 20" in shown, shown
    script.unlink()
    done = runfix("import", str(tmp_path / "analysis.ipynb"))
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert "# %%\nx <- 4\n" in text and "#   kernelspec:" in text, text  # jupytext's header
    assert not (tmp_path / "analysis.py").exists()


def test_a_typescript_notebook_imports_as_typescript_cells(tmp_path: Path) -> None:
    cells: list[dict[str, Any]] = [
        {
            "cell_type": "code",
            "source": code,
            "metadata": {},
            "outputs": [],
            "execution_count": None,
        }
        for code in ("const n = 6;", "n * 7")
    ]
    deno = {"name": "deno", "display_name": "Deno", "language": "typescript"}
    notebook = {
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": deno, "language_info": {"name": "typescript"}},
    }  # fmt: skip
    (tmp_path / "calc.ipynb").write_text(json.dumps(notebook))
    assert runfix("import", str(tmp_path / "calc.ipynb")).returncode == 0
    text = (tmp_path / "calc.ts").read_text()
    assert "// %%\nconst n = 6;" in text and "# %%" not in text, text


def test_cell_n_says_the_cells_above_did_not_run_and_above_runs_them(tmp_path: Path) -> None:
    """Issue 39: `--cell N` runs in a fresh kernel; its NameError now says why, and
    `--above` runs the cells above it first."""
    script = tmp_path / "three.py"
    script.write_text("# %%\nprices = [3, 4]\n# %%\ntotal = sum(prices)\n# %%\ntotal * 2\n")
    alone = runfix("run", str(script), "--cell", "3")
    assert alone.returncode == 1
    assert "NameError: name 'total' is not defined" in alone.stdout
    note = f"{script}:6:1: note: cells 1–2 above it did not run (a fresh kernel); --above"
    assert note in alone.stdout, alone.stdout
    above = runfix("run", str(script), "--cell", "3", "--above")
    assert above.returncode == 0, above.stdout + above.stderr
    assert f"{script}:6:1: note: 14" in above.stdout.splitlines(), above.stdout
    assert runfix("run", str(script), "--above").returncode == 2  # --above needs --cell


def _doctor_with(
    model_url: str, tmp_path: Path, name: str = "test-model"
) -> subprocess.CompletedProcess[str]:
    """`runfix doctor` on a trusted-by-typing folder whose model is at `model_url` (named
    `name`), with no key in the environment (a local endpoint needs none)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update({"OPENAI_BASE_URL": model_url, "RUNFIX_MODEL": name})
    return subprocess.run(
        [*RUNFIX, "doctor", str(tmp_path)], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.mark.model
def test_doctor_proves_the_model_with_a_completion_streamed_and_not(tmp_path: Path) -> None:
    """Issue 46: doctor asks for a one-word completion both ways, with its time; a local
    endpoint is not asked for a key."""
    from tests.support.model_server import ModelServer, Reply

    with ModelServer() as model:
        model.default = Reply("ok")
        done = _doctor_with(model.url, tmp_path)
    out = done.stdout
    assert f"model:          test-model at {model.url} (no key: a local endpoint needs none)" in out
    assert re.search(r"^  streamed: 'ok' in \d+\.\d\d s, first text after \d", out, re.M), out
    assert re.search(r"^  not streamed: 'ok' in \d+\.\d\d s, \d+\.\d tokens/s", out, re.M), out
    # What the endpoint does with a fix's candidates (issue 69): it answers `n` in one request.
    assert re.search(r"^  several answers \(model.candidates\): one request's `n` \(3 ", out, re.M)
    assert [r["stream"] for r in model.requests][:2] == [True, False]
    assert [r.get("n", 1) for r in model.requests][-1] == 3
    assert all(r["max_tokens"] == 8 for r in model.requests)


@pytest.mark.model
@pytest.mark.model
def test_doctor_names_what_the_endpoint_serves_when_the_model_name_is_not_one(
    tmp_path: Path,
) -> None:
    """Issue 61, 8: a wrong model name passed doctor (a local server answers whatever the
    name); the endpoint's model list says what it serves."""
    from tests.support.model_server import ModelServer

    with ModelServer() as model:
        done = _doctor_with(model.url, tmp_path, name="qwen-coder")
    assert (
        "  the endpoint serves test-model; not qwen-coder: set model.name (or RUNFIX_MODEL) "
        "to it" in done.stdout
    ), done.stdout
    assert model.requests == []  # no completion asked of a model it does not serve


def test_doctor_tells_a_busy_endpoint_from_one_that_is_down(tmp_path: Path) -> None:
    import socket

    from tests.support.model_server import ModelServer, Reply

    with ModelServer() as model:
        model.script(Reply("ok", hang=6.0), Reply("ok"))
        busy = _doctor_with(model.url, tmp_path)
    assert re.search(
        r"^  streamed: 'ok' in [6-9]\.\d\d s.*\(slow: a local model reads the prompt before it "
        r"writes\)$",
        busy.stdout,
        re.M,
    ), busy.stdout
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    down = _doctor_with(f"http://127.0.0.1:{port}/v1", tmp_path)
    assert (
        f"  streamed: nothing answers at http://127.0.0.1:{port}/v1 (is the server running?)"
        in down.stdout
    )
    assert "not streamed:" not in down.stdout  # said once


def test_a_shell_script_runs_from_the_terminal_its_echo_on_its_line_and_nothing_alarming(
    bash_kernel: None, tmp_path: Path
) -> None:
    """Issue 46: what `echo` printed is on the echo's line; stopping bash_kernel after the
    run (its short grace is on purpose) is not a warning printed after the results."""
    script = tmp_path / "steps.sh"
    script.write_text('# %%\nname=runfix\necho "hello $name"\n')
    done = runfix("run", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{script}:3:1: note: hello runfix" in done.stdout.splitlines()
    assert "did not stop in time" not in done.stdout + done.stderr
