"""Shared test helpers: a workspace folder, a real `runfix serve`, real client capabilities."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, Union, cast

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from executor import sandbox
from executor.base import ExecutorUnavailable
from executor.configs import DEFAULT_IMAGE
from executor.docker import describe_engine, describe_image
from executor.trust import Choice, TrustStore
from tests.support import real_model
from tests.support.kernels import DENO, write_kernelspecs
from tests.support.remote_server import TOKEN_ENV, JupyterServer

SERVER = [sys.executable, "-m", "lsp_server", "serve", "--log-level", "INFO"]
CLIENTS = ["visual_studio_code", "neovim@v0.7.0", "neovim@v0.11.0"]


TESTS = Path(__file__).parent
TIERS = {
    "unit": "unit",
    "kernel": "kernel",
    "e2e": "e2e",
    "editors": "editor",
    "adversarial": "adversarial",
}
"""Folder → the tier marker its tests get: the folder sets a test's tier, nothing else."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0]
        if folder not in TIERS:
            raise pytest.UsageError(
                f"{item.nodeid}: tests live in a tier folder ({', '.join(TIERS)}), not {folder}"
            )
        item.add_marker(TIERS[folder])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed editors' test says what else was busy on the machine when it failed: a slow
    step there is most often another process's load (a model still generating, a kernel
    left spinning), and CI's log is all there is to read afterwards."""
    report = yield
    if report.failed and call.when == "call" and "editor" in item.keywords:
        report.sections.append(("busiest processes", _busiest()))
    return report


