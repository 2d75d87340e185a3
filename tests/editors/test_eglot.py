"""eglot in a real Emacs (batch mode), a third LSP client: a hostile repository's file
opened under runfix runs nothing until the folder is trusted; completion from the live
kernel through `completion-at-point`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from executor.trust import Choice, TrustStore
from tests.conftest import SERVER, SERVER_ENV, editor_missing
from tests.e2e.test_trust import hostile
from tests.editors.test_nvim import LIVE

SCRIPT = Path(__file__).parent / "emacs" / "trust.el"


def _emacs() -> str:
    emacs = shutil.which("emacs")
    if emacs is None or not list(Path("/usr/share/emacs/site-lisp/elpa").glob("eglot-*")):
        editor_missing("Emacs with eglot is not installed (apt-get install emacs-nox elpa-eglot)")
    return emacs


def _batch(emacs: str, script: Path, env: dict[str, str], project: Path) -> dict[str, Any]:
    """Run an Emacs Lisp test script in batch mode in `project`; its JSON report."""
    subprocess.run(
        [emacs, "--batch", "-Q", "-l", str(script)],
        env=env,
        cwd=project,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    done: dict[str, Any] = json.loads(Path(env["RUNFIX_EGLOT_REPORT"]).read_text())
    return done


def _trusted_batch(tmp_path: Path, name: str, text: str, script: str) -> dict[str, Any]:
    """An Emacs test script on the file `name` (holding `text`) of a git project runfix
    trusts; its report."""
    emacs = _emacs()
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)  # eglot's project root
    example = project / name
    example.write_text(text)
    state = tmp_path / "state"
    TrustStore(state / "runfix" / "trust.json").decide(project, Choice.TRUST)
    env = {
        **SERVER_ENV,
        "XDG_STATE_HOME": str(state),
        "HOME": str(tmp_path),
        "RUNFIX_EGLOT_CMD": json.dumps(SERVER),
        "RUNFIX_EGLOT_FILE": str(example),
        "RUNFIX_EGLOT_REPORT": str(tmp_path / "report.json"),
    }
    return _batch(emacs, Path(__file__).parent / "emacs" / script, env, project)


def test_eglot_runs_nothing_of_an_untrusted_folder_until_it_is_trusted(tmp_path: Path) -> None:
    emacs = _emacs()
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)  # eglot's project root
    marks = hostile(project)
    example = project / "answer.py"
    example.write_text("# %%\nx = 6 * 7\nx\n")
    report = tmp_path / "report.json"
    env = {
        **SERVER_ENV,
        "XDG_STATE_HOME": str(tmp_path / "state"),  # nothing is trusted there
        "HOME": str(tmp_path),
        "RUNFIX_EGLOT_CMD": json.dumps(SERVER),
        "RUNFIX_EGLOT_FILE": str(example),
        "RUNFIX_EGLOT_MARKS": str(marks),
        "RUNFIX_EGLOT_REPORT": str(report),
    }
    done = _batch(emacs, SCRIPT, env, project)
    assert "error" not in done, done["error"]
    assert done["attached"]
    assert done["marks_before_run"] == []
    assert done["first_run"] == "cancelled" and done["told"], done
    assert done["second_run"] == "ok" and done["result"], done["diagnostics"]
    assert done["marks_after_run"] == [] and list(marks.iterdir()) == []


def test_eglot_completes_live_columns_and_attributes(tmp_path: Path) -> None:
    done = _trusted_batch(tmp_path, "live.py", LIVE, "complete.el")
    assert "error" not in done, done["error"]
    assert done["attached"] and done["ran"] == "ok", done
    assert sorted(done["keys"]) == ["price", "qty"], done
    assert list(done["attributes"]) == ["learning_rate"], done


def test_eglot_runs_a_shell_script_in_bash(bash_kernel: None, tmp_path: Path) -> None:
    """Issue 38: eglot serving sh-mode (the README's line) names the language `sh`; the
    script runs in bash_kernel, never as Python."""
    done = _trusted_batch(tmp_path, "steps.sh", "# %%\nN=6\necho $((N * 7))\n", "shell.el")
    assert "error" not in done, done["error"]
    assert done["attached"] and done["run"] == "ok", done
    assert done["result"], done["diagnostics"]
