"""Trust before execution: nothing a repository ships runs until its folder is trusted.

A hostile repository: its own `.venv` (a `python` that leaves a mark, a `.pth` that
leaves one), a root `ipykernel_launcher.py`, `runpy.py` and `pip.py` that leave one,
and a `.runfix/runs.db` that claims results. Each test drives a real `runfix serve`
(with a state folder of its own, where nothing is trusted) over LSP and looks for
the marks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import ipykernel
import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from executor import install as installer
from executor.trust import Choice, TrustStore
from lsp_server.cli.notebooks import export, import_notebook
from lsp_server.folder_files import stored_output
from lsp_server.outputs.bundles import OutputFiles, latest_images
from lsp_server.record.store import RecordedOutput, RecordedRun, RunRecord
from tests.conftest import (
    SERVER,
    UNTRUSTED_ENV,
    UNTRUSTED_STATE,
    editor_like,
    hints,
    init_params,
    open_doc,
    open_to_sandbox,
    run,
)

# Their servers' state folder: nothing is trusted in it until a test says so.
STATE, ENV = UNTRUSTED_STATE, UNTRUSTED_ENV
DOC = "# %%\nx = 6 * 7\nx\n"


def hostile(folder: Path) -> Path:
    """Fill `folder` as a hostile repository would; the folder its marks land in."""
    marks = folder.parent / "marks"
    marks.mkdir(exist_ok=True)

    def leaves(name: str) -> str:
        return f"open({str(marks / name)!r}, 'w').close()\n"

    venv = folder / ".venv"
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    (site / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    python = venv / "bin" / "python"
    python.parent.mkdir()
    python.write_text(
        f'#!/bin/bash\ntouch {marks}/venv-python\nexec -a "$0" {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    # ipykernel from the tests' own environment, so that a trusted run can start a kernel
    (site / "site-packages" / "tests.pth").write_text(f"{Path(ipykernel.__file__).parents[1]}\n")
    (site / "site-packages" / "shadow.pth").write_text(f"import os; {leaves('pth').strip()}\n")
    for module in ("ipykernel_launcher", "runpy", "pip"):
        (folder / f"{module}.py").write_text(leaves(module))
    return marks


def untrusted_params(folder: Path, client: str, options: dict[str, Any] | None = None) -> Any:
    """`initialize` on `folder` with the folder's own interpreter (no `python` setting)."""
    params = init_params(folder, client, options)
    params.initialization_options = {
        k: v for k, v in (params.initialization_options or {}).items() if k != "python"
    }
    return params


def trust_problems(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if d.code == "trust"]


def check_question(questions: list[lsp.ShowMessageRequestParams], folder: Path) -> None:
    """One question, naming the folder and the interpreter that would run, with the choices."""
    [question] = questions
    assert str(folder) in question.message
    assert str(folder / ".venv" / "bin" / "python") in question.message
    titles = [a.title for a in question.actions or []]
    assert titles[0] == "Trust folder" and titles[-1] == "Don't run"
    assert "Use runfix's own Python" in titles


async def settle(seconds: float = 1.5) -> None:
    """Long enough for a kernel that was going to start to have left its marks."""
    await asyncio.sleep(seconds)


@pytest.mark.parametrize("client_name", ["visual_studio_code", "neovim@v0.7.0"])
async def test_opening_and_reading_an_untrusted_folder_runs_nothing(
    stranger: Any, folder: Path, client_name: str
) -> None:
    marks = hostile(folder)
    await stranger.initialize_session(untrusted_params(folder, client_name))
    uri = open_doc(stranger, folder / "doc.py", DOC)
    doc = lsp.TextDocumentIdentifier(uri)
    await stranger.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(2, 0)))
    lenses = await stranger.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert lenses  # ▶ Run cell still shows
    await hints(stranger, uri)
    # No kernel to ask: completion and signature help have nothing, and say no error.
    where = lsp.Position(2, 0)
    assert not await stranger.text_document_completion_async(lsp.CompletionParams(doc, where))
    help_ = await stranger.text_document_signature_help_async(lsp.SignatureHelpParams(doc, where))
    assert help_ is None
    await stranger.text_document_code_action_async(
        lsp.CodeActionParams(
            doc, lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)), lsp.CodeActionContext([])
        )
    )
    await settle()
    assert sorted(p.name for p in marks.iterdir()) == []
    status = await stranger.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.status")
    )
    assert status == []  # no kernel


