"""End to end with `executor: "remote"` on a real Jupyter Enterprise Gateway.

The gateway runs from a venv of its own (`scripts/gateway`: it pins an old
jupyter-server, jupyter-client and pyzmq) and launches its kernels as local
processes, the way its Kubernetes process proxy launches pods: through the same
REST API and WebSocket runfix uses either way.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.conftest import HandDriven, errors, hints, init_params, open_doc, run
from tests.support.remote_server import GATEWAY, EnterpriseGateway

pytestmark = pytest.mark.remote


@pytest.fixture(scope="module")
def gateway() -> Iterator[EnterpriseGateway]:
    executable = Path(os.environ.get("RUNFIX_TEST_GATEWAY") or GATEWAY)
    if not executable.exists():
        why = f"no Enterprise Gateway at {executable}: scripts/gateway installs it"
        if os.environ.get("RUNFIX_REQUIRE_GATEWAY") == "1":
            pytest.fail(why)
        pytest.skip(why)
    server = EnterpriseGateway(executable).start()
    yield server
    server.stop()


async def test_create_run_interrupt_restart_on_a_gateway_with_the_user_passed(
    client: LanguageClient, folder: Path, gateway: EnterpriseGateway
) -> None:
    options = {**gateway.options(kernelEnv={"KERNEL_USERNAME": "ada"}), "timeout": 1.5}
    await client.initialize_session(init_params(folder, options=options))
    text = (
        "import os\nx = 41\nos.environ.get('KERNEL_USERNAME')\nimport time\ntime.sleep(60)\nx + 1\n"
    )
    uri = open_doc(client, folder / "doc.py", text)

    assert (await run(client, uri, 0, 2))["status"] == "ok"
    assert [h.label for h in await hints(client, uri)] == ["→ 'ada'"]
    assert (await run(client, uri, 3, 4))["status"] == "timeout"  # interrupted: state kept
    assert (await run(client, uri, 5, 5))["status"] == "ok"
    assert "→ 42" in [h.label for h in await hints(client, uri)]
    [kernel] = gateway.kernels()

    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.restart", arguments=[{"uri": uri}])
    )
    assert (await run(client, uri, 5, 5))["status"] == "error"

    [error] = errors(client, uri)
    assert error.message == "NameError: name 'x' is not defined"
    assert [k["id"] for k in gateway.kernels()] == [kernel["id"]]  # restarted, not replaced


@pytest.mark.skipif(os.geteuid() != 0, reason="the gateway asks who only of root")
async def test_a_gateway_that_wants_to_know_who_says_where_to_say_it(
    client: LanguageClient, folder: Path, gateway: EnterpriseGateway
) -> None:
    await client.initialize_session(init_params(folder, options=gateway.options()))
    uri = open_doc(client, folder / "doc.py", "x = 1\n")

    answer = await run(client, uri)

    assert answer["status"] == "error"
    assert "KERNEL_USERNAME" in answer["message"]
    assert "runfix's remote.kernelEnv" in answer["message"]


@pytest.mark.parametrize("how", ["shutdown and exit", "stdin closed"])
def test_runfix_deletes_its_gateway_kernel_when_it_ends(
    folder: Path, gateway: EnterpriseGateway, how: str
) -> None:
    server = HandDriven()
    try:
        server.initialize(folder, gateway.options(kernelEnv={"KERNEL_USERNAME": "ada"}))
        assert server.run(folder / "doc.py", "x = 1\n")["status"] == "ok"
        assert len(gateway.kernels()) == 1
        server.end(how)
        assert gateway.kernels() == []
    finally:
        server.kill()


async def test_a_gateways_kernel_stops_at_a_breakpoint(
    client: LanguageClient, folder: Path, gateway: EnterpriseGateway
) -> None:
    """Issue 60: the debugger of a kernel the gateway launched, on the control channel of
    its WebSocket (the gateway relays control as it relays the rest)."""
    from tests.conftest import SERVER_ENV
    from tests.e2e.test_debug import DOC
    from tests.support.dap_client import dap, said

    options = gateway.options(kernelEnv={"KERNEL_USERNAME": "ada"})
    await client.initialize_session(init_params(folder, options=options))
    path = folder / "sales.py"
    uri = open_doc(client, path, DOC)
    assert (await run(client, uri))["status"] == "ok", errors(client, uri)
    async with dap(SERVER_ENV) as debugger:
        stop = await debugger.stop_at(path, 10, path, 5)
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(path), 5)
        assert said(await debugger.variables(stop["frame"]["id"]))["s"] == "0"