def _busiest(top: int = 10) -> str:
    """The load average and the processes that used the most CPU over the last second."""

    def times() -> dict[int, tuple[int, str]]:
        seen: dict[int, tuple[int, str]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                seen[int(stat.parent.name)] = (
                    int(fields[11]) + int(fields[12]),  # utime + stime, in ticks
                    command.decode(errors="replace")[:160],
                )
        return seen

    before = times()
    time.sleep(1)
    after = times()
    ticks = os.sysconf("SC_CLK_TCK")
    used = sorted(
        (
            ((t - before.get(pid, (t, ""))[0]) * 100 // ticks, pid, command)
            for pid, (t, command) in after.items()
        ),
        reverse=True,
    )[:top]
    lines = [f"load average: {Path('/proc/loadavg').read_text().strip()}"]
    lines += [f"{cpu:>4}% {pid:>7} {command}" for cpu, pid, command in used]
    return "\n".join(lines)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    ws = tmp_path / "project"
    ws.mkdir()
    return ws


# -- Editors ------------------------------------------------------------------------------


def editor_missing(why: str) -> NoReturn:
    """An editor a test drives is not here: fail once scripts/test set the editors up (it sets
    RUNFIX_REQUIRE_EDITORS), else skip, saying why."""
    if os.environ.get("RUNFIX_REQUIRE_EDITORS") == "1":
        pytest.fail(why)
    pytest.skip(why)


# -- Other languages' kernels -----------------------------------------------------------


def kernel_missing(why: str) -> NoReturn:
    """A language's kernel a test runs is not here: fail once scripts/test installed them (it
    sets RUNFIX_REQUIRE_KERNELS), else skip, saying why."""
    if os.environ.get("RUNFIX_REQUIRE_KERNELS") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def r_kernel() -> None:
    """IRkernel (scripts/kernels installs Debian's r-cran-irkernel)."""
    from executor.kernelspecs import find_spec

    if find_spec(("r",)) is None:
        kernel_missing("no R kernel (IRkernel) is installed: scripts/kernels installs one")


@pytest.fixture
def bash_kernel() -> None:
    """bash_kernel (a test dependency)."""
    if importlib.util.find_spec("bash_kernel") is None:
        kernel_missing("bash_kernel is not installed (pip install -e '.[test]')")


@pytest.fixture
def deno_kernel() -> None:
    """Deno's kernel (the `deno` wheel, a test dependency)."""
    if not DENO.is_file():
        kernel_missing("deno is not installed (pip install -e '.[test]')")


# -- Docker -------------------------------------------------------------------------------

# Set by .ci/run once it has an engine: then a missing engine or image fails, not skips.
REQUIRE_DOCKER = os.environ.get("RUNFIX_REQUIRE_DOCKER") == "1"


def _sandbox_problem() -> str | None:
    """Why the Docker tests cannot run here, or None; builds the image when it is missing."""
    try:
        describe_engine()
    except ExecutorUnavailable as exc:
        return f"no Docker engine: {exc}"
    if describe_image(DEFAULT_IMAGE) is not None and sandbox.current(DEFAULT_IMAGE):
        return None  # (an image built by an older runfix, without pytest, is built again)
    print(f"\nbuilding {DEFAULT_IMAGE} for the Docker tests …", file=sys.stderr)
    try:
        sandbox.build(DEFAULT_IMAGE, "auto", say=lambda line: print(line, file=sys.stderr))
    except sandbox.BuildError as exc:
        return f"no sandbox image, and it cannot be built here: {exc}"
    return None


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    """The sandbox image on a real engine. Without one the test is skipped, saying why."""
    problem = _sandbox_problem()
    if problem is not None:
        if REQUIRE_DOCKER:
            pytest.fail(problem)
        pytest.skip(problem)
    return DEFAULT_IMAGE


def open_to_sandbox(folder: Path) -> None:
    """Let the container's user (nobody, when the tests run as root) use the folder."""
    folder.chmod(0o777)


# -- Remote kernels -------------------------------------------------------------------------

# In the environment: this module may load twice (`conftest`, `tests.conftest`).
REMOTE_URL = "RUNFIX_TEST_REMOTE_URL"


@pytest.fixture
def live_model(live_model_server: Any) -> Any:
    """The session's real model (`live_model_server`), left quiet after each test that used
    it: an answer its client hung up on is generated to its end before the next test runs."""
    yield live_model_server
    if not live_model_server.proxy.quiet():
        pytest.fail("the real model was still generating an answer five minutes after the test")


@pytest.fixture(scope="session")
def live_model_server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A real small model (`tests/support/real_model.py`), or the endpoint named by
    RUNFIX_TEST_MODEL_URL and RUNFIX_TEST_MODEL, behind a proxy that sees every request.
    Skipped where none can be had, unless RUNFIX_REQUIRE_MODEL says it is here."""
    server = None
    url, name = os.environ.get("RUNFIX_TEST_MODEL_URL"), os.environ.get("RUNFIX_TEST_MODEL")
    if not (url and name):
        try:
            server = real_model.start(tmp_path_factory.mktemp("model") / "server.log")
        except real_model.ModelUnavailable as exc:
            if os.environ.get("RUNFIX_REQUIRE_MODEL"):
                pytest.fail(f"the real model is required here and could not start: {exc}")
            pytest.skip(f"no real model here: {exc}")
        url, name = server.url, server.name
    proxy = real_model.Proxy(url)
    try:
        yield real_model.Live(proxy, name)
    finally:
        proxy.close()
        if server is not None:
            server.stop()


@pytest.fixture(scope="session")
def jupyter_server() -> Any:
    """A real Jupyter Server on loopback (token auth), shared by the tests that run remotely."""
    server = JupyterServer().start()
    os.environ[REMOTE_URL] = server.url
    yield server
    os.environ.pop(REMOTE_URL, None)
    server.stop()


@pytest.fixture(
    params=[
        "kernel",
        pytest.param("docker", marks=pytest.mark.docker),
        pytest.param("remote", marks=pytest.mark.remote),
    ]
)
def executor(request: pytest.FixtureRequest, folder: Path) -> str:
    """Each slice test with the local kernel, in the Docker sandbox, and on a Jupyter Server
    (`init_params` points `executor: "remote"` at the session's server)."""
    if request.param == "docker":
        request.getfixturevalue("sandbox_image")
        open_to_sandbox(folder)
    if request.param == "remote":
        request.getfixturevalue("jupyter_server")
    return str(request.param)


def init_params(
    folder: Path, client: str = "neovim@v0.11.0", options: dict[str, Any] | None = None
) -> lsp.InitializeParams:
    options = dict(options or {})
    if options.get("executor") == "remote" and "remote" not in options:
        options["remote"] = {"url": os.environ.get(REMOTE_URL), "tokenEnv": TOKEN_ENV}
    return lsp.InitializeParams(
        capabilities=client_capabilities(client),
        root_uri=folder.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)],
        initialization_options={"python": sys.executable, **options},
    )


# The server's environment: a canary "API key" that the kernel must never see.
API_KEY_ENV = "RUNFIX_TEST_API_KEY"
API_KEY = "sk-runfix-canary-0123456789"
# Packages the server installs come from this folder only (the machine's pip settings aside).
# Set once in the environment: this module may load twice (`conftest`, `tests.conftest`).
WHEELS = Path(
    os.environ.setdefault("RUNFIX_TEST_WHEELS", tempfile.mkdtemp(prefix="runfix-test-wheels-"))
)
# runfix's state folder for this test run (in the environment, so that every server, editor
# and kernel the tests start has it): kernel logs and trust decisions never touch the user's.
# The temp folder (pytest's tmp_path) and this repository are trusted there; the trust tests
# give their servers a state folder of their own.
STATE = os.environ.setdefault("RUNFIX_TEST_STATE", tempfile.mkdtemp(prefix="runfix-test-state-"))
if os.environ.get("XDG_STATE_HOME") != STATE:  # this module may load twice
    os.environ["XDG_STATE_HOME"] = STATE
    for _root in (Path(tempfile.gettempdir()), Path(__file__).resolve().parent.parent):
        TrustStore().decide(_root, Choice.TRUST)
# A fix asks one candidate an attempt in the tests (every server and `runfix run` they start
# inherits this): scripted replies are consumed in order, one request at a time. The tests of
# the round of candidates asked at once set `model.candidates` themselves, which wins.
os.environ.setdefault("RUNFIX_MODEL_CANDIDATES", "1")
# A cache folder of the run's own (matplotlib keeps its fonts there) in which runfix's cannot
# be made: the servers keep no answer to `initialize` and answer it once built, as the tests'
# timing expects (tests/e2e/test_e2e_server.py gives the early answer a folder of its own).
CACHE = Path(os.environ.setdefault("RUNFIX_TEST_CACHE", tempfile.mkdtemp(prefix="runfix-cache-")))
os.environ["XDG_CACHE_HOME"] = str(CACHE)
(CACHE / "runfix").touch()  # a file: no folder for runfix's answers
# Kernels of other languages the servers find on their Jupyter path: bash_kernel's (a test
# dependency) and Deno's (the `deno` wheel's binary), as their installers would write them.
KERNELS = Path(os.environ.setdefault("RUNFIX_TEST_KERNELS", tempfile.mkdtemp(prefix="runfix-k-")))


write_kernelspecs(KERNELS)
os.environ["JUPYTER_PATH"] = str(KERNELS)  # also for `runfix run` and the kernels' own tests
STRIPE_KEY = "sk_live_51H8xYzAbCdEfGhIjKlMnOpQ"
"""A secret the servers' environment holds, as a user's shell does (its kernels read it):
no request to a model may carry it (issue 58)."""
SERVER_ENV = {
    **os.environ,
    "XDG_STATE_HOME": STATE,
    API_KEY_ENV: API_KEY,
    "OPENAI_API_KEY": API_KEY,
    "PIP_FIND_LINKS": str(WHEELS),
    "PIP_NO_INDEX": "1",
    "STRIPE_KEY": STRIPE_KEY,
}


def editor_like(lsp_client: LanguageClient) -> Any:
    """Make a pytest-lsp client behave like an editor (see `client`); it, as `Any`."""
    c: Any = lsp_client
    _read_code_actions_whole(lsp_client)
    c.inlay_refreshes = 0
    c.texts, c.versions, c.edits, c.questions = {}, {}, [], []
    c.cell_of, c.notebook_versions = {}, {}  # a notebook's cells, and its versions
    c.refuse_edits, c.answer = False, None
    c.statuses, c.outputs_changed = [], []

    @lsp_client.feature("runfix/status")
    def status(params: Any) -> None:
        c.statuses.append({"state": params.state, "executor": params.executor})

    @lsp_client.feature("runfix/outputs")
    def outputs_changed(params: Any) -> None:
        c.outputs_changed.append({"uri": params.uri, "rich": list(params.rich)})

    @lsp_client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(params: None) -> None:
        c.inlay_refreshes += 1

    @lsp_client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        c.edits.append(params)
        if c.refuse_edits:
            return lsp.ApplyWorkspaceEditResult(applied=False, failure_reason="refused by test")
        for uri, edits in _edits_of(params.edit):
            apply_edits(c, uri, edits)
        return lsp.ApplyWorkspaceEditResult(applied=True)

    @lsp_client.feature(lsp.WINDOW_SHOW_MESSAGE_REQUEST)
    def question(params: lsp.ShowMessageRequestParams) -> lsp.MessageActionItem | None:
        c.questions.append(params)
        return None if c.answer is None else lsp.MessageActionItem(title=c.answer)

    return c


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=SERVER_ENV))
async def client(lsp_client: LanguageClient) -> Any:
    """A real `runfix serve`, connected but not initialized: each test says as which client.

    Like an editor, it applies `workspace/applyEdit` to its copy of the text and
    sends `didChange` (unless `client.refuse_edits`), records the edits, answers
    `window/showMessageRequest` with `client.answer` (None: dismissed), and keeps the
    `runfix/status` notifications in `client.statuses` (`runfix/outputs` in
    `client.outputs_changed`).
    """
    editor_like(lsp_client)
    yield
    await end_session(lsp_client)


