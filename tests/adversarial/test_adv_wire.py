"""The LSP channel under a hostile or broken client, and a kernel that writes to fd 1.

Each test drives a real `runfix serve` over pipes with a strict frame reader:
a byte between frames fails it, as it fails VS Code's or Neovim's parser."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from executor.local import kernel_log
from tests.adversarial.conftest import Wire
from tests.conftest import STATE

FD_LEVEL = """\
import os, subprocess, sys
subprocess.run(['echo', 'from a child'])
os.write(1, b'written to fd 1\\n')
os.system('echo from os.system')
print('printed')
"""


def test_fd_level_output_never_reaches_the_channel(wire: Wire, folder: Path) -> None:
    wire.initialize(folder)
    uri = wire.open(folder / "fd.py", FD_LEVEL)

    answer = wire.run(uri)

    assert answer["result"]["status"] == "ok"  # every frame read cleanly to get here
    hints = wire.call(
        "textDocument/inlayHint",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 9, "character": 0}},
        },
    )["result"]
    labels = {h["position"]["line"]: h["label"] for h in hints}
    # ipykernel forwards fd output from a thread, so it may land a statement early; the
    # hover of the cell's statements holds all of it.
    shown = ""
    for line in range(5):
        hover = wire.call(
            "textDocument/hover",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}},
        )["result"]
        shown += hover["contents"]["value"] if hover else ""
    for text in ("from a child", "written to fd 1", "from os.system"):
        assert text in shown
    # (and late: os.system's output may come after the print's, on the print's line)
    assert labels.get(4, "").startswith("→ printed")
    assert wire.run(uri)["result"]["status"] == "ok"  # and the session goes on
    # ipykernel's echo of fd output lands in the kernel log runfix keeps.
    log = Path(STATE, "runfix", "logs", kernel_log(folder).name).read_text()
    assert "from a child" in log and "written to fd 1" in log


def test_a_short_content_length_is_skipped_and_the_server_answers_again(
    wire: Wire, folder: Path
) -> None:
    wire.initialize(folder)
    text = "héllo wörld"
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 900, "method": "runfix/none", "params": {"t": text}},
        ensure_ascii=False,
    ).encode()
    wire.frame(body, length=len(body) - 2)  # counted in characters: 2 short

    # The broken frame is answered as unreadable; the next frames as usual.
    broken = wire.next_error()
    assert broken["error"]["code"] == -32700 and broken["id"] is None
    uri = wire.open(folder / "after.py", "1 + 1\n")
    for _ in range(3):
        assert wire.run(uri)["result"]["status"] == "ok"
    assert "skipped 2 bytes" in wire.log()


def test_a_long_content_length_loses_one_message_not_the_session(wire: Wire, folder: Path) -> None:
    wire.initialize(folder)
    body = json.dumps({"jsonrpc": "2.0", "method": "runfix/none", "params": {}}).encode()
    wire.frame(body, length=len(body) + 30)  # swallows the start of the next frame
    wire.notify("runfix/none", {"pad": "x" * 40})
    uri = wire.open(folder / "after.py", "2 + 2\n")
    assert wire.run(uri)["result"]["status"] == "ok"


def test_malformed_json_is_a_parse_error(wire: Wire, folder: Path) -> None:
    wire.initialize(folder)
    wire.frame(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    answer = wire.next_error()
    assert answer["error"]["code"] == -32700
    assert answer["id"] is None
    uri = wire.open(folder / "after.py", "1\n")
    assert wire.run(uri)["result"]["status"] == "ok"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (
            "textDocument/hover",
            {"textDocument": {"uri": "file:///x.py"}, "position": {"line": "x", "character": 0}},
        ),
        ("textDocument/inlayHint", None),
        ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}}),
    ],
)
def test_invalid_params_are_answered_invalid_params(
    wire: Wire, folder: Path, method: str, params: object
) -> None:
    wire.initialize(folder)
    answer = wire.call(method, params, timeout=10)
    assert answer["error"]["code"] == -32602
    assert method in answer["error"]["message"]


def test_requests_before_initialize_and_after_shutdown(wire: Wire, folder: Path) -> None:
    early = wire.call("textDocument/hover", {}, timeout=10)
    assert early["error"]["code"] == -32002

    wire.initialize(folder)
    assert "error" not in wire.call("shutdown", None)
    late = wire.call("workspace/executeCommand", {"command": "runfix.status"}, timeout=10)
    assert late["error"]["code"] == -32600

    wire.notify("exit", None)
    assert wire.proc.wait(timeout=20) == 0


def test_exit_without_shutdown_exits_1(wire: Wire, folder: Path) -> None:
    wire.initialize(folder)
    wire.notify("exit", None)
    assert wire.proc.wait(timeout=20) == 1


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie whose parent died is reaped by init; until then it is already dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


BUSY_IN_C = """\
import os, subprocess
child = subprocess.Popen(['sleep', '600'])
open('pids', 'w').write(f'{os.getpid()} {child.pid}')
sum(range(10**13))
"""


def test_a_killed_server_takes_a_busy_kernel_and_its_children(wire: Wire, folder: Path) -> None:
    """A long C call holds the GIL, so the kernel cannot see its parent die by itself."""
    wire.initialize(folder)
    uri = wire.open(folder / "busy.py", BUSY_IN_C)
    wire.request("workspace/executeCommand", {"command": "runfix.run", "arguments": [{"uri": uri}]})
    pids = folder / "pids"
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().strip()):
        assert time.monotonic() < deadline, "the cell never started"
        time.sleep(0.1)
    kernel, child = map(int, pids.read_text().split())
    time.sleep(0.5)  # in the C call now

    wire.proc.send_signal(signal.SIGKILL)
    wire.proc.wait(timeout=10)

    deadline = time.monotonic() + 10
    while not (_gone(kernel) and _gone(child)):
        assert time.monotonic() < deadline, "the kernel or its child outlived the server"
        time.sleep(0.1)
