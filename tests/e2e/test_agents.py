"""Coding agents share the editor's kernel (issue 27): the official MCP SDK's client drives
`runfix mcp` over stdio while pytest-lsp drives the editor's `runfix serve`."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from mcp import ClientSession
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_server.folder_socket import AgentError, connect, runtime_dir, socket_path
from tests.conftest import (
    SERVER,
    SERVER_ENV,
    UNTRUSTED_ENV,
    editor_like,
    hints,
    hover_text,
    init_params,
    open_doc,
    run,
)
from tests.support.agent_client import agent, tool

ALLOW = "Allow for this session"


async def test_an_agents_run_lands_in_the_editors_kernel_inline_and_recorded(
    initialized: Any, folder: Path
) -> None:
    initialized.answer = ALLOW
    uri = open_doc(initialized, folder / "data.py", "total = 40\n")
    assert (await run(initialized, uri))["status"] == "ok"
    (folder / "more.py").write_text("x = 1\n")
    open_doc(initialized, folder / "more.py", "total + 2\n")
    async with agent("Claude Code") as session:
        answer = await tool(session, "run_lines", path=str(folder / "more.py"), first=1)
        assert answer["status"] == "ok" and "42" in answer["output"], answer
        seen = await tool(session, "run_code", folder=str(folder), code="made_by_agent = 7")
        assert seen["status"] == "ok", seen
    [question] = initialized.questions
    assert "Claude Code" in question.message and str(folder.name) in question.message
    more = (folder / "more.py").as_uri()
    assert [h.label for h in await hints(initialized, more)] == ["→ 42"]
    assert "by agent: Claude Code" in await hover_text(initialized, more, 0)
    change_uri = open_doc(initialized, folder / "human.py", "made_by_agent * 6\n")
    assert (await run(initialized, change_uri))["status"] == "ok"
    assert [h.label for h in await hints(initialized, change_uri)] == ["→ 42"]  # same kernel
    with sqlite3.connect(folder / ".runfix" / "runs.db") as db:
        origins = [row[0] for row in db.execute("SELECT origin FROM runs ORDER BY id")]
    assert "agent: Claude Code" in origins and "user" in origins


@pytest.mark.parametrize("answer", ["Deny", None])
async def test_deny_or_no_answer_runs_nothing(
    initialized: Any, folder: Path, answer: str | None
) -> None:
    initialized.answer = answer
    sign = folder / "ran"
    async with agent() as session:
        said = await tool(session, "run_code", folder=str(folder), code=f"open({str(sign)!r}, 'w')")
    assert "did not allow" in said["error"]
    assert not sign.exists()


async def test_an_agents_run_queues_behind_the_users_and_the_editors_interrupt_stops_it(
    initialized: Any, folder: Path
) -> None:
    initialized.answer = ALLOW
    uri = open_doc(initialized, folder / "slow.py", "import time\ntime.sleep(1.5)\n")
    human = asyncio.ensure_future(run(initialized, uri))
    await asyncio.sleep(0.3)
    async with agent() as session:
        queued = await tool(session, "run_code", folder=str(folder), code="'after the human'")
        assert human.done() and (await human)["status"] == "ok"  # it waited its turn
        assert "after the human" in queued["output"]
        long = asyncio.ensure_future(
            tool(session, "run_code", folder=str(folder), code="import time\ntime.sleep(30)")
        )
        await asyncio.sleep(1.0)
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams("runfix.interrupt", [{"uri": uri}])
        )
        stopped = await asyncio.wait_for(long, 20)
    assert stopped["status"] == "cancelled" and "interrupted" in stopped["message"], stopped


async def test_input_in_an_agents_run_fails_at_once(initialized: Any, folder: Path) -> None:
    initialized.answer = ALLOW
    async with agent() as session:
        said = await tool(session, "run_code", folder=str(folder), code="input('name? ')")
    assert said["status"] == "error" and "StdinNotImplementedError" in said["output"], said
    assert len(initialized.questions) == 1  # the consent; no input box


async def test_variables_and_inspect_read_the_shared_kernel(initialized: Any, folder: Path) -> None:
    uri = open_doc(initialized, folder / "vars.py", "cfg = {'lr': 0.1}\nnames = ['a', 'b']\n")
    assert (await run(initialized, uri))["status"] == "ok"
    async with agent() as session:
        listed = await tool(session, "variables", folder=str(folder))
        names = {v["name"]: v for v in listed["variables"]}
        about = (await tool(session, "inspect_value", folder=str(folder), expression="cfg"))[
            "value"
        ]
        results = await tool(session, "results", path=str(folder / "vars.py"))
    assert names["names"]["type"] == "list" and names["cfg"]["type"] == "dict"
    assert about["type"] == "dict" and about["length"] == 1
    assert results == {"results": [], "problems": []}
    assert initialized.questions == []  # reading asks nothing


async def test_with_no_editor_runfix_mcp_serves_the_folder_alone(tmp_path: Path) -> None:
    """No editor holds the folder: `runfix mcp` runs it itself (the folder's trust, settings
    and record), and stops its kernel when the agent goes."""
    project = tmp_path / "alone"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'alone'\n")
    (project / "job.py").write_text("answer = 6 * 7\nprint(answer)\n")
    async with agent("lone-agent") as session:
        ran = await tool(session, "run_file", path=str(project / "job.py"))
        again = await tool(session, "run_code", folder=str(project), code="answer + 1")
    assert ran["status"] == "ok" and ran["output"] == "42\n", ran
    assert again["output"].strip() == "43"  # the same kernel for both calls
    with sqlite3.connect(project / ".runfix" / "runs.db") as db:
        origins = {row[0] for row in db.execute("SELECT origin FROM runs")}
    assert origins == {"agent: lone-agent"}, origins


async def test_run_cell_runs_the_whole_cell_holding_the_line(
    initialized: Any, folder: Path
) -> None:
    """Issue 39: `run_cell` on a line inside a function ran that line alone
    (`SyntaxError: 'return' outside function`); it runs the cell, open in the editor or not."""
    source = "# %%\ndef area(r):\n    return 3 * r * r\n\n# %%\nprint(area(2))\n"
    (folder / "cells.py").write_text(source)
    (folder / "open.py").write_text(source)
    open_doc(initialized, folder / "open.py", source)
    initialized.answer = "Allow for this session"
    async with agent("cell-agent") as session:
        for name in ("cells.py", "open.py"):
            defined = await tool(session, "run_cell", path=str(folder / name), line=3)
            called = await tool(session, "run_cell", path=str(folder / name), line=6)
            assert defined["status"] == "ok", (name, defined)
            assert called["status"] == "ok" and called["output"] == "12\n", (name, called)
        beyond = await tool(session, "run_cell", path=str(folder / "cells.py"), line=99)
    assert "the file has 6 lines" in beyond["error"], beyond


async def test_an_agents_file_of_another_language_runs_in_its_kernel(tmp_path: Path) -> None:
    """Issue 38: `run_file` of a file no editor has open runs in its language's kernel (a
    shell script in bash, never in Python), and one with no kernel here says so."""
    if importlib.util.find_spec("bash_kernel") is None:
        pytest.skip("bash_kernel is not installed")
    project = tmp_path / "scripts"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'scripts'\n")
    (project / "hello.sh").write_text('name=agent\necho "hello $name"\n')
    (project / "model.jl").write_text("x = 1 + 1\n")
    async with agent("shell-agent") as session:
        ran = await tool(session, "run_file", path=str(project / "hello.sh"))
        julia = await tool(session, "run_file", path=str(project / "model.jl"))
    assert ran["status"] == "ok" and ran["output"] == "hello agent\n", ran
    assert "No Jupyter kernel for Julia" in julia["error"] and "IJulia" in julia["error"]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=SERVER_ENV))
async def editor(lsp_client: LanguageClient) -> Any:
    """An editor's `runfix serve` that the test itself shuts down."""
    editor_like(lsp_client)
    yield
    with contextlib.suppress(Exception):  # already shut down by the test: only `exit` is left
        await asyncio.wait_for(lsp_client.shutdown_session(), 10)
    with contextlib.suppress(Exception):
        lsp_client.exit(None)