# A state folder where nothing is trusted until a test says so (the shared one trusts the
# temp folder). In the environment: this module may load twice (`conftest`, `tests.conftest`).
UNTRUSTED_STATE = Path(
    os.environ.setdefault(
        "RUNFIX_TEST_UNTRUSTED_STATE", tempfile.mkdtemp(prefix="runfix-untrusted-state-")
    )
)
UNTRUSTED_ENV = {**SERVER_ENV, "XDG_STATE_HOME": str(UNTRUSTED_STATE)}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=UNTRUSTED_ENV))
async def stranger(lsp_client: LanguageClient) -> Any:
    """A real `runfix serve` whose user has trusted nothing (`UNTRUSTED_STATE`), driven as
    `client` is."""
    editor_like(lsp_client)
    yield
    await end_session(lsp_client)


async def end_session(lsp_client: LanguageClient) -> None:
    """Shut a test's server down (a fixture's teardown)."""
    if lsp_client.capabilities is None:
        # Skipped or failed before `initialize` (no Docker engine here, say): shutdown_session
        # sends nothing then, and pytest-lsp would wait for a server that was never told to exit.
        lsp_client.exit(None)
        return
    await asyncio.wait_for(lsp_client.shutdown_session(), 30)


EVERY_CLIENT = ["visual_studio_code", "neovim@v0.11.0"]
"""For `@pytest.mark.parametrize("client_name", EVERY_CLIENT)`: assertions that hold for each."""


