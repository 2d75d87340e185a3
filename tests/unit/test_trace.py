"""Issue 48: what the core's shape costs one request, traced in process (`tests/support/
trace.py`): R re-entries (a call back up into a room already on the stack) and K facts
derived again after the context was made. Fakes stand in for the editor, the kernel and
the model only; the core (flow, gate, runner, session, fix loop, results) is the real one."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest
from lsprotocol import types as lsp

import executor.pool
from executor.trust import Choice, TrustStore
from lsp_server import contract
from lsp_server.commands import Call, dispatch
from lsp_server.contract import GenerateArgs, Position, RunArgs
from lsp_server.flow import Flow
from lsp_server.session import Session
from lsp_server.settings import Settings
from tests.support.editors import FakeEditor
from tests.support.fake_kernel import FakeKernel, FakeModel
from tests.support.trace import Trace, traced


class _Sink:
    """Where the LSP server writes to a client that is not there."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.sent.append(data)


def _lsp_run(tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Trace, bytes]:
    """One run through the real LSP server's core and its LSP editor (the handler's
    context made as the door makes it), traced; the Trace and what the client was sent."""
    from pygls.workspace import Workspace

    from lsp_server.lsp.server import RunfixServer

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "job.py").write_text(source)
    uri = (folder / "job.py").as_uri()
    monkeypatch.setattr(executor.pool, "create", FakeKernel)
    sink = _Sink()

    async def request() -> Any:
        server = RunfixServer()
        server.protocol.set_writer(cast(Any, sink))
        server.protocol._workspace = Workspace(folder.as_uri())  # as `initialize` makes it
        item = lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=source)
        server.workspace.put_text_document(item)
        server.session.trust = TrustStore(tmp_path / "trust.json")
        server.session.decide(folder, Choice.TRUST)
        where = await server.flow.where(uri)
        return await server.flow.run(where, None, asyncio.Event())

    answer, trace = traced(request)
    assert answer is not None
    return trace, b"".join(sink.sent)


def _request(
    tmp_path: Path,
    source: str,
    monkeypatch: pytest.MonkeyPatch,
    ask: str,
    name: str = "job.py",
    reply: str = "```python\nundefined_name = 2\nprint(undefined_name + 1)\n```",
) -> tuple[Trace, Any]:
    """Ask `ask` ("run", "fix": the face; a contract command: through the one table, as a
    door asks) of a document `name` holding `source`, traced; its Trace and its answer."""
    folder = tmp_path / "project"
    folder.mkdir(parents=True)
    (folder / name).write_text(source)
    uri = (folder / name).as_uri()
    (folder / "tests").mkdir()
    test = "from m import f\n\n\ndef test_f():\n    assert f() == 2\n"
    (folder / "tests" / "test_m.py").write_text(test)
    monkeypatch.setattr(executor.pool, "create", FakeKernel)

    async def read(_: Path) -> Settings:
        return Settings(python="python3", fix_check_dependents=False)

    async def request() -> Any:
        lines = source.splitlines(keepends=True)
        editor = FakeEditor(
            lines, answer=True, folder=folder, uri=uri, name=name, apply_files=False
        )
        session = Session(read, editor.kernel_state, trust=TrustStore(tmp_path / "trust.json"))
        session.decide(folder, Choice.TRUST)
        model: Any = FakeModel(reply)
        session.model_for = lambda settings: model  # type: ignore[method-assign]
        flow = Flow(session, editor)
        if ask in arguments:  # (the table makes the context)
            return await dispatch(flow, ask, Call(arguments[ask](uri), asyncio.Event()))
        where = await flow.where(uri)
        if ask == "run":
            return await flow.run(where, None, asyncio.Event())
        return await flow.fixes.run_and_fix(where, None, asyncio.Event())

    answer, trace = traced(request)
    assert answer is not None
    return trace, answer


arguments: dict[str, Callable[[str], Any]] = {
    contract.RUN: lambda uri: RunArgs(uri, position=Position(3)),
    contract.GENERATE: lambda uri: GenerateArgs(uri, Position(0), run=True),
    contract.FIX_TESTS: contract.TestsArgs,
}
"""The argument each contract command traced here is asked with."""