async def test_the_editors_server_stopping_mid_run_answers_the_agent(
    editor: Any, folder: Path
) -> None:
    await editor.initialize_session(init_params(folder, "neovim@v0.11.0"))
    editor.answer = ALLOW
    async with agent() as session:
        long = asyncio.ensure_future(
            tool(session, "run_code", folder=str(folder), code="import time\ntime.sleep(30)")
        )
        await asyncio.sleep(1.5)
        await editor.shutdown_async(None)
        said = await asyncio.wait_for(long, 30)
    # Answered (runfix serve waits for an agent's call to be answered before it stops).
    assert said.get("status") == "cancelled" and "shutting down" in said["message"], said


async def test_two_agents_at_once_get_their_own_answers(initialized: Any, folder: Path) -> None:
    """Two agents (two `runfix mcp` processes) on one folder: each call's answer is its own,
    in the one kernel they share with the user; their runs take turns."""
    initialized.answer = ALLOW
    async with agent("first") as one, agent("second") as two:

        async def many(session: ClientSession, name: str) -> list[str]:
            said = []
            for n in range(5):
                code = f"import time; time.sleep(0.05); print('{name}', {n})"
                said.append(
                    (await tool(session, "run_code", folder=str(folder), code=code))["output"]
                )
            return said

        first, second = await asyncio.gather(many(one, "first"), many(two, "second"))
    assert first == [f"first {n}\n" for n in range(5)]
    assert second == [f"second {n}\n" for n in range(5)]
    assert len(initialized.questions) == 1  # allowed for the session: asked once


