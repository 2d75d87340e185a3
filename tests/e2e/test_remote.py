"""End to end with `executor: "remote"`: a real `runfix serve`, a real Jupyter Server.

The run slice itself runs remotely too (`test_e2e_run.py`, `executor`
parameter); here is what only a server across a network brings: its token,
the server going down and coming back, the connection dropping mid-run, the
server culling an idle kernel, and which kernels outlive runfix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from websockets.asyncio.client import connect

from executor import remote
from executor.base import ExecutorState, ExecutorUnavailable
from executor.configs import RemoteConfig
from executor.events import RunRequest, RunStatus, Stream, Value
from tests.conftest import (
    API_KEY,
    API_KEY_ENV,
    HandDriven,
    errors,
    hints,
    init_params,
    make_wheel,
    open_doc,
    quick_fixes,
    run,
)
from tests.support.remote_server import TOKEN_ENV, JupyterServer, Proxy, free_port

pytestmark = pytest.mark.remote


@pytest.fixture
def own_server() -> Iterator[JupyterServer]:
    """A Jupyter Server of the test's own, to kill and start again."""
    server = JupyterServer().start()
    yield server
    server.stop()


def messages(client: LanguageClient) -> str:
    return "\n".join(m.message for m in client.messages)


def warnings(client: LanguageClient, uri: str) -> list[str]:
    return [
        d.message
        for d in client.diagnostics.get(uri, [])
        if d.severity == lsp.DiagnosticSeverity.Warning
    ]


