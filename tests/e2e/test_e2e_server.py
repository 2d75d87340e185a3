"""End to end: code actions, code lens, bad input, folders, and no orphan kernels."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import LanguageClient

from tests.conftest import (
    EVERY_CLIENT,
    SERVER,
    SERVER_ENV,
    HandDriven,
    change,
    errors,
    hints,
    init_params,
    open_doc,
    run,
    run_args,
)

CELLS = "# %% one\nx = 1\n# %% two\nx + 1\n"


def action_command(item: lsp.CodeAction | lsp.Command) -> lsp.Command:
    """The command of a code action as the client received it.

    lsprotocol's client-side hook reads any code action that has a `command`
    member as a bare Command, with the action's command object stringified into
    `command`; undo that here rather than in the server, which sends proper
    CodeActions (with `kind`, as clients with codeActionLiteralSupport expect).
    """
    if isinstance(item, lsp.CodeAction):
        assert item.command is not None
        return item.command
    raw = ast.literal_eval(item.command)
    return lsp.Command(title=raw["title"], command=raw["command"], arguments=raw.get("arguments"))


async def test_code_actions_offer_cell_selection_and_file(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "doc.py", CELLS)
    doc = lsp.TextDocumentIdentifier(uri=uri)
    context = lsp.CodeActionContext(diagnostics=[])

    at_cursor = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(doc, lsp.Range(lsp.Position(3, 0), lsp.Position(3, 0)), context)
    )
    selected = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(doc, lsp.Range(lsp.Position(1, 0), lsp.Position(3, 5)), context)
    )
    quickfix_only = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(
            doc,
            lsp.Range(lsp.Position(3, 0), lsp.Position(3, 0)),
            lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.QuickFix]),
        )
    )

    assert [a.title for a in at_cursor or []] == ["Run cell", "Run file", "Run and fix cell"]
    assert [a.title for a in selected or []] == [
        "Run cell",
        "Run selection",
        "Run file",
        "Run and fix selection",
        "Run dependents (1 cell)",  # cell two reads the x cell one defines
    ]
    assert not quickfix_only
    run_cell = action_command((at_cursor or [])[0])
    # the action's command runs the second cell only: x is not defined yet
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(run_cell.command, run_cell.arguments)
    )
    assert answer["status"] == "error"
    assert errors(initialized, uri)[0].message == "NameError: name 'x' is not defined"
    run_selection = action_command((selected or [])[1])
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(run_selection.command, run_selection.arguments)
    )
    assert answer["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 2"]


async def test_code_lens_over_each_cell_marker(initialized: LanguageClient, folder: Path) -> None:
    marked = open_doc(initialized, folder / "cells.py", CELLS)
    plain = open_doc(initialized, folder / "plain.py", "print('no markers')\n")

    lenses = await initialized.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=marked))
    )
    plain_lenses = await initialized.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=plain))
    )

    assert [
        (lens.range.start.line, lens.command and lens.command.title) for lens in lenses or []
    ] == [
        (0, "▶ Run cell"),
        (2, "▶ Run cell"),
    ]
    [lens] = plain_lenses or []
    assert lens.range.start.line == 0 and lens.command is not None
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(lens.command.command, lens.command.arguments)
    )
    assert answer["status"] == "ok"
    assert [h.label for h in await hints(initialized, plain)] == ["→ no markers"]

    # asked again after an edit: the lenses of the new text, not those kept for the old one
    change(initialized, marked, 2, (4, 0), (4, 0), "# %% three\nx + 2\n")
    again = await initialized.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=marked))
    )
    assert [lens.range.start.line for lens in again or []] == [0, 2, 4]
    last = (again or [])[-1].command
    assert last is not None and list(last.arguments or []) == run_args(marked, 5, 5)


README_FILE = (
    '# %% load\nprices = {"tea": 3.5, "cake": 4.2}\nprint("total", sum(prices.values()))\n\n'
    "# %% look\nmax(prices, key=prices.get)\n\n# %% ai: the mean price, rounded to 2 places\n"
    "\n# ai: the cheapest item\nmin(prices, key=prices.get)\n"
)


async def test_a_prompt_on_a_cell_marker_or_its_own_line_gets_a_generate_lens(
    initialized: LanguageClient, folder: Path
) -> None:
    """The README's prompt (`# %% ai: …`, issue 46) and one on a line of its own."""
    uri = open_doc(initialized, folder / "readme.py", README_FILE)
    lenses = await initialized.text_document_code_lens_async(
        lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri=uri))
    )
    shown = [(lens.range.start.line, lens.command and lens.command.title) for lens in lenses or []]
    assert (7, "Generate") in shown and (9, "Regenerate") in shown
    assert [line for line, title in shown if title == "▶ Run cell"] == [0, 4, 7, 9]
    generate = next(
        lens.command
        for lens in lenses or []
        if lens.range.start.line == 7 and lens.command and lens.command.title == "Generate"
    )
    assert generate is not None and generate.command == "runfix.generate"
    assert list(generate.arguments or []) == [
        {"uri": uri, "position": {"line": 7, "character": 0}, "run": False}
    ]
    actions = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri=uri),
            lsp.Range(lsp.Position(7, 0), lsp.Position(7, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    assert "Generate code" in [a.title for a in actions or []]


async def test_inlay_hints_answer_the_lines_asked_for(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "many.py", "".join(f"{i}\n" for i in range(30)))
    assert (await run(initialized, uri))["status"] == "ok"

    asked = await initialized.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(10, 0), lsp.Position(12, 0)),
        )
    )
    assert [h.label for h in asked or []] == ["→ 10", "→ 11", "→ 12"]
    assert len(await hints(initialized, uri)) == 30
    change(initialized, uri, 2, (0, 0), (0, 0), "# a comment\n")
    moved = await initialized.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(10, 0), lsp.Position(12, 0)),
        )
    )
    assert [h.label for h in moved or []] == ["→ 9", "→ 10", "→ 11"]


