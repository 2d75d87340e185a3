"""End to end with `executor: "docker"`: a real `runfix serve`, a real engine, over LSP.

The run slice itself runs in the sandbox too (`test_e2e_run.py`, `executor`
parameter); here is what only the sandbox does: its containers' lifetime,
out-of-memory reports, installs without a network, and model-written code
that needs no confirmation because the container is the control.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from executor.docker import FOLDER_LABEL, engine
from tests.conftest import (
    HandDriven,
    errors,
    hints,
    init_params,
    make_wheel,
    open_doc,
    quick_fixes,
    run,
)
from tests.support.model_server import ModelServer, code

pytestmark = pytest.mark.docker


@pytest.fixture
def sandboxed(folder: Path, sandbox_image: str) -> Path:
    folder.chmod(0o777)  # nobody (the sandbox's user when the tests run as root) may write
    return folder


def containers_of(folder: Path) -> list[Any]:
    label = f"{FOLDER_LABEL}={folder}"
    return list(engine().containers.list(all=True, filters={"label": label}))


def docker_options(**docker: Any) -> dict[str, Any]:
    return {"executor": "docker", "docker": docker}


async def command(client: LanguageClient, name: str, arg: Any) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command=name, arguments=[arg])
    )


@pytest.mark.parametrize("how", ["shutdown and exit", "stdin closed"])
def test_no_container_outlives_the_server(sandboxed: Path, how: str) -> None:
    server = HandDriven()
    try:
        server.initialize(sandboxed, docker_options())
        assert server.run(sandboxed / "doc.py", "x = 1\n")["status"] == "ok"
        [container] = containers_of(sandboxed)
        assert container.status == "running"
        server.end(how)
        assert containers_of(sandboxed) == []
    finally:
        server.kill()


def test_containers_of_a_killed_server_are_removed_by_the_next(sandboxed: Path) -> None:
    first = HandDriven()
    try:
        first.initialize(sandboxed, docker_options())
        assert first.run(sandboxed / "doc.py", "x = 1\n")["status"] == "ok"
        [left] = containers_of(sandboxed)
        first.end("server killed")
        assert [c.id for c in containers_of(sandboxed)] == [left.id]  # nobody cleaned up yet
    finally:
        first.kill()
    second = HandDriven()
    try:
        second.initialize(sandboxed, docker_options())
        assert second.run(sandboxed / "doc.py", "x = 2\n")["status"] == "ok"
        [now] = containers_of(sandboxed)
        assert now.id != left.id
        second.end("shutdown and exit")
        assert containers_of(sandboxed) == []
    finally:
        second.kill()


async def test_out_of_memory_is_reported_on_the_run_and_the_next_run_works(
    client: LanguageClient, sandboxed: Path
) -> None:
    await client.initialize_session(init_params(sandboxed, options=docker_options(memory="256m")))
    text = "x = 1\nhog = b'x' * 2**30\nprint('after')\n"
    uri = open_doc(client, sandboxed / "oom.py", text)

    answer = await run(client, uri, 0, 1)

    assert answer["status"] == "error"
    [error] = errors(client, uri)
    assert error.range.start.line == 1
    assert error.message.startswith("killed: out of memory (limit 256m)")
    assert "state was lost" in error.message
    assert (await run(client, uri, 2, 2))["status"] == "ok"
    assert [h.label for h in await hints(client, uri)] == ["→ after"]


@pytest.mark.parametrize("client_name", ["visual_studio_code", "neovim@v0.7.0"])
async def test_install_without_network_says_why_and_how_to_allow_it(
    client: LanguageClient, sandboxed: Path, client_name: str
) -> None:
    await client.initialize_session(init_params(sandboxed, client_name, docker_options()))
    uri = open_doc(client, sandboxed / "dep.py", "import yaml\n")
    assert (await run(client, uri))["status"] == "error"

    [install] = [a for a in await quick_fixes(client, uri) if a.title.startswith("Install")]

    assert install.title.lower() == "install pyyaml"
    if client_name == "visual_studio_code":  # it can show why an action is disabled
        assert install.disabled is not None and install.command is None
        reason = install.disabled.reason
    else:  # it cannot: the command says why
        assert install.command is not None
        answer = await command(client, install.command.command, install.command.arguments[0])
        assert answer["status"] == "error"
        reason = answer["message"]
        assert reason in "\n".join(m.message for m in client.messages)
    assert 'docker.network is "none"' in reason
    assert "docker.wheels" in reason


async def test_install_from_a_wheel_folder_with_no_network_then_rerun(
    client: LanguageClient, sandboxed: Path
) -> None:
    wheels = sandboxed.parent / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "runfix_sandbox_pkg", "VALUE = 'from the wheel'\n")
    for path in (sandboxed.parent, wheels):
        path.chmod(0o755)
    options = docker_options(wheels=str(wheels))
    await client.initialize_session(init_params(sandboxed, "neovim@v0.11.0", options))
    uri = open_doc(
        client, sandboxed / "dep.py", "import runfix_sandbox_pkg\nrunfix_sandbox_pkg.VALUE\n"
    )
    assert (await run(client, uri))["status"] == "error"
    [install] = [a for a in await quick_fixes(client, uri) if a.title.startswith("Install")]
    assert install.command is not None and install.disabled is None
    client.answer = "Install"  # not a published package: asked first, in the sandbox too

    answer = await command(client, install.command.command, install.command.arguments[0])

    assert answer["status"] == "ok", answer
    assert answer["run"]["status"] == "ok"
    assert errors(client, uri) == []
    assert [h.label for h in await hints(client, uri)] == ["→ 'from the wheel'"]
    assert not list(sandboxed.rglob("runfix_sandbox_pkg"))  # not in the workspace


async def test_flagged_model_code_runs_in_the_sandbox_without_asking(
    client: LanguageClient, sandboxed: Path
) -> None:
    with ModelServer() as model:
        options = {
            **docker_options(),
            "model": {
                "baseUrl": model.url,
                "name": "test-model",
                "apiKeyEnv": "RUNFIX_TEST_API_KEY",
            },
        }
        await client.initialize_session(init_params(sandboxed, "neovim@v0.11.0", options))
        uri = open_doc(client, sandboxed / "flag.py", "# ai: make a file\n")
        model.script(code("import subprocess\nsubprocess.run(['touch', 'ran.txt'])"))
        result = await command(
            client,
            "runfix.generate",
            {"uri": uri, "position": {"line": 0, "character": 0}, "run": True},
        )
    assert result["status"] == "ok"
    assert result["run"]["status"] == "ok"
    assert client.questions == []
    assert (sandboxed / "ran.txt").exists()  # it ran, in the container, on the mounted folder
    await asyncio.sleep(0.2)
    warnings = [d for d in client.diagnostics[uri] if d.severity == lsp.DiagnosticSeverity.Warning]
    assert [d.range.start.line for d in warnings] == [2]  # still shown as a finding


async def test_switching_the_executor_moves_the_folder_into_the_sandbox_and_back(
    client: LanguageClient, sandboxed: Path
) -> None:
    await client.initialize_session(init_params(sandboxed, "visual_studio_code"))
    uri = open_doc(client, sandboxed / "where.py", "import os\nos.getcwd() == '/workspace'\n")

    async def in_sandbox() -> bool:
        assert (await run(client, uri))["status"] == "ok"
        [info] = [d for d in client.diagnostics[uri] if d.message.startswith("→")]
        return info.message == "→ True"

    assert not await in_sandbox()
    for executor in ("docker", "kernel"):
        client.set_configuration({"runfix": {"executor": executor}})
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        await asyncio.sleep(0.5)
        assert await in_sandbox() == (executor == "docker")
    for _ in range(50):  # the container stops once the folder is back on the local kernel
        if not containers_of(sandboxed):
            break
        await asyncio.sleep(0.2)
    assert containers_of(sandboxed) == []