@pytest.fixture
def client_name() -> str:
    """As which client `initialized` initializes (its capabilities): parametrize to change."""
    return "neovim@v0.11.0"


@pytest.fixture
async def initialized(
    client: LanguageClient, folder: Path, client_name: str, request: pytest.FixtureRequest
) -> Any:
    """`client`, initialized on `folder` with the default settings, or those of the test's
    `@pytest.mark.settings({...})` (its `initializationOptions`); on each executor when the
    test takes the `executor` fixture too."""
    marker = request.node.get_closest_marker("settings")
    options = dict(marker.args[0]) if marker is not None else {}
    if "executor" in request.fixturenames:  # the test runs on each executor
        options["executor"] = request.getfixturevalue("executor")
    await client.initialize_session(init_params(folder, client_name, options))
    return client


def _read_code_actions_whole(client: LanguageClient) -> None:
    """lsprotocol reads any code action with a `command` as a bare Command (dropping its
    `edit` and `kind`); a Command's `command` is a string, a CodeAction's an object."""
    converter = client.protocol._converter

    def hook(obj: Any, _: Any) -> lsp.Command | lsp.CodeAction:
        kind = lsp.Command if isinstance(obj.get("command"), str) else lsp.CodeAction
        return cast(Union[lsp.Command, lsp.CodeAction], converter.structure(obj, kind))  # noqa: UP007

    converter.register_structure_hook(Union[lsp.Command, lsp.CodeAction], hook)  # noqa: UP007