async def test_a_folder_without_an_interpreter_is_not_offered_the_same_one_twice(
    stranger: Any, folder: Path
) -> None:
    """Issue 61, 8: with no interpreter of its own, "Trust folder" and "Use runfix's own
    Python" both started runfix's own, and the question did not say so: one is offered.
    Where the folder has one, the question says what each starts."""
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", DOC)
    stranger.answer = None
    await run(stranger, uri)
    [question] = stranger.questions
    titles = [a.title for a in question.actions or []]
    assert "Trust folder" in titles and "Use runfix's own Python" not in titles
    assert "the interpreter runfix runs on" in question.message
    other = folder.parent / "with-venv"
    other.mkdir()
    hostile(other)
    uri = open_doc(stranger, other / "doc.py", DOC)
    await run(stranger, uri)
    asked = stranger.questions[-1]
    assert "Use runfix's own Python" in [a.title for a in asked.actions or []]
    assert f"Or runfix's own Python ({sys.executable})" in asked.message


async def test_an_early_kernel_never_starts_in_an_untrusted_folder(folder: Path) -> None:
    """A client without `workspace/configuration` used to get a kernel at `initialize`."""
    marks = hostile(folder)
    client = pytest_lsp.make_test_lsp_client()
    editor_like(client)
    await client.start_io(*SERVER, env=ENV)
    try:
        params = untrusted_params(folder, "neovim@v0.7.0")
        params.capabilities.workspace = None
        await client.initialize_session(params)
        await settle()
        assert list(marks.iterdir()) == []
    finally:
        await client.shutdown_session()


@pytest.mark.parametrize("answer", [None, "Don't run", "cannot ask"])
async def test_no_answer_dont_run_or_no_question_run_nothing_and_say_so_on_the_line(
    stranger: Any, folder: Path, answer: Any
) -> None:
    marks = hostile(folder)
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", DOC)
    stranger.answer = answer
    if answer == "cannot ask":  # a client without the request answers "Method not found" (Helix)
        stranger.protocol.fm.features.pop(lsp.WINDOW_SHOW_MESSAGE_REQUEST)
        stranger.report_server_error = lambda error, source: None  # its own "not found"

    ran = await run(stranger, uri)

    assert ran["status"] == "cancelled" and "not trusted" in ran["message"]
    if answer == "cannot ask":
        assert stranger.questions == []
    else:
        check_question(stranger.questions, folder)
    [problem] = trust_problems(stranger, uri)
    assert problem.range.start.line == 1 and "nothing ran" in problem.message
    assert list(marks.iterdir()) == []
    if answer == "cannot ask":
        assert "cannot show runfix's question" in problem.message
        # The client that cannot ask decides with a quick fix.
        actions = await stranger.text_document_code_action_async(
            lsp.CodeActionParams(
                lsp.TextDocumentIdentifier(uri),
                problem.range,
                lsp.CodeActionContext([problem], only=["quickfix"]),
            )
        )
        trust = next(
            a for a in actions or [] if a.title == "Run this folder on runfix's own Python"
        )
        assert isinstance(trust, lsp.CodeAction) and trust.command is not None
        await stranger.workspace_execute_command_async(
            lsp.ExecuteCommandParams(trust.command.command, trust.command.arguments)
        )
        assert trust_problems(stranger, uri) == []
        assert (await run(stranger, uri))["status"] == "ok"
        assert list(marks.iterdir()) == []  # runfix's own Python: nothing of the folder's


async def test_the_question_for_a_shell_document_names_the_kernel_that_would_start(
    bash_kernel: None, stranger: Any, folder: Path
) -> None:
    """Issue 47, S3 8: a shell document's first run asks about bash_kernel, which is what
    would start — not the folder's `.venv/bin/python`, which would not."""
    marks = hostile(folder)
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "steps.sh", "echo hi\n", language="shellscript")
    stranger.answer = "Don't run"
    assert (await run(stranger, uri))["status"] == "cancelled"
    [question] = stranger.questions
    assert "bash_kernel" in question.message and "kernelspec 'bash'" in question.message
    assert str(folder / ".venv" / "bin" / "python") not in question.message
    assert list(marks.iterdir()) == []