MALFORMED: list[list[Any]] = [
    [],
    ["file:///x.py"],
    [{"uri": 3}],
    [{"uri": "file:///x.py", "range": {"start": 1}}],
]


@pytest.mark.parametrize("client_name", EVERY_CLIENT)
async def test_malformed_run_arguments_get_a_clear_error(
    initialized: LanguageClient, folder: Path
) -> None:
    for arguments in MALFORMED:
        with pytest.raises(JsonRpcInvalidParams, match=r"runfix\.run: \S"):
            await initialized.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="runfix.run", arguments=arguments)
            )
    uri = open_doc(initialized, folder / "doc.py", "1 + 1\n")
    assert (await run(initialized, uri))["status"] == "ok"  # the server is still there
    assert initialized.messages == []  # and it did not pop anything up


async def test_interpreter_without_ipykernel_is_explained(
    client: LanguageClient, folder: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    params = init_params(folder)
    params.initialization_options = {"python": str(bare)}
    await client.initialize_session(params)

    uri = open_doc(client, folder / "doc.py", "print('hi')\n")
    answer = await run(client, uri)

    assert answer["status"] == "error"
    [error] = errors(client, uri)
    assert "has no ipykernel" in error.message
    assert "-m pip install ipykernel" in error.message
    assert any("has no ipykernel" in m.message for m in client.messages)


async def test_runs_in_one_folder_queue_and_other_folders_do_not_wait(
    client: LanguageClient, tmp_path: Path
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    params = init_params(first)
    params.workspace_folders = [
        lsp.WorkspaceFolder(uri=first.as_uri(), name="a"),
        lsp.WorkspaceFolder(uri=second.as_uri(), name="b"),
    ]
    await client.initialize_session(params)
    slow = open_doc(client, first / "slow.py", "import time\ntime.sleep(4)\norder = ['slow']\n")
    queued = open_doc(client, first / "queued.py", "order.append('queued'); order\n")
    other = open_doc(client, second / "other.py", "'other folder'\n")
    await run(client, other)  # both kernels are up

    finished: list[str] = []

    async def timed(name: str, uri: str) -> None:
        answer = await run(client, uri)
        assert answer["status"] == "ok", (name, answer)
        finished.append(name)

    slow_run = asyncio.ensure_future(timed("slow", slow))
    await asyncio.sleep(0.3)
    queued_run = asyncio.ensure_future(timed("queued", queued))
    await asyncio.sleep(0.3)
    await timed("other", other)
    await asyncio.gather(slow_run, queued_run)

    assert finished == ["other", "slow", "queued"]
    assert [h.label for h in await hints(client, queued)] == ["→ ['slow', 'queued']"]


def _kernel_pid_after_run(folder: Path, server: HandDriven) -> int:
    """Run code that writes the kernel's pid to a file; that pid."""
    pid_file = folder / "pid.txt"
    server.initialize(folder, {"python": sys.executable})
    text = f"import os\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
    assert server.run(folder / "doc.py", text)["status"] == "ok"
    return int(pid_file.read_text())


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with contextlib.suppress(ChildProcessError):  # reap it if it became our zombie
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["shutdown and exit", "stdin closed", "server killed"])
def test_no_kernel_outlives_the_server(folder: Path, how: str) -> None:
    server = HandDriven()
    try:
        kernel = _kernel_pid_after_run(folder, server)
        assert not _gone(kernel, within=0.2)
        server.end(how)
        assert _gone(kernel), f"kernel {kernel} still running after: {how}"
    finally:
        server.kill()


def _one_kernel_soon(server: HandDriven, within: float = 15.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if kernels := server.kernels():
            [kernel] = kernels
            return kernel
        time.sleep(0.05)
    raise AssertionError("no kernel was started")


def test_the_root_folders_kernel_starts_with_initialize_and_runs_the_first_code(
    folder: Path,
) -> None:
    """Launched from `initialize` (before a document opens) and used by the first run:
    no second kernel."""
    server = HandDriven()
    try:
        server.initialize(folder, {"python": sys.executable})
        early = _one_kernel_soon(server)
        assert _kernel_pid_after_run(folder, server) == early
        assert server.kernels() == {early}
    finally:
        server.kill()


def test_no_kernel_starts_before_the_clients_own_settings_are_known(folder: Path) -> None:
    """A client that answers `workspace/configuration` may say where code runs (the sandbox,
    another interpreter): nothing starts at `initialize`, only once those settings are read,
    and the kernel is made as the client says."""
    server = HandDriven()
    server.configuration = {"transport": "tcp"}
    try:
        capabilities = {"workspace": {"configuration": True}}
        server.initialize(folder, {"python": sys.executable, "transport": "ipc"}, capabilities)
        time.sleep(1.5)
        assert server.kernels() == set()
        text = "import os\nos.getpid()\n"
        assert server.run(folder / "doc.py", text)["status"] == "ok"
        [kernel] = server.kernels()
        assert "tcp" in _connection_of(kernel)
    finally:
        server.kill()


def test_a_trusted_folder_gets_its_kernel_at_initialize_from_a_client_without_settings(
    folder: Path,
) -> None:
    """Nothing is left to decide (the folder is trusted, the client sends no settings of its
    own): the kernel boots while the server is built, and the first run uses it."""
    server = HandDriven()
    try:
        server.initialize(folder, {"python": sys.executable}, {})
        early = _one_kernel_soon(server)
        assert server.run(folder / "doc.py", "1 + 1\n")["status"] == "ok"
        assert server.kernels() == {early}
    finally:
        server.kill()


def _connection_of(pid: int) -> str:
    """The transport in the connection file a kernel process was started with."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    connection = Path(argv[argv.index(b"-f") + 1].decode())
    return str(json.loads(connection.read_text())["transport"])


async def test_run_cell_at_a_position_and_status_notifications(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "cells.py", "# %% one\nx = 1\n# %% two\nx + 1\n")

    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            "runfix.run", [{"uri": uri, "position": {"line": 1, "character": 0}}]
        )
    )
    assert answer["status"] == "ok"
    answer = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(
            "runfix.run", [{"uri": uri, "position": {"line": 2, "character": 3}}]
        )
    )  # the marker line runs its own cell
    assert answer["status"] == "ok"
    assert [h.label for h in await hints(initialized, uri)] == ["→ 2"]

    await asyncio.sleep(0.2)
    states = [s["state"] for s in initialized.statuses]
    assert states == ["starting", "idle"]  # runs of a few milliseconds flash nothing
    slow = open_doc(initialized, folder / "slow.py", "import time\ntime.sleep(0.5)\n")
    assert (await run(initialized, slow))["status"] == "ok"
    await asyncio.sleep(0.2)
    states = [s["state"] for s in initialized.statuses]
    assert states == ["starting", "idle", "busy", "idle"]
    assert {s["executor"] for s in initialized.statuses} == {"kernel"}
    statuses = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.status", [])
    )
    [status] = statuses or []
    assert status == {"folder": folder.as_uri(), "state": "idle", "executor": "kernel"}
    with pytest.raises(JsonRpcInvalidParams, match="position"):
        await initialized.workspace_execute_command_async(
            lsp.ExecuteCommandParams("runfix.run", [{"uri": uri, "position": {"line": -1}}])
        )


def test_the_server_answers_initialize_before_it_loads_kernel_or_model_libraries() -> None:
    """jupyter_client, docker-py and openai take ~0.5 s to import: a server answers
    `initialize` without them, and loads each when a kernel or a model is first needed."""
    init: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}
    probe = (
        "import json, sys\n"
        "from lsp_server.lsp.app import create_server\n"
        "from lsp_server.lsp.transport import handle_frame\n"
        "server = create_server()\n"
        "sent = []\n"
        "server.protocol.set_writer(type('W', (), {'write': lambda self, b: sent.append(b)})())\n"
        f"message = {{'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {init!r}}}\n"
        "handle_frame(server.protocol, json.dumps(message).encode())\n"
        "print(json.dumps({'answered': len(sent), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["answered"] == 1, done.stdout + done.stderr
    heavy = {"jupyter_client", "docker", "openai", "zmq", "executor.local", "executor.docker"}
    assert not set(report["modules"]) & heavy, sorted(set(report["modules"]) & heavy)


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_frame(stream: Any) -> dict[str, Any]:
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    answer: dict[str, Any] = json.loads(stream.read(length))
    return answer


def test_a_second_start_answers_initialize_before_it_builds_itself(tmp_path: Path) -> None:
    """The first server answers `initialize` the usual way and keeps its answer (in the
    user's cache folder); the next one, for the same client, answers with it before it
    imports pygls, then works as always. The answers are the same."""
    env = {**SERVER_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    init = {
        "processId": None,
        "rootUri": None,
        "capabilities": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    }
    answers, logs = [], []
    for _ in range(2):
        server = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(
            _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        )
        server.stdin.flush()
        answers.append(_read_frame(server.stdout))
        server.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        doc = {"uri": (tmp_path / "a.py").as_uri(), "languageId": "python", "version": 1}
        opened = {"textDocument": {**doc, "text": "x = 1\n"}}
        server.stdin.write(
            _frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": opened})
        )
        asked = {"textDocument": {"uri": doc["uri"]}, "position": {"line": 0, "character": 0}}
        server.stdin.write(
            _frame({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": asked})
        )
        server.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        server.stdin.flush()
        answered = {}
        while 2 not in answered:  # besides its log messages and diagnostics
            if "id" in (message := _read_frame(server.stdout)):
                answered[message["id"]] = message
        assert answered[3] == {"jsonrpc": "2.0", "id": 3, "result": None}  # nothing ran there
        assert answered[2] == {"jsonrpc": "2.0", "id": 2, "result": None}
        server.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.close()
        assert server.wait(timeout=30) == 0
        logs.append(server.stderr.read().decode() if server.stderr else "")
    first, second = answers
    assert first["result"]["capabilities"]["positionEncoding"] == "utf-8"
    assert first == second
    assert "answered as this server answered this client before" not in logs[0]
    assert "answered as this server answered this client before" in logs[1]
    assert len(list((tmp_path / "cache" / "runfix" / "initialize").glob("*.json"))) == 1


def _serve_for(folder: Path, seconds: float) -> tuple[list[str], str]:
    """Run `runfix serve` on `folder` as an editor would for `seconds`: the log messages
    it sent (`window/logMessage`) and what it wrote to stderr."""
    env = {**SERVER_ENV, "XDG_RUNTIME_DIR": str(folder.parent / "run")}
    server = subprocess.Popen(
        SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    init: dict[str, Any] = {
        "processId": None,
        "rootUri": folder.as_uri(),
        "workspaceFolders": [{"uri": folder.as_uri(), "name": folder.name}],
        "capabilities": {},
    }
    server.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    server.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    server.stdin.flush()
    logged: list[str] = []
    stdout = server.stdout

    def read() -> None:
        with contextlib.suppress(Exception):
            while True:
                message = _read_frame(stdout)
                if message.get("method") == "window/logMessage":
                    logged.append(message["params"]["message"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(seconds)
    server.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    server.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
    server.stdin.close()
    server.wait(timeout=30)
    reader.join(timeout=5)
    return logged, server.stderr.read().decode()


def test_the_log_of_a_second_editor_of_a_folder_says_each_thing_once(tmp_path: Path) -> None:
    """Issue 61, 5: a line the client was sent is not written to stderr again (VS Code's
    output showed each twice, once as an error), and a server standing by for another
    editor's says so once, not every time it looks (210 of 221 lines before)."""
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "run").mkdir(mode=0o700)

    first: list[tuple[list[str], str]] = []
    holder = threading.Thread(target=lambda: first.append(_serve_for(folder, 14)))
    holder.start()
    time.sleep(3)  # the first server holds the folder's agents' socket
    logged, stderr = _serve_for(folder, 10)
    holder.join()
    standing = [m for m in logged if "stands by" in m]
    assert len(standing) == 1, logged
    assert len(logged) == len(set(logged)), logged  # no line said twice
    for message in logged:
        assert message not in stderr, stderr  # each line once: to the client
    for said, err in first:
        assert len(said) == len(set(said)) and not any(m in err for m in said)