async def test_a_socket_a_dead_server_left_does_not_stop_the_agent(tmp_path: Path) -> None:
    import socket

    from lsp_server.folder_socket import socket_path

    project = tmp_path / "left"
    project.mkdir()
    (project / ".git").mkdir()
    dead = socket.socket(socket.AF_UNIX)
    socket_path(project).unlink(missing_ok=True)  # (an earlier run's, of a folder now gone)
    dead.bind(str(socket_path(project)))  # bound, never listening: refused, as after a crash
    try:
        async with agent() as session:
            said = await tool(session, "run_code", folder=str(project), code="6 * 7")
    finally:
        dead.close()
        socket_path(project).unlink(missing_ok=True)
    assert said["status"] == "ok" and said["output"].strip() == "42", said


async def test_a_file_whose_inode_a_dead_servers_folder_had_is_not_a_folder_held(
    initialized: Any, folder: Path
) -> None:
    """A socket is named by its folder's device and inode, and a killed server's stays: a
    file or folder made later may get that inode. The agent's file still reaches the editor
    holding the folder above it (it was taken for a folder held, refused, and served alone:
    a kernel of its own, unasked; `runfix dap` said "does not answer")."""
    import socket

    initialized.answer = ALLOW
    uri = open_doc(initialized, folder / "data.py", "total = 40\n")
    assert (await run(initialized, uri))["status"] == "ok"
    (folder / "sub").mkdir()
    more = folder / "sub" / "more.py"
    more.write_text("total + 2\n")
    left = [socket.socket(socket.AF_UNIX) for _ in range(2)]
    for dead, named in zip(left, (more, more.parent), strict=True):
        socket_path(named).unlink(missing_ok=True)  # (an earlier run's, of a folder now gone)
        dead.bind(str(socket_path(named)))  # a killed server's, of a folder that had its inode
    try:
        async with agent() as session:
            answer = await tool(session, "run_lines", path=str(more), first=1)
    finally:
        for dead, named in zip(left, (more, more.parent), strict=True):
            dead.close()
            socket_path(named).unlink(missing_ok=True)
    assert answer["status"] == "ok" and "42" in answer["output"], answer


