"""The local kernel executor on a real ipykernel, without the language server."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from executor import RunRequest, RunStatus, Span, Stream, Value
from executor.configs import LocalConfig
from executor.interpreter import find_interpreter
from executor.local import LocalKernel


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[LocalKernel]:
    k = LocalKernel(tmp_path, LocalConfig(sys.executable, hidden_env=("RUNFIX_TEST_SECRET",)))
    os.environ["RUNFIX_TEST_SECRET"] = "canary"
    try:
        await k.start()
        yield k
    finally:
        os.environ.pop("RUNFIX_TEST_SECRET", None)
        await k.shutdown()


def request(code: str, **kw: object) -> RunRequest:
    return RunRequest(code=code, filename="/ws/doc.py", **kw)  # type: ignore[arg-type]


async def test_state_persists_and_cwd_is_the_folder(kernel: LocalKernel, tmp_path: Path) -> None:
    await kernel.execute(request("import os\nhere = os.getcwd()"))
    outcome = await kernel.execute(request("here"))
    [value] = outcome.events
    assert isinstance(value, Value) and value.data["text/plain"] == repr(str(tmp_path))


async def test_ipc_in_a_private_directory_never_tcp(kernel: LocalKernel) -> None:
    assert kernel._km is not None
    info = json.loads(Path(kernel._km.connection_file).read_text())
    assert info["transport"] == "ipc"
    runtime = Path(kernel._km.connection_file).parent
    assert stat.S_IMODE(runtime.stat().st_mode) & 0o777 == 0o700  # (jupyter adds the sticky bit)
    assert stat.S_IMODE(Path(kernel._km.connection_file).stat().st_mode) == 0o600


async def test_hidden_variables_do_not_reach_the_kernel(kernel: LocalKernel) -> None:
    outcome = await kernel.execute(
        request("import os\nprint(os.environ.get('RUNFIX_TEST_SECRET'))")
    )
    assert outcome.events == (Stream("stdout", "None\n", outcome.events[0].span),)


async def test_variables_summarise_names_types_and_shapes(kernel: LocalKernel) -> None:
    await kernel.execute(request("import math\nnums = [1, 2, 3]\nname = 'ada'\ndef f(): pass"))
    found = {v.name: v for v in await kernel.variables()}
    assert set(found) == {"nums", "name", "f"}
    assert (found["nums"].type, found["nums"].length) == ("list", 3)
    assert found["name"].summary == "'ada'"


async def test_interrupt_grace_then_restart_when_the_kernel_ignores_sigint(
    tmp_path: Path,
) -> None:
    k = LocalKernel(tmp_path, LocalConfig(sys.executable), grace=1.0)
    try:
        await k.start()
        code = (
            "import signal, time\n"
            "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "kept = 1\n"
            "time.sleep(60)"
        )
        outcome = await k.execute(request(code, timeout=1.0))
        assert outcome.status == RunStatus.TIMEOUT
        assert outcome.state_lost and "restarted" in outcome.note
        after = await k.execute(request("'kept' in globals()"))
        assert [e.data["text/plain"] for e in after.events if isinstance(e, Value)] == ["False"]
    finally:
        await k.shutdown()


async def test_a_kernel_killed_silently_is_placed_on_its_statement(kernel: LocalKernel) -> None:
    """No output came first, yet the death lands on the statement that was running."""
    code = "x = 1\nimport os, signal\nos.kill(os.getpid(), signal.SIGKILL)\ny = 2\n"
    outcome = await kernel.execute(request(code))
    assert outcome.status == RunStatus.DIED
    assert outcome.span == Span(3, 3)
    assert (await kernel.execute(request("1"))).status == RunStatus.OK


def test_interpreter_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    assert find_interpreter(tmp_path).path == sys.executable
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    monkeypatch.setenv("VIRTUAL_ENV", str(venv))
    assert find_interpreter(tmp_path).source == "VIRTUAL_ENV"
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    assert find_interpreter(tmp_path).path == str(tmp_path / ".venv" / "bin" / "python")
    chosen = find_interpreter(tmp_path, "env")
    assert chosen.path == str(venv / "bin" / "python") and chosen.source == "the `python` setting"


async def test_autoreload_and_cell_events_work_as_in_a_notebook(
    kernel: LocalKernel, tmp_path: Path
) -> None:
    """runfix sends its runs silently; extensions that wait for IPython's cell events
    (autoreload here, matplotlib's inline backend) still see each run as a cell."""
    module = tmp_path / "helper_mod.py"
    module.write_text("def answer():\n    return 1\n")
    setup = (
        "%load_ext autoreload\n"
        "%autoreload 2\n"
        "import helper_mod\n"
        "seen = []\n"
        "get_ipython().events.register('pre_run_cell', lambda info: seen.append(info.raw_cell))\n"
    )
    assert (await kernel.execute(request(setup))).status == RunStatus.OK
    assert (await kernel.execute(request("helper_mod.answer()"))).events[0].data == {
        "text/plain": "1"
    }
    module.write_text("def answer():\n    return 2\n")
    os.utime(module, (module.stat().st_atime + 5, module.stat().st_mtime + 5))
    outcome = await kernel.execute(request("helper_mod.answer()"))
    [value] = outcome.events
    assert isinstance(value, Value) and value.data["text/plain"] == "2"  # reloaded
    outcome = await kernel.execute(request("seen"))
    [value] = outcome.events
    assert isinstance(value, Value)
    assert value.data["text/plain"] == "['helper_mod.answer()', 'helper_mod.answer()', 'seen']"


async def test_what_a_run_prints_is_passed_on_as_it_comes(kernel: LocalKernel) -> None:
    """`on_stream` (how a remote install shows pip's lines) hears each print when it is made,
    not when the run ends."""
    heard: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()
    began = loop.time()
    code = "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\n"

    outcome = await kernel.execute(
        request(code), on_stream=lambda text: heard.append((text, loop.time() - began))
    )

    assert outcome.status == RunStatus.OK
    assert [text for text, _ in heard] == ["first\n", "second\n"]
    assert heard[1][1] - heard[0][1] >= 0.9  # the first came a second before the end


SPAM = """\
import threading, time

def spam(n):
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        print("tick", n, "x" * 200)
        time.sleep(0.0005)

for n in range(4):
    threading.Thread(target=spam, args=(n,), daemon=True).start()
"""


async def test_threads_that_print_across_runs_never_kill_the_kernel(kernel: LocalKernel) -> None:
    """python/cpython#130163: a thread inside print() holds a borrowed reference to the
    stream; a stream swapped and freed under it crashes the interpreter. runfix installs its
    stream wrappers once and never frees one. Before, 1 to 2 in 8 to 10 such rounds died;
    40 rounds of four printing threads each and short runs while they print miss a 1-in-8
    death with odds (7/8)^40 ≈ 0.5 %."""
    for _ in range(40):
        started = await kernel.execute(request(SPAM))
        assert started.status == RunStatus.OK, started
        for _ in range(5):
            outcome = await kernel.execute(request("1 + 1"))
            assert outcome.status == RunStatus.OK and not outcome.state_lost, outcome
    assert (await kernel.execute(request("'alive'"))).status == RunStatus.OK


async def test_a_flood_of_output_keeps_its_head_and_its_tail(kernel: LocalKernel) -> None:
    """Past `outputLimit`, the latest output is kept as a terminal's scrollback would: the
    result printed after a flood shows, after a line saying how much was dropped."""
    code = "for i in range(4000):\n    print('noise', i, '.' * 40)\nprint('RESULT', 6 * 7)\n"
    outcome = await kernel.execute(request(code, output_limit=20_000))
    text = "".join(e.text for e in outcome.events if isinstance(e, Stream))
    assert text.startswith("noise 0 ")
    assert text.rstrip().endswith("RESULT 42")
    assert "characters of output dropped" in text
    assert outcome.truncated > 150_000
    assert len(text) <= 20_000 + 100  # and the line saying what was dropped


async def test_what_a_finished_runs_thread_prints_between_runs_is_never_the_next_runs(
    kernel: LocalKernel,
) -> None:
    """Issue 58, S3: a thread a finished cell started kept printing, and what it printed
    between runs showed as the next cell's output; it is dropped, and said so."""
    ticking = (
        "import threading, time\n"
        "def tick():\n    for i in range(6):\n        time.sleep(0.1)\n        print('tick', i)\n"
        "threading.Thread(target=tick, daemon=True).start()\n"
        "print('started')"
    )
    await kernel.execute(request(ticking))
    await asyncio.sleep(0.35)  # it prints meanwhile, between the runs
    outcome = await kernel.execute(request("'next'", first_line=10))
    assert [type(e).__name__ for e in outcome.events] == ["Value"], outcome.events
    assert "Dropped:" in outcome.note and "a thread of an earlier run printed" in outcome.note
