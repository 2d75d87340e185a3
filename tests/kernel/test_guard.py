"""The runtime guard (`executor/_kernel_guard.py`, issue 58) in a real kernel: model-written
code the static scan lets through is stopped where it acts — 13 snippets a scan missed —
while the user's own code, and what the model's code may do, runs as before."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from executor import RunRequest, RunStatus
from executor.configs import LocalConfig
from executor.events import Guard, RunOutcome
from executor.local import LocalKernel
from executor.safety import scan

OUTSIDE = Path.home() / ".runfix-guard-probe"
"""A file outside every test's folder (and outside the temporary folder the guard allows)."""

SNIPPETS = {
    "random._os.spawnlp": (
        "import random\nrandom._os.spawnlp(random._os.P_WAIT, 'true', 'true')",
        "process:",
    ),
    "typing.get_type_hints": (
        "import typing\n"
        "def f(x: \"__import__('os').system('true')\"): pass\n"
        "typing.get_type_hints(f)",
        "process:true",
    ),
    "a write through a loop variable": (
        f"for place in [{str(OUTSIDE)!r}]:\n    open(place, 'w').write('x')",
        f"write:{OUTSIDE}",
    ),
    "uuid._get_command_stdout": (
        "import uuid\nuuid._get_command_stdout('true')",
        "process:true",
    ),
    "np.load allow_pickle": (
        "import numpy as np, os, pickle\n"
        "open('evil.npy', 'wb').write(pickle.dumps(os.system))\n"
        "np.load('evil.npy', **{'allow_pickle': True})",
        "unpickle:posix.system",
    ),
    "conftest.py": ("open('conftest.py', 'w').write('import os')", "write:"),
    ".git/config": (
        "import pathlib\npathlib.Path('.git').mkdir()\n(pathlib.Path('.git') / 'config').touch()",
        "write:",
    ),
    "a test file": (
        "open('tests/test_a.py', 'w').write('def test_a():\\n    pass\\n')",
        "write:",
    ),
    "a socket": (
        "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)",
        "network:127.0.0.1:9",
    ),
    "ctypes": ("import ctypes\nctypes.CDLL(None).getpid()", "native:"),
    "subprocess": ("import subprocess\nsubprocess.run(['true'])", "process:true"),
    "os.system by getattr": ("import os\ngetattr(os, 'sys' + 'tem')('true')", "process:true"),
    "a folder descriptor": (
        f"import os\nfd = os.open({str(Path.home())!r}, os.O_RDONLY)\n"
        "os.open('.runfix-guard-probe', os.O_WRONLY | os.O_CREAT, dir_fd=fd)",
        "write:",
    ),
}


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[LocalKernel]:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_a():\n    assert 1\n")
    k = LocalKernel(tmp_path, LocalConfig(sys.executable))
    try:
        await k.start()
        yield k
    finally:
        await k.shutdown()
        OUTSIDE.unlink(missing_ok=True)


async def model_run(kernel: LocalKernel, code: str, guard: Guard | None = None) -> RunOutcome:
    request = RunRequest(code, str(kernel.folder / "doc.py"), guard=guard or Guard())
    return await kernel.execute(request)


@pytest.mark.parametrize("name", list(SNIPPETS))
async def test_model_code_the_scan_lets_through_is_stopped_where_it_acts(
    kernel: LocalKernel, name: str
) -> None:
    code, pattern = SNIPPETS[name]
    outcome = await model_run(kernel, code)
    assert outcome.status == RunStatus.ERROR, outcome
    assert outcome.refused, outcome.events
    assert outcome.refused[0].pattern.startswith(pattern), outcome.refused
    error = outcome.error
    assert error is not None and "runfix's guard stopped the model's code" in error.message
    assert not OUTSIDE.exists()
    assert (kernel.folder / "tests" / "test_a.py").read_text() == "def test_a():\n    assert 1\n"
    assert not (kernel.folder / "conftest.py").exists()
    assert not (kernel.folder / ".git" / "config").exists()


def test_the_static_scan_lets_most_of_them_through() -> None:
    """Why the guard: the scan (the upfront question) misses most of these snippets."""
    missed = {name for name, (code, _) in SNIPPETS.items() if not scan(code)}
    four = {  # the four the issue ran end to end, and the files a fix must never write
        "random._os.spawnlp", "typing.get_type_hints", "a write through a loop variable",
        "uuid._get_command_stdout", "conftest.py", ".git/config", "a test file",
    }  # fmt: skip
    assert four <= missed, missed