async def test_own_python_runs_nothing_the_folder_ships(stranger: Any, folder: Path) -> None:
    marks = hostile(folder)
    (folder / "helper.py").write_text("ANSWER = 42\n")
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", "# %%\nimport helper\nhelper.ANSWER\n")
    stranger.answer = "Use runfix's own Python"

    assert (await run(stranger, uri))["status"] == "ok"

    assert [h.label for h in await hints(stranger, uri)] == ["→ 42"]  # its own modules import
    assert list(marks.iterdir()) == []  # no .venv python, no .pth, no shadowed launcher
    assert TrustStore(STATE / "runfix" / "trust.json").decision(folder) == (
        folder.resolve(),
        Choice.OWN,
    )


async def test_trust_runs_the_folders_python_survives_a_restart_and_revoke_stops_it(
    stranger: Any, folder: Path
) -> None:
    marks = hostile(folder)
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", DOC)
    stranger.answer = "Trust folder"

    assert (await run(stranger, uri))["status"] == "ok"
    # Trusted: its interpreter (and its .pth) run, as the user chose; a shadowing launcher or
    # runpy.py beside the code still does not.
    assert sorted(p.name for p in marks.iterdir()) == ["pth", "venv-python"]
    kept = json.loads((STATE / "runfix" / "trust.json").read_text())
    assert kept["folders"][str(folder.resolve())] == "trust"

    # Another server (an editor restarted) asks nothing.
    again = pytest_lsp.make_test_lsp_client()
    editor_like(again)
    await again.start_io(*SERVER, env=ENV)
    try:
        await again.initialize_session(untrusted_params(folder, "visual_studio_code"))
        uri2 = open_doc(again, folder / "other.py", "# %%\n1 + 1\n")
        assert (await run(again, uri2))["status"] == "ok"
        assert again.questions == []
    finally:
        await again.shutdown_session()

    # Revoking stops the kernel at once and drops its state; the next run asks again.
    await stranger.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.untrust", [{"uri": uri}])
    )
    status = await stranger.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.status")
    )
    assert status == []
    stranger.answer = None
    assert (await run(stranger, uri))["status"] == "cancelled"
    assert len(stranger.questions) == 2


async def test_a_shipped_record_is_never_shown_and_is_moved_aside_once_trusted(
    stranger: Any, folder: Path
) -> None:
    # A record made on "another machine" (another state folder: another machine key).
    os.environ["XDG_STATE_HOME"], before = (
        str(folder.parent / "elsewhere"),
        os.environ["XDG_STATE_HOME"],
    )
    try:
        record = RunRecord(folder)
        claim = RecordedOutput(2, "All 1,234 tests passed; deploy", file="/proc/self/environ")
        record.add(
            RecordedRun(
                str(folder / "doc.py"), 1, 2, "x = 6 * 7\nx\n", "user", "ok", 1.0, 0.1,
                outputs=(claim,),
            )
        )  # fmt: skip
        record.close()
    finally:
        os.environ["XDG_STATE_HOME"] = before
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", DOC)
    await settle(1.0)
    assert await hints(stranger, uri) == []  # untrusted: nothing restored

    stranger.answer = "Trust folder"  # (it has no interpreter of its own: runfix's starts)
    assert (await run(stranger, uri, 0, 0))["status"] == "ok"
    uri2 = open_doc(stranger, folder / "doc2.py", DOC)
    await settle(1.0)
    assert await hints(stranger, uri2) == []  # trusted now, but the record is not this machine's
    assert list((folder / ".runfix").glob("runs.db.bad-*"))  # moved aside when runfix wrote


def test_a_record_with_a_trigger_is_foreign(tmp_path: Path) -> None:
    record = RunRecord(tmp_path)
    record.add(RecordedRun("/p/a.py", 0, 0, "x\n", "user", "ok", 1.0, 0.1))
    record.close()
    with sqlite3.connect(tmp_path / ".runfix" / "runs.db") as db:
        db.execute(
            "CREATE TRIGGER lie AFTER INSERT ON runs BEGIN UPDATE runs SET status = 'ok'; END"
        )
    again = RunRecord(tmp_path)
    again.add(RecordedRun("/p/a.py", 0, 0, "x\n", "user", "error", 2.0, 0.1))
    assert [r.status for r in again.recent()] == ["error"]
    assert "trigger lie" in again.told_once()[0]
    again.close()


