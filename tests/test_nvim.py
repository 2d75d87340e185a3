"""The Neovim plugin in a real (headless) Neovim: run a file, read the diagnostics, apply a
quick fix through `vim.lsp.buf.code_action`. Debian's Neovim is 0.7.2: the oldest path
(`vim.lsp.start_client`, results as diagnostics) is the one tested here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SERVER, SERVER_ENV

ROOT = Path(__file__).parent.parent
PLUGIN = ROOT / "editors" / "nvim"
SCRIPT = Path(__file__).parent / "nvim" / "run_and_fix.lua"
EXAMPLE = """\
# %% setup
prices = {"tea": 3.5, "cake": 4.2}
print("total", sum(prices.values()))

# %% area
math.pi * 2 ** 2
"""

pytestmark = [pytest.mark.editor, pytest.mark.kernel]


@pytest.fixture
def nvim() -> str:
    path = shutil.which("nvim")
    if path is None:
        if os.environ.get("RUNFIX_REQUIRE_EDITORS") == "1":
            pytest.fail("nvim is not installed (scripts/editors installs Debian's neovim)")
        pytest.skip("nvim is not installed (apt-get install neovim, or scripts/editors)")
    return path


def test_run_then_quick_fix_in_headless_neovim(nvim: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    example = project / "area.py"
    example.write_text(EXAMPLE)
    report = tmp_path / "report.json"
    env = {
        **SERVER_ENV,
        "RUNFIX_NVIM_PLUGIN": str(PLUGIN),
        "RUNFIX_NVIM_CMD": json.dumps(SERVER),
        "RUNFIX_NVIM_PYTHON": sys.executable,
        "RUNFIX_NVIM_FILE": str(example),
        "RUNFIX_NVIM_REPORT": str(report),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # Neovim's LSP log goes here, not $HOME
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    subprocess.run(
        [nvim, "--headless", "--clean", "-c", f"luafile {SCRIPT}"],
        env=env,
        cwd=project,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    done = json.loads(report.read_text())
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
    assert done["status"] == "runfix idle (kernel)"
    health = "\n".join(done["health"])
    assert "command: " in health and "version: runfix " in health