async def test_two_agents_on_two_folders_do_not_cross(editor: Any, tmp_path: Path) -> None:
    """One editor with two folders, one agent in each: each folder has its own kernel,
    consent, variables and record; nothing one agent does shows in the other's folder."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    params = init_params(one)
    params.workspace_folders = [
        lsp.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in (one, two)
    ]
    await editor.initialize_session(params)
    editor.answer = ALLOW
    async with agent("agent-one") as first, agent("agent-two") as second:

        async def work(session: ClientSession, folder: Path, name: str) -> Any:
            ran = await tool(session, "run_code", folder=str(folder), code=f"{name} = 1")
            listed = await tool(session, "variables", folder=str(folder))
            runs = await tool(session, "history", path=str(folder))
            return ran, {v["name"] for v in listed["variables"]}, runs["runs"]

        (ran1, names1, runs1), (ran2, names2, runs2) = await asyncio.gather(
            work(first, one, "only_in_one"), work(second, two, "only_in_two")
        )
    assert ran1["status"] == ran2["status"] == "ok"
    assert "only_in_one" in names1 and "only_in_two" not in names1
    assert "only_in_two" in names2 and "only_in_one" not in names2
    assert [r["origin"] for r in runs1] == ["agent: agent-one"], runs1
    assert [r["origin"] for r in runs2] == ["agent: agent-two"], runs2
    assert runs1[0]["code"] == "only_in_one = 1"
    assert sorted(q.message.split(" wants")[0] for q in editor.questions) == [
        'runfix: the agent "agent-one"',
        'runfix: the agent "agent-two"',
    ]  # consent is per folder


async def test_an_untrusted_folder_runs_nothing_for_an_agent(stranger: Any, folder: Path) -> None:
    """The editor holds a folder its user has not trusted: the agent's run is refused before
    anyone is asked to allow it (an agent can never ask for trust), and nothing ran."""
    await stranger.initialize_session(init_params(folder, "neovim@v0.11.0"))
    stranger.answer = ALLOW  # would allow the agent, were it asked
    sign = folder / "ran"
    (folder / "job.py").write_text(f"open({str(sign)!r}, 'w').close()\n")
    async with agent() as session:
        snippet = await tool(session, "run_code", folder=str(folder), code="print('hi')")
        on_disk = await tool(session, "run_file", path=str(folder / "job.py"))
    assert "is not trusted" in snippet["error"] and "is not trusted" in on_disk["error"]
    assert not sign.exists()
    assert not any("wants to run code" in q.message for q in stranger.questions)


async def test_runfix_mcp_alone_runs_nothing_in_an_untrusted_folder(tmp_path: Path) -> None:
    """No editor: the folder's trust, decided earlier, is the user's word; undecided is no."""
    project = tmp_path / "unknown"
    project.mkdir()
    (project / ".git").mkdir()
    sign = tmp_path / "ran"
    (project / "job.py").write_text(f"open({str(sign)!r}, 'w').close()\n")
    async with agent(env=UNTRUSTED_ENV) as session:
        said = await tool(session, "run_file", path=str(project / "job.py"))
    assert "is not trusted" in said["error"], said
    assert not sign.exists()
    assert not (project / ".runfix").exists()  # not even a record made there


@pytest.mark.parametrize("spelling", ["link", "double slash", "file through a link"])
async def test_another_spelling_of_the_folder_reaches_the_editor_and_its_consent(
    initialized: Any, folder: Path, tmp_path: Path, spelling: str
) -> None:
    """Issue 36: `//path`, a link to the folder, a file named through a link: the agent's
    call finds the editor's socket (the folder's identity, not its spelling), so the user is
    asked and the run lands in the editor's kernel — never a second kernel, unasked."""
    initialized.answer = ALLOW
    link = tmp_path / "link-to-project"
    link.symlink_to(folder)
    (folder / "job.py").write_text("made_by_agent = 7\n")
    async with agent("Spelling Agent") as session:
        if spelling == "link":
            ran = await tool(session, "run_code", folder=str(link), code="made_by_agent = 7")
        elif spelling == "double slash":
            ran = await tool(
                session, "run_code", folder="/" + str(folder), code="made_by_agent = 7"
            )
        else:
            ran = await tool(session, "run_file", path=str(link / "job.py"))
    assert ran.get("status") == "ok", ran
    [question] = initialized.questions  # asked in the editor
    assert "Spelling Agent" in question.message
    uri = open_doc(initialized, folder / "check.py", "made_by_agent * 6\n")
    assert (await run(initialized, uri))["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 42"]  # the editor's kernel


async def test_a_folder_added_after_initialized_is_the_editors_for_agents_too(
    initialized: Any, tmp_path: Path
) -> None:
    initialized.answer = ALLOW
    later = tmp_path / "later"
    later.mkdir()
    initialized.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            event=lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(uri=later.as_uri(), name="later")], removed=[]
            )
        )
    )
    await asyncio.sleep(0.5)  # (a notification: nothing answers it)
    async with agent("Later Agent") as session:
        ran = await tool(session, "run_code", folder=str(later), code="in_later = 1")
    assert ran.get("status") == "ok", ran
    [question] = initialized.questions  # the editor's server asked: it holds the folder
    assert "Later Agent" in question.message and "later" in question.message


needs_root = pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="another user is played by root only"
)


