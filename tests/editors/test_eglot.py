"""eglot in a real Emacs (batch mode), a third LSP client: a hostile repository's file
opened under runfix runs nothing until the folder is trusted."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import SERVER, SERVER_ENV, editor_missing
from tests.e2e.test_trust import hostile

SCRIPT = Path(__file__).parent / "emacs" / "trust.el"


def test_eglot_runs_nothing_of_an_untrusted_folder_until_it_is_trusted(tmp_path: Path) -> None:
    emacs = shutil.which("emacs")
    if emacs is None or not list(Path("/usr/share/emacs/site-lisp/elpa").glob("eglot-*")):
        editor_missing("Emacs with eglot is not installed (apt-get install emacs-nox elpa-eglot)")
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
    subprocess.run(
        [emacs, "--batch", "-Q", "-l", str(SCRIPT)],
        env=env,
        cwd=project,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    done: dict[str, Any] = json.loads(report.read_text())
    assert "error" not in done, done["error"]
    assert done["attached"]
    assert done["marks_before_run"] == []
    assert done["first_run"] == "cancelled" and done["told"], done
    assert done["second_run"] == "ok" and done["result"], done["diagnostics"]
    assert done["marks_after_run"] == [] and list(marks.iterdir()) == []
