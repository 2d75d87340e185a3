"""The Docker sandbox on a real engine: every limit tried from inside with a canary.

Nothing here is destructive on the host: each case probes the container it
runs in (a connect that must fail, a write that must fail, a fork bomb that
must stop at the pids limit) and checks that the host and the next run are fine.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from executor import RunRequest, RunStatus, Stream, Value
from executor.base import ExecutorUnavailable
from executor.configs import DockerConfig
from executor.docker import FOLDER_LABEL, LABEL, DockerKernel, engine, sandbox_environment
from tests.conftest import open_to_sandbox

pytestmark = pytest.mark.docker

HOST_CANARY = "RUNFIX_HOST_CANARY"
HOST_CANARY_VALUE = "host-canary-5b1d"


def request(code: str, timeout: float = 30, limit: int = 100_000) -> RunRequest:
    return RunRequest(code, "/host/cell.py", 1, timeout, output_limit=limit)


def printed(outcome: object) -> str:
    return "".join(e.text for e in getattr(outcome, "events", ()) if isinstance(e, Stream))


def value(outcome: object) -> str:
    [v] = [e for e in getattr(outcome, "events", ()) if isinstance(e, Value)]
    return v.data["text/plain"]


async def sandbox(folder: Path, **config: object) -> DockerKernel:
    open_to_sandbox(folder)
    kernel = DockerKernel(folder, DockerConfig(**config), grace=2.0)  # type: ignore[arg-type]
    await kernel.start()
    return kernel


@pytest.fixture
async def kernel(
    folder: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DockerKernel]:
    monkeypatch.setenv(HOST_CANARY, HOST_CANARY_VALUE)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-never-in-the-sandbox")
    k = await sandbox(folder, image=sandbox_image, pids=64, memory="256m", tmpfs_size="16m")
    yield k
    await k.shutdown()


async def test_state_persists_and_the_folder_is_the_cwd(kernel: DockerKernel, folder: Path) -> None:
    (folder / "data.txt").write_text("from the host\n")
    assert (await kernel.execute(request("x = 41"))).status == RunStatus.OK
    outcome = await kernel.execute(
        request("import os\nprint(os.getcwd(), open('data.txt').read())\nx + 1")
    )
    assert printed(outcome) == "/workspace from the host\n\n"
    assert value(outcome) == "42"
    outcome = await kernel.execute(request("open('/workspace/made.txt', 'w').write('hi')"))
    assert outcome.status == RunStatus.OK
    assert (folder / "made.txt").read_text() == "hi"  # "rw" is the default


async def test_read_only_workspace_refuses_writes(folder: Path, sandbox_image: str) -> None:
    (folder / "data.txt").write_text("keep me\n")
    kernel = await sandbox(folder, image=sandbox_image, workspace="ro")
    try:
        outcome = await kernel.execute(
            request("print(open('data.txt').read())\nopen('data.txt', 'w')")
        )
    finally:
        await kernel.shutdown()
    assert printed(outcome) == "keep me\n\n"
    assert outcome.status == RunStatus.ERROR
    assert "Read-only file system" in (outcome.error.message if outcome.error else "")
    assert (folder / "data.txt").read_text() == "keep me\n"


async def test_no_network_at_all(kernel: DockerKernel) -> None:
    code = (
        "import socket\n"
        "def attempt(f):\n"
        "    try:\n"
        "        f()\n"
        "        return 'connected'\n"
        "    except OSError as e:\n"
        "        return type(e).__name__\n"
        "print(attempt(lambda: socket.create_connection(('1.1.1.1', 53), timeout=3)))\n"
        "print(attempt(lambda: socket.getaddrinfo('pypi.org', 443)))\n"
        "print(sorted(n for _, n in socket.if_nameindex()))\n"
    )
    outcome = await kernel.execute(request(code))
    ip, dns, interfaces = printed(outcome).splitlines()
    assert ip == "OSError"  # network unreachable
    assert dns == "gaierror"
    assert interfaces == "['lo']"


async def test_read_only_root_and_a_capped_tmp(kernel: DockerKernel) -> None:
    outcome = await kernel.execute(request("open('/usr/canary', 'w')"))
    assert outcome.error is not None and "Read-only file system" in outcome.error.message
    code = (
        "import os\n"
        "written = 0\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        for _ in range(64):\n"
        "            f.write(b'x' * 2**20); f.flush(); written += 1\n"
        "except OSError as e:\n"
        "    print('stopped', e.errno)\n"
        "print(written)\n"
        "os.remove('/tmp/fill')\n"
    )
    outcome = await kernel.execute(request(code))
    stopped, written = printed(outcome).split("\n")[:2]
    assert stopped == "stopped 28"  # ENOSPC
    assert int(written) < 17  # tmpfsSize 16m


async def test_fork_bomb_stops_at_the_pids_limit_and_the_next_run_works(
    kernel: DockerKernel,
) -> None:
    await kernel.execute(request("kept = 'state'"))
    bomb = (
        "import os, time\n"
        "children = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(120)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
        "except OSError as e:\n"
        "    print('stopped after', children, type(e).__name__)\n"
    )
    outcome = await kernel.execute(request(bomb))
    text = printed(outcome)
    assert text.startswith("stopped after ") and "BlockingIOError" in text
    assert int(text.split()[2]) < 64
    assert "process limit (64)" in outcome.note and "stopped" in outcome.note
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes
    outcome = await kernel.execute(
        request("import threading; threading.Thread(target=print).start(); kept")
    )
    assert outcome.status == RunStatus.OK
    assert value(outcome) == "'state'"


async def test_out_of_memory_is_reported_and_the_next_run_gets_a_fresh_container(
    kernel: DockerKernel,
) -> None:
    await kernel.execute(request("kept = 1"))
    before = kernel.container.id if kernel.container else None
    outcome = await kernel.execute(request("hog = b'x' * (1024 * 2**20)"))
    assert outcome.status == RunStatus.DIED
    assert outcome.note.startswith("killed: out of memory (limit 256m)")
    assert outcome.state_lost
    outcome = await kernel.execute(request("'kept' in globals()"))
    assert outcome.status == RunStatus.OK
    assert value(outcome) == "False"
    assert kernel.container is not None and kernel.container.id != before


async def test_environment_is_built_from_nothing(kernel: DockerKernel) -> None:
    outcome = await kernel.execute(request("import os, json\nprint(json.dumps(dict(os.environ)))"))
    env = json.loads(printed(outcome))
    assert HOST_CANARY not in env and "OPENAI_API_KEY" not in env
    assert not any(HOST_CANARY_VALUE in v or "sk-canary" in v for v in env.values())
    # What is there was set by runfix, by ipykernel itself, or by Docker (HOSTNAME).
    ipykernel_own = {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER", "PAGER", "TERM"}
    ipykernel_own.add("PYDEVD_USE_FRAME_EVAL")
    assert set(env) <= set(sandbox_environment()) | ipykernel_own | {"HOSTNAME"}


async def test_unprivileged_user_no_capabilities_no_new_privileges_no_socket(
    kernel: DockerKernel,
) -> None:
    code = (
        "import os\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
        "print(os.getuid(), os.getgid())\n"
        "print(status['CapEff'].strip(), status['CapPrm'].strip(), status['NoNewPrivs'].strip())\n"
        "print([p for p in ('/var/run/docker.sock', '/run/docker.sock') if os.path.exists(p)])\n"
    )
    uid_line, caps, sockets = printed(await kernel.execute(request(code))).splitlines()
    uid, gid = map(int, uid_line.split())
    assert uid != 0 and gid != 0
    assert caps == "0000000000000000 0000000000000000 1"
    assert sockets == "[]"


async def test_engine_sees_every_limit(kernel: DockerKernel, folder: Path) -> None:
    assert kernel.container is not None
    container_id = kernel.container.id
    assert container_id is not None
    attrs = await asyncio.to_thread(engine().api.inspect_container, container_id)
    host = attrs["HostConfig"]
    assert attrs["Config"]["Labels"][LABEL] == "1"
    assert attrs["Config"]["Labels"][FOLDER_LABEL] == str(folder)
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == host["MemorySwap"] == 256 * 2**20
    assert host["NanoCpus"] == 10**9
    assert host["PidsLimit"] == 64
    assert host["CapDrop"] == ["ALL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["Init"] is True
    assert host["LogConfig"] == {"Type": "json-file", "Config": {"max-file": "1", "max-size": "1m"}}
    assert "size=16m" in host["Tmpfs"]["/tmp"]
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/workspace"]["Source"] == str(folder) and mounts["/workspace"]["RW"]
    assert not any("docker.sock" in m["Source"] for m in attrs["Mounts"])
    assert attrs["Config"]["User"] != "" and not attrs["Config"]["User"].startswith("0")


async def test_infinite_loop_times_out_and_is_interrupted(kernel: DockerKernel) -> None:
    await kernel.execute(request("kept = 'yes'"))
    outcome = await kernel.execute(request("while True:\n    pass\n", timeout=1.5))
    assert outcome.status == RunStatus.TIMEOUT
    assert "state is kept" in outcome.note
    assert value(await kernel.execute(request("kept"))) == "'yes'"


async def test_print_flood_is_capped(kernel: DockerKernel) -> None:
    outcome = await kernel.execute(request("print('x' * 100_000_000)", limit=10_000))
    assert outcome.status == RunStatus.OK
    assert outcome.truncated > 99_000_000
    assert len(printed(outcome)) <= 10_000 + 100  # and the line saying what was dropped


async def test_missing_image_says_how_to_build_it(folder: Path, sandbox_image: str) -> None:
    kernel = DockerKernel(folder, DockerConfig(image="runfix-no-such-image:0"))
    with pytest.raises(ExecutorUnavailable, match="runfix sandbox build"):
        await kernel.start()
    await kernel.shutdown()


async def test_image_without_ipykernel_fails_fast_with_its_last_words(
    folder: Path, sandbox_image: str
) -> None:
    """A container that exits at start is noticed at once, not after the startup timeout."""
    client = engine()
    image = client.images.get(sandbox_image)
    bare = "runfix-test-no-kernel:latest"
    container = client.containers.create(image, ["true"])
    try:
        container.commit(
            repository=bare.split(":")[0],
            tag="latest",
            changes=[
                "ENV PYTHONPATH=/nowhere",
                'ENTRYPOINT ["python3", "-c", "import sys; sys.exit(\'no kernel here\')", "--"]',
            ],
        )
    finally:
        container.remove()
    try:
        open_to_sandbox(folder)
        kernel = DockerKernel(folder, DockerConfig(image=bare), startup_timeout=60)
        loop = asyncio.get_running_loop()
        began = loop.time()
        with pytest.raises(ExecutorUnavailable, match="no kernel here"):
            await kernel.start()
        assert loop.time() - began < 10
        await kernel.shutdown()
    finally:
        client.images.remove(bare, force=True)


async def test_folder_the_sandbox_user_cannot_enter_is_explained(
    folder: Path, sandbox_image: str
) -> None:
    if os.getuid() != 0:
        pytest.skip("the sandbox runs as your own user, who can enter your folders")
    folder.chmod(0o700)
    kernel = DockerKernel(folder, DockerConfig(image=sandbox_image))
    with pytest.raises(ExecutorUnavailable, match="cannot enter"):
        await kernel.start()
    await kernel.shutdown()


async def test_a_container_that_cannot_start_says_why_and_leaves_nothing(
    folder: Path, sandbox_image: str
) -> None:
    missing = folder.parent / "no-such-wheels"
    kernel = DockerKernel(folder, DockerConfig(image=sandbox_image, wheels=str(missing)))
    open_to_sandbox(folder)
    with pytest.raises(ExecutorUnavailable, match="could not start the sandbox"):
        await kernel.start()
    await kernel.shutdown()
    label = f"{FOLDER_LABEL}={folder}"
    assert engine().containers.list(all=True, filters={"label": label}) == []


@pytest.mark.skipif(os.getuid() != 0, reason="the sandbox runs as nobody only when runfix is root")
async def test_a_write_the_folder_refuses_to_nobody_says_why_and_what_changes_it(
    folder: Path, sandbox_image: str
) -> None:
    kernel = await sandbox(folder, image=sandbox_image)
    folder.chmod(0o755)  # root's folder: nobody may enter it, not write in it
    try:
        outcome = await kernel.execute(request("open('out.csv', 'w')"))
    finally:
        await kernel.shutdown()
    assert outcome.error is not None and outcome.error.ename == "PermissionError"
    assert "runs as nobody" in outcome.error.message and "docker.user" in outcome.error.message


async def test_a_missing_image_of_another_tag_says_how_to_build_that_tag(folder: Path) -> None:
    kernel = DockerKernel(folder, DockerConfig(image="runfix-no-such-image:0"))
    with pytest.raises(
        ExecutorUnavailable, match="runfix sandbox build --tag runfix-no-such-image:0"
    ):
        await kernel.start()
    await kernel.shutdown()