async def test_runs_on_the_server_and_the_status_names_it(
    client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    before = {k["id"] for k in jupyter_server.kernels()}
    await client.initialize_session(init_params(folder, options=jupyter_server.options()))
    uri = open_doc(client, folder / "doc.py", "import os\nx = os.getpid()\nx > 0\n")

    assert (await run(client, uri))["status"] == "ok"

    assert [h.label for h in await hints(client, uri)] == ["→ True"]
    [created] = [k for k in jupyter_server.kernels() if k["id"] not in before]
    assert created["name"] == "python3"
    host = f"remote · 127.0.0.1:{jupyter_server.port}"
    assert {"state": "idle", "executor": host} in client.statuses


async def test_a_refused_token_says_which_variable_to_set_and_never_shows_it(
    client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    # The variable exists, holding something that is not this server's token.
    options = jupyter_server.options(tokenEnv=API_KEY_ENV)
    await client.initialize_session(init_params(folder, options=options))
    uri = open_doc(client, folder / "doc.py", "x = 1\n")

    answer = await run(client, uri)

    assert answer["status"] == "error"
    assert "HTTP 403" in answer["message"]
    assert f"set {API_KEY_ENV} to a valid token for {jupyter_server.url}" in answer["message"]
    assert answer["message"] in messages(client)
    assert API_KEY not in messages(client) + str(client.log_messages)


async def test_a_missing_token_variable_is_named(
    client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    options = jupyter_server.options(tokenEnv="RUNFIX_TEST_NO_SUCH_TOKEN")
    await client.initialize_session(init_params(folder, options=options))
    uri = open_doc(client, folder / "doc.py", "x = 1\n")

    answer = await run(client, uri)

    assert answer["status"] == "error"
    assert "Set the environment variable RUNFIX_TEST_NO_SUCH_TOKEN" in answer["message"]


async def test_a_server_that_is_down_is_said_and_used_once_it_is_up(
    client: LanguageClient, folder: Path
) -> None:
    server = JupyterServer(port=free_port())
    await client.initialize_session(init_params(folder, options=server.options()))
    uri = open_doc(client, folder / "doc.py", "x = 1\nx + 1\n")

    answer = await run(client, uri)

    assert answer["status"] == "error"
    assert f"Nothing answers at {server.url}" in answer["message"]
    server.start()
    try:
        assert (await run(client, uri))["status"] == "ok"
        assert [h.label for h in await hints(client, uri)] == ["→ 2"]
    finally:
        server.stop()


async def test_a_dropped_connection_mid_run_reconnects_to_the_same_kernel(
    client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    proxy = Proxy(jupyter_server.port)
    try:
        options = jupyter_server.options(url=proxy.url)
        await client.initialize_session(init_params(folder, options=options))
        text = "x = 5\nimport time\ntime.sleep(2)\nprint('slept', x)\n"
        uri = open_doc(client, folder / "doc.py", text)
        assert (await run(client, uri, 0, 0))["status"] == "ok"

        running = asyncio.ensure_future(run(client, uri, 1, 3))
        await asyncio.sleep(0.8)
        assert proxy.cut() >= 2  # the WebSocket's two sides, at least
        answer = await asyncio.wait_for(running, 60)

        assert answer["status"] == "ok"
        assert [h.label for h in await hints(client, uri)] == ["→ slept 5"]
        assert warnings(client, uri) == []  # state kept: nothing to warn about
    finally:
        proxy.close()


async def test_a_server_killed_mid_run_and_back_gives_a_new_kernel_and_says_state_was_lost(
    client: LanguageClient, folder: Path, own_server: JupyterServer
) -> None:
    await client.initialize_session(init_params(folder, options=own_server.options()))
    text = "x = 5\nimport time\ntime.sleep(30)\ny = 1\nprint('x' in dir())\n"
    uri = open_doc(client, folder / "doc.py", text)
    assert (await run(client, uri, 0, 0))["status"] == "ok"
    [old] = own_server.kernels()

    running = asyncio.ensure_future(run(client, uri, 1, 2))
    await asyncio.sleep(1.0)
    own_server.kill()
    await asyncio.sleep(1.0)
    await asyncio.to_thread(own_server.start)
    answer = await asyncio.wait_for(running, 90)

    assert answer["status"] == "error"
    [error] = errors(client, uri)
    assert error.range.start.line == 1  # the run's first line: no statement file remotely
    assert "gone from" in error.message and "state was lost" in error.message
    assert (await run(client, uri, 3, 4))["status"] == "ok"
    assert [h.label for h in await hints(client, uri)] == ["→ False"]
    [new] = own_server.kernels()
    assert new["id"] != old["id"]


async def test_a_culled_kernel_is_replaced_and_the_next_run_says_state_was_lost(
    client: LanguageClient, folder: Path
) -> None:
    server = JupyterServer(
        "--MappingKernelManager.cull_idle_timeout=2",
        "--MappingKernelManager.cull_interval=1",
        "--MappingKernelManager.cull_connected=True",  # runfix keeps its WebSocket open
    ).start()
    try:
        await client.initialize_session(init_params(folder, options=server.options()))
        uri = open_doc(client, folder / "doc.py", "x = 1\ny = 2\n")
        assert (await run(client, uri, 0, 0))["status"] == "ok"
        deadline = time.monotonic() + 30
        while server.kernels() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert server.kernels() == []  # culled
        await asyncio.sleep(0.5)  # the server closes the kernel's WebSocket

        assert (await run(client, uri, 1, 1))["status"] == "ok"

        [warning] = warnings(client, uri)
        assert "culled" in warning and "state was lost" in warning
        assert len(server.kernels()) == 1
    finally:
        server.stop()


def remote_run(server: HandDriven, folder: Path, jupyter: JupyterServer) -> Any:
    server.initialize(folder, jupyter.options())
    return server.run(folder / "doc.py", "x = 1\n")


@pytest.mark.parametrize("how", ["shutdown and exit", "stdin closed"])
def test_no_kernel_outlives_runfix(folder: Path, own_server: JupyterServer, how: str) -> None:
    server = HandDriven()
    try:
        assert remote_run(server, folder, own_server)["status"] == "ok"
        assert len(own_server.kernels()) == 1
        server.end(how)
        assert own_server.kernels() == []
    finally:
        server.kill()


def test_kernels_of_a_killed_runfix_are_deleted_by_the_next_and_no_one_elses(
    folder: Path, own_server: JupyterServer
) -> None:
    someone_elses = own_server.create()
    first = HandDriven()
    try:
        assert remote_run(first, folder, own_server)["status"] == "ok"
        [left] = [k["id"] for k in own_server.kernels() if k["id"] != someone_elses]
        first.end("server killed")
        assert {k["id"] for k in own_server.kernels()} == {someone_elses, left}
    finally:
        first.kill()
    second = HandDriven()
    try:
        assert remote_run(second, folder, own_server)["status"] == "ok"
        ids = {k["id"] for k in own_server.kernels()}
        assert someone_elses in ids and left not in ids and len(ids) == 2
        second.end("shutdown and exit")
        assert [k["id"] for k in own_server.kernels()] == [someone_elses]
    finally:
        second.kill()


async def test_a_slow_network_still_times_out_and_keeps_state(
    client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    proxy = Proxy(jupyter_server.port, delay=0.2)  # 400 ms round trips
    try:
        options = {**jupyter_server.options(url=proxy.url), "timeout": 1.5}
        await client.initialize_session(init_params(folder, options=options))
        uri = open_doc(client, folder / "doc.py", "x = 41\nimport time\ntime.sleep(60)\nx + 1\n")

        answer = await run(client, uri, 0, 2)

        assert answer["status"] == "timeout"
        [warning] = warnings(client, uri)
        assert "Timed out after 1.5s" in warning and "state is kept" in warning
        assert (await run(client, uri, 3, 3))["status"] == "ok"
        assert [h.label for h in await hints(client, uri)] == ["→ 42"]
    finally:
        proxy.close()


async def test_a_certificate_no_one_trusts_is_refused_unless_verification_is_off(
    client: LanguageClient, folder: Path
) -> None:
    server = JupyterServer(tls=True).start()
    try:
        await client.initialize_session(init_params(folder, "visual_studio_code"))
        client.set_configuration({"runfix": server.options()})
        uri = open_doc(client, folder / "doc.py", "x = 1\nx + 1\n")

        answer = await run(client, uri)

        assert answer["status"] == "error"
        assert f"TLS with 127.0.0.1:{server.port} failed" in answer["message"]
        assert "CERTIFICATE_VERIFY_FAILED" in answer["message"].upper().replace(" ", "_")
        assert "remote.verifyTls" in answer["message"]
        client.set_configuration({"runfix": server.options(verifyTls=False)})
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        await asyncio.sleep(0.5)
        assert (await run(client, uri))["status"] == "ok"
        assert [d.message for d in client.diagnostics[uri]] == ["→ 2"]
    finally:
        server.stop()


async def test_a_long_outage_answers_runs_at_once_and_the_state_is_back_with_the_network(
    folder: Path, jupyter_server: JupyterServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the executor: runs stop waiting once the server has been out of reach for
    `RECONNECT_PATIENCE` (shortened here), and reconnecting goes on meanwhile."""
    monkeypatch.setattr(remote, "RECONNECT_PATIENCE", 1.0)
    proxy = Proxy(jupyter_server.port)
    kernel = remote.RemoteKernel(folder, RemoteConfig(proxy.url, TOKEN_ENV))
    request = RunRequest("x = 7", str(folder / "doc.py"))
    try:
        assert (await kernel.execute(request)).status == RunStatus.OK
        proxy.down = True
        proxy.cut()
        await asyncio.sleep(3)

        began = time.monotonic()
        with pytest.raises(ExecutorUnavailable, match="keeps reconnecting in the background"):
            await kernel.execute(replace(request, code="x"))
        assert time.monotonic() - began < 1

        proxy.down = False
        for _ in range(60):
            if kernel.state == ExecutorState.IDLE and kernel._unreachable is None:
                break
            await asyncio.sleep(0.25)
        outcome = await kernel.execute(replace(request, code="x"))
        assert outcome.status == RunStatus.OK
        assert [e.data["text/plain"] for e in outcome.events if isinstance(e, Value)] == ["7"]
    finally:
        await kernel.shutdown()
        proxy.close()


async def test_install_runs_pip_in_the_remote_kernel_then_the_rerun_works(
    client: LanguageClient, folder: Path, tmp_path: Path
) -> None:
    wheels, site = tmp_path / "wheels", tmp_path / "remote-site"
    wheels.mkdir()
    site.mkdir()
    make_wheel(wheels, "runfix_remote_pkg", "VALUE = 'installed over there'\n")
    # The server's kernels install from the wheel folder only, into a folder of their own.
    pip = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), "PIP_TARGET": str(site)}
    server = JupyterServer(env={**pip, "PYTHONPATH": str(site)}).start()
    try:
        await client.initialize_session(init_params(folder, options=server.options()))
        text = "import runfix_remote_pkg\nrunfix_remote_pkg.VALUE\n"
        uri = open_doc(client, folder / "dep.py", text)
        assert (await run(client, uri))["status"] == "error"
        [install] = [a for a in await quick_fixes(client, uri) if a.title.startswith("Install")]
        assert install.title == "Install `runfix-remote-pkg`? (no known package provides it)"
        assert install.command is not None
        client.answer = "Install"  # not a published package: asked first

        answer = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(install.command.command, install.command.arguments)
        )

        assert answer["status"] == "ok", answer
        assert answer["run"]["status"] == "ok"
        assert [h.label for h in await hints(client, uri)] == ["→ 'installed over there'"]
        assert (site / "runfix_remote_pkg").is_dir()
        shown = [
            r.message
            for reports in client.progress_reports.values()
            for r in reports
            if isinstance(r, lsp.WorkDoneProgressReport) and r.message
        ]  # pip's own lines, passed on as it printed them
        assert any("Successfully installed runfix-remote-pkg" in m for m in shown), shown
    finally:
        server.stop()


async def test_the_server_closing_the_websocket_mid_run_loses_nothing(
    folder: Path, jupyter_server: JupyterServer, caplog: pytest.LogCaptureFixture
) -> None:
    """At the executor: a second connection with runfix's session makes the server close
    runfix's WebSocket itself ("replacing stale connection"); runfix reconnects with the
    same session and the run ends with all it printed."""
    caplog.set_level("INFO", logger="executor.remote")
    kernel = remote.RemoteKernel(folder, RemoteConfig(jupyter_server.url, TOKEN_ENV))
    code = "import time\nprint('before')\ntime.sleep(1.5)\nprint('after')\n"
    try:
        await kernel.start()
        link = kernel._socket
        assert link is not None
        running = asyncio.ensure_future(kernel.execute(RunRequest(code, str(folder / "d.py"))))
        await asyncio.sleep(0.5)
        address = jupyter_server.url.replace("http", "ws", 1)
        url = f"{address}/api/kernels/{kernel.kernel_id}/channels?session_id={link.session}"
        async with connect(url, additional_headers=jupyter_server.headers):
            await asyncio.sleep(0.5)  # the server has closed runfix's connection by now
        outcome = await asyncio.wait_for(running, 30)

        assert outcome.status == RunStatus.OK
        printed = "".join(e.text for e in outcome.events if isinstance(e, Stream))
        assert printed == "before\nafter\n"
        assert kernel._socket is link and link.connected.is_set()  # the same session, back
        assert "lost the WebSocket" in caplog.text and "reconnected to kernel" in caplog.text
    finally:
        await kernel.shutdown()


async def test_a_kernel_that_dies_as_it_starts_is_restarted_by_the_server_alone(
    folder: Path, jupyter_server: JupyterServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At the executor: the server restarts a dead kernel itself (one that dies in its
    first seconds comes back on new ports). runfix does not restart it a second time (the
    two restarts raced: a run after them was never answered) and the next run answers."""
    kernel = remote.RemoteKernel(folder, RemoteConfig(jupyter_server.url, TOKEN_ENV))
    sent: list[str] = []
    request_as_is = kernel.api.request

    async def request(method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(f"{method} {path}")
        return await request_as_is(method, path, *args, **kwargs)

    monkeypatch.setattr(kernel.api, "request", request)
    doc = str(folder / "d.py")
    try:
        assert (await kernel.execute(RunRequest("x = 1", doc))).status == RunStatus.OK
        dying = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"
        died = await asyncio.wait_for(kernel.execute(RunRequest(dying, doc)), 60)
        assert died.status == RunStatus.DIED and "the server restarted it" in died.note, died
        after = await asyncio.wait_for(kernel.execute(RunRequest("'x' in dir()", doc)), 60)
        assert after.status == RunStatus.OK, after
        assert [e.data["text/plain"] for e in after.events if isinstance(e, Value)] == ["False"]
        assert not [s for s in sent if s.endswith("/restart")], sent
    finally:
        await kernel.shutdown()


async def test_a_session_the_kernel_does_not_answer_is_replaced(
    folder: Path,
    jupyter_server: JupyterServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At the executor: a WebSocket session left on a dead process's ports is never
    answered; one not answered within `ATTACH_PATIENCE` (shortened here to less than any
    answer takes) is replaced by a new one, waiting twice as long, and the kernel starts."""
    caplog.set_level("INFO", logger="executor.remote")
    monkeypatch.setattr(remote, "ATTACH_PATIENCE", 0.0005)
    kernel = remote.RemoteKernel(folder, RemoteConfig(jupyter_server.url, TOKEN_ENV))
    try:
        outcome = await kernel.execute(RunRequest("6 * 7", str(folder / "d.py")))
        assert outcome.status == RunStatus.OK
        assert [e.data["text/plain"] for e in outcome.events if isinstance(e, Value)] == ["42"]
        assert "did not answer: a new session" in caplog.text
    finally:
        await kernel.shutdown()


async def test_another_language_runs_in_the_server_s_kernel_for_it(
    bash_kernel: None, client: LanguageClient, folder: Path, jupyter_server: JupyterServer
) -> None:
    """Issue 38: the server's `/api/kernelspecs` says which of its kernels runs a language
    (here bash_kernel's, on the server's Jupyter path); one it has none for says so."""
    before = {k["id"] for k in jupyter_server.kernels()}
    await client.initialize_session(init_params(folder, options=jupyter_server.options()))
    uri = open_doc(client, folder / "s.sh", "N=6\necho $((N * 7))\n", language="shellscript")
    python = open_doc(client, folder / "p.py", "6 * 7\n")
    assert (await run(client, uri))["status"] == "ok"
    assert any("42" in str(h.label) for h in await hints(client, uri))
    assert (await run(client, python))["status"] == "ok"
    made = sorted(k["name"] for k in jupyter_server.kernels() if k["id"] not in before)
    assert made == ["bash", "python3"], made
    julia = open_doc(client, folder / "m.jl", "x = 1 + 1\n", language="julia")
    answer = await run(client, julia)
    assert answer["status"] == "error", answer
    assert "has no Jupyter kernel for Julia" in answer["message"] and "bash" in answer["message"]