async def test_the_users_own_code_is_not_guarded(kernel: LocalKernel) -> None:
    code, _ = SNIPPETS["subprocess"]
    outcome = await kernel.execute(RunRequest(code + "\nprint('ran')", "doc.py"))
    assert outcome.status == RunStatus.OK, outcome.events


async def test_what_model_code_may_do_runs_as_before(kernel: LocalKernel) -> None:
    """Writes in the folder, the temporary folder, plain data unpickled, matplotlib's first
    import (it runs fc-list): the guard lets them be."""
    code = (
        "import pickle, tempfile, os\n"
        "open('out.csv', 'w').write('a,b\\n1,2\\n')\n"
        "open(os.path.join(tempfile.gettempdir(), 'runfix-probe'), 'w').write('x')\n"
        "data = pickle.loads(pickle.dumps({'a': [1, 2.5, (3, 'x')]}))\n"
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "plt.plot([1, 2]); plt.savefig('chart.png')\n"
        "print(data)"
    )
    outcome = await model_run(kernel, code)
    assert outcome.status == RunStatus.OK, outcome.events
    assert (kernel.folder / "chart.png").exists() and not outcome.refused


async def test_a_refusal_the_code_swallows_still_ends_the_run(kernel: LocalKernel) -> None:
    code = (
        "import subprocess\ntry:\n    subprocess.run(['true'])\nexcept BaseException:\n"
        "    pass\nprint('went on')"
    )
    outcome = await model_run(kernel, code)
    assert outcome.status == RunStatus.ERROR and outcome.refused[0].pattern == "process:true"


async def test_a_function_the_model_defined_is_guarded_when_the_users_code_calls_it(
    kernel: LocalKernel,
) -> None:
    defined = await model_run(kernel, "import os\ndef tidy():\n    os.system('true')\n")
    assert defined.status == RunStatus.OK
    called = await kernel.execute(RunRequest("tidy()", "doc.py", first_line=5))
    assert called.status == RunStatus.ERROR and called.refused[0].pattern == "process:true"
    # the user's own function of the same name, defined by the user's run, is the user's
    await kernel.execute(RunRequest("import os\ndef tidy():\n    os.system('true')\n", "doc.py"))
    assert (await kernel.execute(RunRequest("tidy()", "doc.py"))).status == RunStatus.OK


async def test_a_thread_the_model_left_running_stays_guarded(kernel: LocalKernel) -> None:
    code = (
        "import threading, os\nstarted = threading.Event()\ngo = threading.Event()\n"
        "def later():\n    started.set(); go.wait(5)\n"
        f"    open({str(OUTSIDE)!r}, 'w')\n"
        "threading.Thread(target=later, daemon=True).start()\nstarted.wait(5)"
    )
    assert (await model_run(kernel, code)).status == RunStatus.OK
    await kernel.execute(RunRequest("go.set()\nimport time\ntime.sleep(0.5)", "doc.py"))
    assert not OUTSIDE.exists()


async def test_allowed_patterns_let_the_code_run(kernel: LocalKernel) -> None:
    code, _ = SNIPPETS["subprocess"]
    outcome = await model_run(kernel, code + "\nprint('ran')", Guard(allow=("process:true",)))
    assert outcome.status == RunStatus.OK, outcome.events


async def test_runfixs_own_code_replaced_by_model_code_is_put_back(kernel: LocalKernel) -> None:
    code = "import _runfix_kernel\n_runfix_kernel.run = lambda *a, **k: None"
    outcome = await model_run(kernel, code)
    assert [r.kind for r in outcome.refused] == ["tamper"], outcome.refused
    # the next model run is guarded still
    again, _ = SNIPPETS["subprocess"]
    assert (await model_run(kernel, again)).refused


async def test_a_trace_function_cannot_be_set_to_reach_past_the_guard(kernel: LocalKernel) -> None:
    outcome = await model_run(kernel, "import sys\nsys.settrace(lambda *a: None)")
    assert outcome.refused and outcome.refused[0].pattern == "tamper:sys.settrace"


def test_the_probe_is_outside_the_folder_and_the_temporary_folder(tmp_path: Path) -> None:
    import tempfile

    assert not str(OUTSIDE).startswith(os.path.realpath(tempfile.gettempdir()))
    assert not str(OUTSIDE).startswith(str(tmp_path))
