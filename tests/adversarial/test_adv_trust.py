"""Issue 36, S3 13: trust decisions hold only where they were made, and the file that keeps
them is never silently rewritten."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from tests.conftest import SERVER_ENV, init_params, open_doc, run


def runfix(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**SERVER_ENV, "XDG_STATE_HOME": str(state)}
    command = [sys.executable, "-m", "lsp_server", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def listed(state: Path) -> str:
    return runfix(state, "trust", "--list").stdout


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "sub").mkdir(parents=True)
    return folder


def test_a_corrupt_decisions_file_is_never_written_over(state: Path, work: Path) -> None:
    other = work.parent / "other"
    other.mkdir()
    assert runfix(state, "trust", str(other)).returncode == 0
    kept = state / "runfix" / "trust.json"
    good = kept.read_text()
    kept.write_text(good[:-5])  # cut short: not JSON
    said = runfix(state, "trust", str(work))
    assert said.returncode == 2
    [line] = said.stderr.splitlines()
    assert "trust.json" in line and "nothing was changed" in line
    assert kept.read_text() == good[:-5]  # the other decision is still there to repair
    kept.write_text(good)
    assert runfix(state, "trust", str(work)).returncode == 0
    assert str(other.resolve()) in listed(state) and str(work.resolve()) in listed(state)


def test_a_decisions_file_that_is_a_folder_is_one_line_and_exit_2(state: Path, work: Path) -> None:
    (state / "runfix" / "trust.json").mkdir(parents=True)
    for args in (("trust", str(work)), ("trust", "--list"), ("trust", "--revoke", str(work))):
        said = runfix(state, *args)
        assert said.returncode == 2, (args, said)
        assert len(said.stderr.splitlines()) == 1 and "trust.json" in said.stderr, said.stderr
        assert "Traceback" not in said.stderr


def test_revoking_a_folder_inside_a_trusted_one_names_it_and_revokes_nothing(
    state: Path, work: Path
) -> None:
    assert runfix(state, "trust", str(work)).returncode == 0
    said = runfix(state, "trust", "--revoke", str(work / "sub"))
    assert said.returncode == 2
    assert f"trusted through {work.resolve()}" in said.stderr
    assert json.loads((state / "runfix" / "trust.json").read_text())["folders"] == {
        str(work.resolve()): "trust"
    }


async def test_vs_codes_trust_covers_the_folders_it_was_sent_for_only(
    stranger: Any, tmp_path: Path
) -> None:
    """`workspaceTrust: "trusted"` comes at `initialize` for the workspace then open."""
    trusted, added, loose = tmp_path / "trusted", tmp_path / "added", tmp_path / "loose"
    for folder in (trusted, added, loose):
        folder.mkdir()
    params = init_params(trusted, "visual_studio_code", {"workspaceTrust": "trusted"})
    await stranger.initialize_session(params)
    uri = open_doc(stranger, trusted / "a.py", "x = 1\n")
    assert (await run(stranger, uri))["status"] == "ok"
    assert stranger.questions == []
    stranger.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(added.as_uri(), "added")], removed=[]
            )
        )
    )
    for where in (added / "b.py", loose / "c.py"):
        stranger.questions.clear()
        other = open_doc(stranger, where, "open('ran', 'w')\n")
        answer = await run(stranger, other)
        assert answer["status"] != "ok", where
        assert len(stranger.questions) == 1 and str(where.parent) in stranger.questions[0].message
        assert not (where.parent / "ran").exists()