def test_installers_never_import_the_folders_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pip.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    (tmp_path / "runpy.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    monkeypatch.setattr(installer.shutil, "which", lambda name: None)  # the interpreter's pip
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    result = asyncio.run(
        installer.install(sys.executable, ["runfix-no-such-dist"], tmp_path, timeout=120)
    )
    assert not result.ok and "runfix-no-such-dist" in result.output
    assert not (tmp_path / "ran").exists()


def test_uv_reads_no_configuration_a_folder_ships(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installer.shutil, "which", lambda name: "/usr/bin/uv")
    assert installer.install_command("python", ["x"])[:4] == [
        "/usr/bin/uv",
        "pip",
        "install",
        "--no-config",
    ]


async def test_docker_from_the_clients_settings_never_starts_a_local_kernel_first(
    stranger: Any, folder: Path
) -> None:
    """Even for a trusted folder: the sandbox user's settings arrive through
    `workspace/configuration`, after `initialize`."""
    marks = hostile(folder)
    TrustStore(STATE / "runfix" / "trust.json").decide(folder, Choice.TRUST)
    stranger.set_configuration({"runfix": {"executor": "docker"}})
    params = untrusted_params(folder, "neovim@v0.11.0")
    assert params.capabilities.workspace and params.capabilities.workspace.configuration
    await stranger.initialize_session(params)
    open_doc(stranger, folder / "doc.py", DOC)
    await settle()
    assert list(marks.iterdir()) == []


# -- what a repository ships in .runfix/ is data, never instructions ------------------------


def test_a_linked_outputs_folder_loses_no_file_outside_and_receives_no_write(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for i in range(6):
        (elsewhere / f"{i:016x}.png").write_bytes(b"precious" * 100)
    folder = tmp_path / "repo"
    (folder / ".runfix").mkdir(parents=True)
    (folder / ".runfix" / "outputs").symlink_to(elsewhere)  # shipped as a link

    files = OutputFiles(folder, folder_limit=10)  # pruning would take all of them
    assert files.save(b"new plot", ".png") is None
    assert sorted(p.name for p in elsewhere.iterdir()) == [f"{i:016x}.png" for i in range(6)]
    assert latest_images(folder, 10) == []
    assert stored_output(folder, folder / ".runfix" / "outputs" / "0000000000000001.png") is None


def test_a_dangling_link_planted_in_the_outputs_is_never_written_through(tmp_path: Path) -> None:
    """What code in the sandbox can do: the folder is mounted read-write at /workspace."""
    folder = tmp_path / "repo"
    outputs = folder / ".runfix" / "outputs"
    outputs.mkdir(parents=True)
    target = tmp_path / "bashrc"
    data = b"<b>sandbox bytes</b>"
    name = f"{hashlib.sha256(data).hexdigest()[:16]}.html"
    (outputs / name).symlink_to(target)
    assert OutputFiles(folder).save(data, ".html") is None
    assert not target.exists()
    assert (outputs / name).is_symlink()  # and runfix deleted nothing it did not make


def test_export_reads_only_files_runfix_stored(tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    (folder / ".git").mkdir(parents=True)
    source = folder / "nb.py"
    source.write_text("# %%\nx = 1\nx\n")
    outputs = folder / ".runfix" / "outputs"
    outputs.mkdir(parents=True)
    link = outputs / "00000000000000aa.md"
    link.symlink_to("/proc/self/environ")
    record = RunRecord(folder)
    record.add(
        RecordedRun(
            str(source.resolve()), 1, 2, "x = 1\nx\n", "user", "ok", 1.0, 0.1,
            outputs=(
                RecordedOutput(2, "env", kind="markdown", file="/proc/self/environ"),
                RecordedOutput(2, "link", kind="markdown", file=str(link)),
            ),
        )
    )  # fmt: skip
    record.close()
    assert export(source, None) == 0
    notebook = (folder / "nb.ipynb").read_text()
    assert "PATH=" not in notebook and os.environ["PATH"] not in notebook
    assert '"env' in notebook  # the text the record holds, and nothing read for it


def test_import_and_export_never_write_through_a_link(tmp_path: Path) -> None:
    folder = tmp_path / "repo"
    folder.mkdir()
    outside = tmp_path / "profile"
    notebook = folder / "nb.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [{"cell_type": "code", "source": "print(1)", "metadata": {},
                           "outputs": [], "execution_count": None}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
            }
        )
    )  # fmt: skip
    (folder / "nb.py").symlink_to(outside)  # dangling: import would create the target
    assert import_notebook(notebook, None, force=True) == 2
    assert not outside.exists()
    script = folder / "s.py"
    script.write_text("# %%\n1\n")
    outside.write_text("keep me")
    (folder / "s.ipynb").symlink_to(outside)
    assert export(script, None) == 2
    assert outside.read_text() == "keep me"