def test_without_xdg_runtime_dir_the_sockets_are_in_the_state_folder_not_the_shared_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 68, 6: with `XDG_RUNTIME_DIR` unset (macOS), the sockets' folder was under the
    shared temp folder, where model code renamed one folder's socket over another's."""
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = runtime_dir()
    assert root == tmp_path / "home" / ".local" / "state" / "runfix" / "run"
    assert root.stat().st_mode & 0o777 == 0o700
    assert root.parent.stat().st_mode & 0o077 == 0


@needs_root
def test_a_runtime_folder_inside_another_users_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: XDG_RUNTIME_DIR left pointing into another user's folder (what `su`
    without `-` leaves): that user could rename runfix's folder away and plant a socket."""
    theirs = tmp_path / "run-user-1000"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(theirs))
    with pytest.raises(AgentError, match="which another user owns"):
        runtime_dir()


@needs_root
async def test_a_socket_served_by_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: the agent's code never goes to a socket another user listens on, even in
    runfix's own folder: the peer's uid (SO_PEERCRED) is checked on connect."""
    mine = tmp_path / "run"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(mine))
    project = tmp_path / "project"
    project.mkdir()
    where = socket_path(project)
    impostor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, socket, sys, time\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666)\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "s.listen(); print('ready', flush=True)\n"
            "c, _ = s.accept(); time.sleep(5)\n",
            str(where),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert impostor.stdout is not None and impostor.stdout.readline().strip() == "ready"
        with pytest.raises(AgentError, match=r"served by another user \(uid 65534\)"):
            await connect(project)
    finally:
        impostor.kill()
        impostor.wait()


async def _second_editor(folder: Path) -> Any:
    """Another editor's `runfix serve` on the same folder (a second window), initialized."""
    second: Any = pytest_lsp.make_test_lsp_client()
    editor_like(second)
    await second.start_io(*SERVER, env=SERVER_ENV)
    await second.initialize_session(init_params(folder))
    await asyncio.sleep(0.5)  # (its agents' socket opens once it is initialized)
    return second


async def _quit(editor: Any) -> None:
    await asyncio.wait_for(editor.shutdown_async(None), 30)
    editor.exit(None)
    await asyncio.wait_for(editor._server.wait(), 10)


async def test_a_second_editor_quitting_never_leaves_agents_a_kernel_of_their_own(
    initialized: Any, folder: Path
) -> None:
    """Issue 47, S1 3: two editors hold one folder; the second quits. An agent's run is still
    the first editor's to allow (here it says no): it never gets a kernel of its own,
    unasked, while an editor holds the folder."""
    initialized.answer = "Deny"
    second = await _second_editor(folder)
    await _quit(second)
    async with agent("after-the-second") as session:
        said = await tool(session, "run_code", folder=str(folder), code="6 * 7")
    assert "42" not in str(said), said  # refused, not run alone
    [question] = initialized.questions
    assert "after-the-second" in question.message


async def test_when_the_editor_serving_agents_quits_another_editor_of_the_folder_takes_over(
    editor: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    await editor.initialize_session(init_params(folder))
    second = await _second_editor(folder)
    second.answer = ALLOW
    try:
        await asyncio.wait_for(editor.shutdown_async(None), 30)  # the first one goes
        editor.exit(None)
        await asyncio.sleep(3)  # the second looks every 2 s
        async with agent("after-the-first") as session:
            said = await tool(session, "run_code", folder=str(folder), code="6 * 7")
        assert said["status"] == "ok" and "42" in said["output"], said
        [question] = second.questions
        assert "after-the-first" in question.message  # asked in the editor still open
    finally:
        await _quit(second)


async def test_a_folder_renamed_while_an_agent_works_in_it_is_said_to_have_moved(
    initialized: Any, folder: Path
) -> None:
    """Issue 47, S3 10: the folder the editor holds is renamed while an agent is connected:
    a call by its old path or by its new one says it moved — not "is not in <old>", nor
    that an ancestor "is not trusted" — and runs nothing."""
    initialized.answer = ALLOW
    sign = folder.parent / "ran"
    async with agent() as session:
        before = await tool(session, "run_code", folder=str(folder), code="x = 1")
        assert before["status"] == "ok", before
        moved = folder.with_name(folder.name + "-renamed")
        folder.rename(moved)
        try:
            code = f"open({str(sign)!r}, 'w')"
            by_old = await tool(session, "run_code", folder=str(folder), code=code)
            (moved / "a.py").write_text(code + "\n")
            by_new = await tool(session, "run_lines", path=str(moved / "a.py"), first=1)
        finally:
            moved.rename(folder)
    for said in (by_old, by_new):
        assert "moved" in said["error"], said
        assert "is not in" not in said["error"] and "not trusted" not in said["error"]
    assert not sign.exists()


async def test_run_cell_names_a_notebooks_cell_by_its_number(tmp_path: Path) -> None:
    """Issue 49: an agent runs a notebook's cell by the number the notebook gives it (and
    `runfix run NB.ipynb` prints), markdown cells counted; a markdown cell, a number past the
    end and `cell` on a file that is no notebook each say so."""
    import nbformat
    from nbformat import v4

    project = tmp_path / "book"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'book'\n")
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell("# Areas"),
        v4.new_code_cell("def area(r):\n    return 3 * r * r"),
        v4.new_code_cell("print(area(2))"),
    ]
    path = project / "areas.ipynb"
    nbformat.write(nb, path)
    (project / "job.py").write_text("print(1)\n")
    async with agent("notebook-agent") as session:
        defined = await tool(session, "run_cell", path=str(path), cell=2)
        called = await tool(session, "run_cell", path=str(path), cell=3)
        markdown = await tool(session, "run_cell", path=str(path), cell=1)
        beyond = await tool(session, "run_cell", path=str(path), cell=9)
        script = await tool(session, "run_cell", path=str(project / "job.py"), cell=1)
    assert defined["status"] == "ok", defined
    assert called["status"] == "ok" and called["output"] == "12\n", called
    assert "cell 1 is a markdown cell" in markdown["error"], markdown
    assert "the notebook has 3 cells" in beyond["error"], beyond
    assert "a notebook's (.ipynb) cell number" in script["error"], script