FIXED_F = "```python\ndef f():\n    return 2\n```"


def test_a_notebook_cells_run_generate_and_a_test_fix_through_the_table_derive_each_fact_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 62: a notebook's cell run (its record made with what Jupyter keeps), Generate
    (the model's body written, then run) and a failing test's fix (its candidate run by the
    tests), each asked as a door asks: through the table of commands. Before: the test fix
    had R = 15 (the fix loop called back into the test fixer's ports and closures)."""
    cells = "# %%\nx = 1\n# %%\nx + 2\n"
    for name, ask, source, reply in (
        ("nb.ipynb", contract.RUN, cells, ""),
        ("gen.py", contract.GENERATE, "# ai: one plus two\n", "```python\n1 + 2\n```"),
        ("m.py", contract.FIX_TESTS, "def f():\n    return 1\n", FIXED_F),
    ):
        FakeKernel.candidates = 0
        trace, _ = _request(tmp_path / name, source, monkeypatch, ask, name, reply)
        assert ask != contract.FIX_TESTS or FakeKernel.candidates == 1  # (the fix was tried)
        print(f"{ask}: R = {trace.r} {trace.reentries}, K = {trace.k} {dict(trace.facts)}")
        assert trace.k == 0, (ask, dict(trace.facts))
        assert trace.r == 0, (ask, trace.reentries)


def test_a_run_derives_each_fact_once_and_never_calls_back_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: K = 2 (the trust decision read again by the gate and by the session)."""
    trace, _ = _request(tmp_path, "x = 1\nx + 2\n", monkeypatch, "run")
    print(f"run: R = {trace.r} {trace.reentries}, K = {trace.k} {dict(trace.facts)}")
    assert trace.k == 0, dict(trace.facts)
    assert trace.r == 0, trace.reentries


def test_a_run_and_fix_derives_each_fact_once_and_its_loop_calls_only_its_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: R = 8 (the fix loop called back into seven closures of the fix flow), K = 6
    (the trust decision read 4 more times, admission and the kernel's config twice). The
    fix lands (issue 71, 6: the fake kernel failed the model's answer too, so the traced
    request never reached the fix's check, its edit or its record)."""
    trace, answer = _request(tmp_path, "print(undefined_name + 1)\n", monkeypatch, "fix")
    assert answer.status.value == "fixed" and answer.says == "3", answer
    print(f"fix: R = {trace.r} {trace.reentries}, K = {trace.k} {dict(trace.facts)}")
    assert trace.k == 0, dict(trace.facts)
    assert trace.r == 0, trace.reentries


def test_a_run_through_the_lsp_editor_derives_each_fact_once_and_is_never_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same run with the real LSP server's editor, which shows what it is handed.
    Before: R = 1 (the session told the editor of its kernel's state through a lambda of
    the server's, so the server's frame stood below the editor sending). That the editor
    never reads the results back is `test_shape`'s to hold."""
    trace, sent = _lsp_run(tmp_path, "x = 1\nx + 2\n", monkeypatch)
    print(f"lsp run: R = {trace.r} {trace.reentries}, K = {trace.k} {dict(trace.facts)}")
    assert b"textDocument/publishDiagnostics" in sent  # the run's result reached the client
    assert trace.k == 0, dict(trace.facts)
    assert trace.r == 0, trace.reentries


def test_a_new_step_joins_the_runs_list_without_editing_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 62, 3: what happens around a piece's run is `Runner.steps`, in order; a step
    appended sees the run before the kernel has the code and after the steps before it
    (its results shaped and kept, its record written)."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "job.py").write_text("x = 1\nx + 2\n")
    uri = (folder / "job.py").as_uri()
    monkeypatch.setattr(executor.pool, "create", FakeKernel)
    seen: list[str] = []

    class Watched:
        def before(self, run: Any) -> None:
            seen.append(f"before: outcome {run.outcome}")

        async def after(self, run: Any) -> None:
            ok = run.outcome.status.value
            seen.append(f"after: {ok}, results {run.results is not None}, id {run.run_id}")

    async def read(_: Path) -> Settings:
        return Settings(python="python3")

    async def request() -> Any:
        lines = ["x = 1\n", "x + 2\n"]
        editor = FakeEditor(lines, answer=True, folder=folder, uri=uri, name="job.py")
        session = Session(read, editor.kernel_state, trust=TrustStore(tmp_path / "trust.json"))
        session.decide(folder, Choice.TRUST)
        flow = Flow(session, editor)
        flow.runner.steps.append(Watched())
        return await dispatch(flow, contract.RUN, Call(RunArgs(uri), asyncio.Event()))

    answer = asyncio.run(request())
    assert answer.status.value == "ok"
    assert seen == ["before: outcome None", "after: ok, results True, id 1"]


def test_a_new_range_step_sees_the_whole_run_and_can_stop_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 62, 3: what happens around a run of a document's cells (admission, the lock,
    progress, confirmation, publishing) is `Runner.range_steps`; a step appended is around
    the whole run, inside the earlier ones (the run is admitted and holds the folder's
    lock), sees each cell before and after it runs, and stops the run by saying why: the
    cells after do not run, and the answer says so."""
    folder = tmp_path / "project"
    folder.mkdir()
    text = "# %%\nx = 1\n# %%\nx + 2\n# %%\nx + 3\n"
    (folder / "job.py").write_text(text)
    uri = (folder / "job.py").as_uri()
    monkeypatch.setattr(executor.pool, "create", FakeKernel)
    seen: list[str] = []

    class Watched:
        def __init__(self, session: Session) -> None:
            self.session = session

        @contextlib.asynccontextmanager
        async def around(self, run: Any) -> AsyncIterator[None]:
            held = self.session.run_lock(run.where.folder).locked()
            seen.append(f"enter: kernel {run.kernel is not None}, lock held {held}")
            yield
            seen.append(f"leave: {len(run.ran)} ran, stopped {run.stopped!r}")

        async def before(self, run: Any, number: int, piece: Any) -> None:
            seen.append(f"before {number}: line {piece.first}")
            if number == 3:
                run.stop("not run: the third cell waits")

        def after(self, run: Any, number: int, one: Any) -> None:
            seen.append(f"after {number}: {one.outcome.status.value}, id {one.record_id}")

    async def read(_: Path) -> Settings:
        return Settings(python="python3")

    async def request() -> Any:
        lines = text.splitlines(keepends=True)
        editor = FakeEditor(lines, answer=True, folder=folder, uri=uri, name="job.py")
        session = Session(read, editor.kernel_state, trust=TrustStore(tmp_path / "trust.json"))
        session.decide(folder, Choice.TRUST)
        flow = Flow(session, editor)
        flow.runner.range_steps.append(Watched(session))
        return await dispatch(flow, contract.RUN, Call(RunArgs(uri), asyncio.Event()))

    answer = asyncio.run(request())
    assert answer.status.value == "cancelled"
    assert answer.message == "not run: the third cell waits"
    assert seen == [
        "enter: kernel True, lock held True",
        "before 1: line 1",
        "after 1: ok, id 1",
        "before 2: line 3",
        "after 2: ok, id 2",
        "before 3: line 5",
        "leave: 2 ran, stopped 'not run: the third cell waits'",
    ]


def test_the_fake_kernel_takes_what_the_real_kernel_takes() -> None:
    """Issue 71, 6: the fakes' signatures had drifted from the kernel's (a call the core
    makes with a new argument passed the fake and failed the kernel, or the reverse)."""
    import inspect

    from executor.jupyter import JupyterKernel

    def shape(method: Any) -> list[tuple[str, Any, bool]]:
        parameters = inspect.signature(method).parameters.values()
        return [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in parameters]

    for name in ("execute", "variables", "run_tests", "evidence", "shutdown", "retire"):
        assert shape(getattr(FakeKernel, name)) == shape(getattr(JupyterKernel, name)), name