def test_runfix_trust_decides_lists_and_revokes_and_doctor_starts_nothing_undecided(
    folder: Path,
) -> None:
    marks = hostile(folder)
    env = {**ENV, "XDG_STATE_HOME": str(folder.parent / "state")}

    def runfix(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "lsp_server", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    doctor = runfix("doctor", str(folder))
    assert "trust:          not decided" in doctor.stdout and "not started" in doctor.stdout
    assert list(marks.iterdir()) == []
    assert runfix("trust", str(folder), "--choice", "own").returncode == 0
    assert f"{folder.resolve()}\town" in runfix("trust", "--list").stdout
    assert runfix("trust", "--revoke", str(folder)).returncode == 0
    assert runfix("trust", "--list").stdout == ""
    assert runfix("trust", str(folder / "missing")).returncode == 2


# -- the sandbox ---------------------------------------------------------------------------


@pytest.mark.docker
async def test_run_in_the_sandbox_runs_in_docker_and_leaves_no_mark_on_the_host(
    stranger: Any, folder: Path, sandbox_image: str
) -> None:
    marks = hostile(folder)
    open_to_sandbox(folder)
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    uri = open_doc(stranger, folder / "doc.py", "# %%\nimport socket\nsocket.gethostname()\n")
    stranger.answer = "Run in the sandbox"

    assert (await run(stranger, uri))["status"] == "ok"

    assert "Run in the sandbox" in [a.title for a in stranger.questions[0].actions]
    assert [h.label for h in await hints(stranger, uri)] == ["→ 'runfix'"]  # the container
    assert list(marks.iterdir()) == []  # nor did its launcher shadow run in there: it started
    status = await stranger.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.status")
    )
    assert [s["executor"] for s in status] == ["docker"]


PLANT = """\
import hashlib, os, struct, zlib
from IPython.display import Image, display

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"\\x00\\xff\\x00\\x00")) + chunk(b"IEND", b"")
os.makedirs("/workspace/.runfix/outputs", exist_ok=True)
name = hashlib.sha256(png).hexdigest()[:16] + ".png"
os.symlink(TARGET, "/workspace/.runfix/outputs/" + name)
display(Image(png))
"""


@pytest.mark.docker
async def test_a_link_planted_from_inside_the_sandbox_is_never_written_through(
    client: Any, folder: Path, sandbox_image: str, tmp_path: Path
) -> None:
    """Code in the sandbox links the name runfix will store its next plot under to a file
    outside the folder; runfix, on the host, does not write the sandbox's bytes there."""
    open_to_sandbox(folder)
    target = tmp_path / "outside" / "startup-file"
    target.parent.mkdir()
    await client.initialize_session(init_params(folder, options={"executor": "docker"}))
    code = f"TARGET = {str(target)!r}\n{PLANT}"
    uri = open_doc(client, folder / "plant.py", code)

    assert (await run(client, uri))["status"] == "ok"

    assert not target.exists()
    [link] = list((folder / ".runfix" / "outputs").iterdir())
    assert link.is_symlink()  # left as the sandbox made it: runfix deletes only its own files


async def test_an_agent_runs_nothing_in_an_untrusted_folder(stranger: Any, folder: Path) -> None:
    from tests.support.agent_client import agent, tool

    marks = hostile(folder)
    await stranger.initialize_session(untrusted_params(folder, "neovim@v0.11.0"))
    stranger.answer = "Allow for this session"
    async with agent() as session:
        said = await tool(session, "run_code", folder=str(folder), code="1 + 1")
    assert "not trusted" in said["error"]
    await settle()
    assert sorted(p.name for p in marks.iterdir()) == []
    assert stranger.questions == []  # neither trust nor consent is asked for an agent