async def _mcp_lines() -> tuple[asyncio.subprocess.Process, Any, Any]:
    """`runfix mcp` spoken to line by line (what the SDK's client never sends), initialized;
    (the process, a writer of messages, a reader of the next message)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lsp_server", "mcp", env=SERVER_ENV,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def read() -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(stdout.readline(), 60))
        return answer

    hello = {"protocolVersion": "2025-06-18", "clientInfo": {"name": "raw"}, "capabilities": {}}
    send({"id": 0, "method": "initialize", "params": hello})
    await read()
    send({"method": "notifications/initialized"})
    return process, send, read


async def test_a_cancelled_call_interrupts_its_run_and_a_malformed_cancel_ends_nothing(
    initialized: Any, folder: Path
) -> None:
    """Issue 58, S3: a cancelled call left the kernel running it (the next call waited
    20 s); a `notifications/cancelled` whose id is a list or an object ended `runfix mcp`."""
    initialized.answer = ALLOW
    process, send, read = await _mcp_lines()
    try:
        sleeps = {"folder": str(folder), "code": "import time\ntime.sleep(30)"}
        sleep = {"name": "run_code", "arguments": sleeps}
        send({"id": 1, "method": "tools/call", "params": sleep})
        await asyncio.sleep(2.0)  # (the consent asked, the run started)
        for odd in ([1], {"id": 1}):
            send({"method": "notifications/cancelled", "params": {"requestId": odd}})
        send({"method": "notifications/cancelled", "params": {"requestId": 1}})
        began = time.monotonic()
        quick = {"name": "run_code", "arguments": {"folder": str(folder), "code": "6 * 7"}}
        send({"id": 2, "method": "tools/call", "params": quick})
        answer = await read()
        waited = time.monotonic() - began
        assert answer["id"] == 2 and "42" in json.dumps(answer), answer
        assert waited < 10, f"the next call waited {waited:.1f} s for the cancelled run"
    finally:
        if process.stdin is not None:
            process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_server_takes_its_socket_back_when_it_is_moved_away(
    initialized: Any, folder: Path
) -> None:
    """Issue 68, 6: a socket renamed away (model code once renamed one folder's socket over
    another's) is noticed, and the server listens on its name again."""
    from lsp_server.folder_socket import answers

    uri = open_doc(initialized, folder / "x.py", "x = 1\n")
    assert (await run(initialized, uri))["status"] == "ok"
    where = socket_path(folder)
    for _ in range(100):  # (the editor's server serves agents once the folder is open)
        if await answers(where):
            break
        await asyncio.sleep(0.1)
    elsewhere = where.with_name("moved-away.sock")
    os.rename(where, elsewhere)
    try:
        for _ in range(100):
            if await answers(where):
                break
            await asyncio.sleep(0.1)
        assert await answers(where)
    finally:
        elsewhere.unlink(missing_ok=True)