def _edits_of(edit: lsp.WorkspaceEdit) -> list[tuple[str, list[lsp.TextEdit]]]:
    out: list[tuple[str, list[lsp.TextEdit]]] = []
    for change in edit.document_changes or []:
        assert isinstance(change, lsp.TextDocumentEdit)
        out.append(
            (change.text_document.uri, [e for e in change.edits if isinstance(e, lsp.TextEdit)])
        )
    out.extend((uri, list(edits)) for uri, edits in (edit.changes or {}).items())
    return out


def _offset(text: str, position: lsp.Position) -> int:
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: position.line]) + position.character


def apply_edits(c: Any, uri: str, edits: Sequence[lsp.TextEdit]) -> None:
    """Apply edits (ASCII positions) to the client's copy and tell the server, as editors do
    (a notebook's cell: through `notebookDocument/didChange`, as VS Code does)."""
    text = c.texts[uri]
    for edit in sorted(
        edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
    ):
        start, end = _offset(text, edit.range.start), _offset(text, edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    c.texts[uri] = text
    c.versions[uri] += 1
    changes: list[lsp.TextDocumentContentChangeEvent] = [
        lsp.TextDocumentContentChangePartial(range=e.range, text=e.new_text)
        for e in sorted(
            edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True
        )
    ]
    identifier = lsp.VersionedTextDocumentIdentifier(uri=uri, version=c.versions[uri])
    notebook = getattr(c, "cell_of", {}).get(uri)
    if notebook is not None:
        content = lsp.NotebookDocumentCellContentChanges(document=identifier, changes=changes)
        notebook_change(c, notebook, lsp.NotebookDocumentCellChanges(text_content=[content]))
        return
    c.text_document_did_change(
        lsp.DidChangeTextDocumentParams(text_document=identifier, content_changes=changes)
    )


def notebook_change(c: Any, notebook: str, cells: lsp.NotebookDocumentCellChanges) -> None:
    """`notebookDocument/didChange` of the client's notebook, its version one more."""
    c.notebook_versions[notebook] += 1
    version = c.notebook_versions[notebook]
    c.notebook_document_did_change(
        lsp.DidChangeNotebookDocumentParams(
            notebook_document=lsp.VersionedNotebookDocumentIdentifier(version, notebook),
            change=lsp.NotebookDocumentChangeEvent(cells=cells),
        )
    )


def open_doc(
    client: LanguageClient, path: Path, text: str, version: int = 1, language: str = "python"
) -> str:
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    c: Any = client
    if hasattr(c, "texts"):
        c.texts[uri], c.versions[uri] = text, version
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        )
    )
    return uri


def change(
    client: LanguageClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    c: Any = client
    rng = lsp.Range(lsp.Position(*start), lsp.Position(*end))
    if uri in getattr(c, "texts", {}):
        old = c.texts[uri]
        c.texts[uri] = old[: _offset(old, rng.start)] + text + old[_offset(old, rng.end) :]
        c.versions[uri] = version
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[lsp.TextDocumentContentChangePartial(range=rng, text=text)],
        )
    )


