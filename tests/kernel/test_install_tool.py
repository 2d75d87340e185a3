"""Installing runfix as a tool (issue 39): `uv tool install` of the clone, and of the wheel it
builds, puts a working `runfix` on PATH — its version, a file run — with the metadata a
published package has. The tools and their venvs live in the test's folder; packages come
from the package index (uv's cache keeps them between runs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from lsp_server import __version__

ROOT = Path(__file__).parents[2]
UV = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))

pytestmark = pytest.mark.timeout(900)


def _uv(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([UV, *args], env=env, capture_output=True, text=True, timeout=800)


@pytest.fixture
def uv_env(tmp_path: Path) -> dict[str, str]:
    if not Path(UV).exists():
        pytest.fail("uv is a test dependency (pip install -e '.[test]')")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PIP_"))}
    env |= {"UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin")}
    return env


def test_the_wheel_says_what_a_published_package_says(
    tmp_path: Path, uv_env: dict[str, str]
) -> None:
    built = _uv("build", "--wheel", "-o", str(tmp_path / "dist"), str(ROOT), env=uv_env)
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("runfix_lsp-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(metadata).decode())
        entry = z.read(metadata.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Version"] == __version__ and meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert "Programming Language :: Python :: 3.10" in (meta.get_all("Classifier") or [])
    assert meta["Requires-Python"] == ">=3.10" and "runfix = lsp_server.cli.main:main" in entry
    assert not any(n.startswith(("tests/", "docs/", "editors/")) for n in names)


@pytest.mark.parametrize("source", ["clone", "wheel"])
def test_uv_tool_install_gives_a_runfix_that_runs_a_file(
    tmp_path: Path, uv_env: dict[str, str], source: str
) -> None:
    target = str(ROOT)
    if source == "wheel":
        assert (
            _uv("build", "--wheel", "-o", str(tmp_path / "dist"), target, env=uv_env).returncode
            == 0
        )
        [wheel] = (tmp_path / "dist").glob("runfix_lsp-*.whl")
        target = str(wheel)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    installed = _uv("tool", "install", "--python", python, target, env=uv_env)
    assert installed.returncode == 0, installed.stderr
    runfix = tmp_path / "bin" / "runfix"
    version = subprocess.run([runfix, "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"runfix {__version__}", version
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text("# %%\nname = 'tool'\nf'hello {name}'\n")
    ran = subprocess.run(
        [runfix, "run", "hello.py"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "hello.py:3:1: note: 'hello tool'" in ran.stdout.splitlines(), ran.stdout