def run_args(uri: str, first: int | None = None, last: int | None = None) -> list[Any]:
    arg: dict[str, Any] = {"uri": uri}
    if first is not None:
        end = last if last is not None else first
        arg["range"] = {
            "start": {"line": first, "character": 0},
            "end": {"line": end + 1, "character": 0},
        }
    return [arg]


async def run(
    client: LanguageClient, uri: str, first: int | None = None, last: int | None = None
) -> Any:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.run", arguments=run_args(uri, first, last))
    )


async def command_at(client: LanguageClient, name: str, uri: str, line: int) -> Any:
    """A runfix command on the document's `line` (`[{"uri", "position"}]`); its answer."""
    position = {"line": line, "character": 0}
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(name, [{"uri": uri, "position": position}])
    )


def errors(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    return [
        d for d in client.diagnostics.get(uri, []) if d.severity == lsp.DiagnosticSeverity.Error
    ]


def infos(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    return [
        d
        for d in client.diagnostics.get(uri, [])
        if d.severity == lsp.DiagnosticSeverity.Information
    ]


async def hints(client: LanguageClient, uri: str, lines: int = 200) -> list[lsp.InlayHint]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(lines, 0)),
        )
    )
    return list(result or [])


async def hover_text(client: LanguageClient, uri: str, line: int, character: int = 0) -> str:
    result = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri=uri), lsp.Position(line, character))
    )
    if result is None:
        return ""
    contents = result.contents
    assert isinstance(contents, lsp.MarkupContent)
    return contents.value


def make_wheel(where: Path, name: str, source: str) -> Path:
    """A minimal real wheel of one module."""
    dist = name.replace("_", "-")
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": source.encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: runfix-tests\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = where / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


async def quick_fixes(client: LanguageClient, uri: str) -> list[lsp.CodeAction]:
    [diagnostic] = errors(client, uri)
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            range=diagnostic.range,
            context=lsp.CodeActionContext(diagnostics=[diagnostic], only=["quickfix"]),
        )
    )
    return [a for a in actions or [] if isinstance(a, lsp.CodeAction)]


class HandDriven:
    """A `runfix serve` driven by hand over stdio: for ends pytest-lsp cannot stage
    (stdin closed, the server killed) and for what outlives it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=SERVER_ENV
        )
        self._ids = 0
        self.configuration: Any = None
        """What it answers to `workspace/configuration` (when its capabilities say it does)."""

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        """Send a request; its result (notifications and server requests are skipped)."""
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            length = 0
            while (line := self.proc.stdout.readline().strip()) != b"":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(self.proc.stdout.read(length))
            if message.get("method") == "workspace/configuration" and "id" in message:
                self.send({"id": message["id"], "result": [self.configuration]})
            elif message.get("id") == self._ids and "method" not in message:
                return message.get("result")

    def initialize(
        self, folder: Path, options: dict[str, Any], capabilities: dict[str, Any] | None = None
    ) -> None:
        params = {
            "processId": os.getpid(),
            "rootUri": folder.as_uri(),
            "capabilities": capabilities or {},
            "initializationOptions": options,
        }
        self.request("initialize", params)
        self.send({"method": "initialized", "params": {}})

    def run(self, path: Path, text: str) -> Any:
        """Open the document and run all of it; the command's answer."""
        uri = path.as_uri()
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
        params = {"command": "runfix.run", "arguments": [{"uri": uri}]}
        return self.request("workspace/executeCommand", params)

    def end(self, how: str) -> None:
        """ "shutdown and exit", "stdin closed" or "server killed"; waits for the process."""
        assert self.proc.stdin is not None
        if how == "shutdown and exit":
            self.request("shutdown", None)
            self.send({"method": "exit"})
        elif how == "stdin closed":
            self.proc.stdin.close()
        else:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def kernels(self) -> set[int]:
        """The pids of the kernels this server runs now (its ipykernel child processes)."""
        found = set()
        for children in Path(f"/proc/{self.proc.pid}/task").glob("*/children"):
            for pid in children.read_text().split():
                with contextlib.suppress(OSError):
                    if b"ipykernel_launcher" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        found.add(int(pid))
        return found

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
