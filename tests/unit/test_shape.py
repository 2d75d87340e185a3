"""The package's shape: no import cycle, and `runfix run` without any LSP machinery."""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

import pytest

from executor.kinds import KINDS
from lsp_server import contract
from lsp_server.settings import KNOWN_KEYS, Settings

ROOT = Path(__file__).parents[2]
PACKAGES = ("lsp_server", "executor")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str, path: Path, known: set[str], typing: bool = False) -> set[str]:
    """The project modules `name` imports when it runs: every import, also inside functions
    (an import moved into a function to break a cycle is still a cycle), but not those only
    a type checker sees (unless `typing`)."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if not typing and _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in known else base)
    return {m for m in found if m in known and m != name}


@functools.cache
def _graph(typing: bool = False) -> dict[str, set[str]]:
    """Each project module → the project modules it imports when it runs (`typing`: and
    those only a type checker sees)."""
    modules = _modules()
    return {name: _imports(name, path, set(modules), typing) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_server_or_the_executor() -> None:
    graph = _graph()
    assert graph["lsp_server.lsp.app"] >= {"lsp_server.lsp.server", "lsp_server.lsp.features"}
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def _external(path: Path) -> set[str]:
    """The top-level packages outside the project a module imports (type-checking ones too)."""
    tree = ast.parse(path.read_text())
    found = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and not node.level
    }
    found |= {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    return found


FRONT_END = "lsp_server.lsp"
"""The LSP front end: the only folder that speaks LSP."""


def _role(module: str) -> str:
    if module == FRONT_END or module.startswith(FRONT_END + "."):
        return "lsp"
    if module.startswith("executor"):
        return "executor"
    if module.startswith("lsp_server.cli") or module == "lsp_server.__main__":
        return "cli"
    return "core"  # the flow, the session, settings…, and model/, outputs/, record/


def test_only_the_lsp_front_end_speaks_lsp() -> None:
    """pygls and lsprotocol are imported in `lsp_server/lsp/` and nowhere else."""
    speaking = {
        name: _external(path) & {"pygls", "lsprotocol"}
        for name, path in _modules().items()
        if _role(name) != "lsp"
    }
    assert {name: found for name, found in speaking.items() if found} == {}


def test_the_core_and_the_cli_never_import_the_lsp_front_end() -> None:
    """The LSP front end sits on the core; the CLI's `serve` names it in its table of commands
    (imported when `runfix serve` runs), so no module outside it imports it."""
    crossing = {
        name: sorted(m for m in imported if _role(m) == "lsp")
        for name, imported in _graph().items()
        if _role(name) in ("core", "cli")
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_the_executor_imports_nothing_of_the_server() -> None:
    crossing = {
        name: sorted(m for m in imported if _role(m) != "executor")
        for name, imported in _graph().items()
        if _role(name) == "executor"
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_the_core_never_imports_the_cli() -> None:
    """The CLI is a front end like the LSP one: the core serves both and knows neither."""
    crossing = {
        name: sorted(m for m in imported if _role(m) == "cli")
        for name, imported in _graph().items()
        if _role(name) == "core"
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_the_top_level_of_the_server_holds_at_most_15_modules() -> None:
    """Issue 37: the core is grouped by role (`text/`, `fix/`, …) rather than grown flat."""
    top = sorted(
        p.stem for p in (ROOT / "lsp_server").glob("*.py") if p.stem not in ("__init__", "__main__")
    )
    assert len(top) <= 15, top


def _calls(attribute: str) -> dict[str, list[str]]:
    """Where `<something>.<attribute>(…)` is called in the server: module → the functions
    (`Class.method`) holding each call, with the receiver's text."""
    found: dict[str, list[str]] = {}
    for name, path in _modules().items():
        if not name.startswith("lsp_server"):
            continue
        tree = ast.parse(path.read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != attribute:
                continue
            holders: list[str] = []
            at: ast.AST = node
            while at in parents:
                at = parents[at]
                if isinstance(at, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    holders.append(at.name)
            holder = ".".join(reversed(holders[-2:]))
            found.setdefault(name, []).append(f"{holder}: {ast.unparse(node.func.value)}")
    return found


def test_only_the_runner_runs_code_in_a_kernel() -> None:
    """Issue 37: a piece of code runs for the user in one place (`runner.Runner`: executed,
    its results kept, published and recorded); the fix check's throwaway kernels are the
    one other caller of `execute` (the run record's SQL `execute` is not a kernel's)."""
    calls = {
        name: found
        for name, found in _calls("execute").items()
        if name not in ("lsp_server.services.runner", "lsp_server.fix.fixcheck")
        and not name.startswith("lsp_server.record")
    }
    assert calls == {}


def test_only_the_context_maker_looks_a_document_folder_up_in_the_core() -> None:
    """Issue 37: a request's document context (`runs.Where`: folder, settings, text) is made
    once, at the front end's door, by `Flow.where`; the core takes it and never looks a
    document's folder or settings up again. The doors (the LSP front end, the CLI, agents'
    calls, which come with their folder) may."""
    # (and the session: the state, where the settings are kept; a debug session is a door
    # too: DAP's front end, its folder given by the socket it came through)
    doors: tuple[str, ...] = ("lsp_server.lsp", "lsp_server.cli", "lsp_server.agents")
    doors += ("lsp_server.session", "lsp_server.debug")
    looked: dict[str, list[str]] = {}
    for attribute in (
        "folder_for",
        "settings",
        "decided_settings",
        "cached_settings",
        "display_settings",
    ):
        for name, found in _calls(attribute).items():
            if not name.startswith(doors):
                looked[name] = sorted({*looked.get(name, []), *found})
    # The face's own: the context it makes (`where`), and what it answers the doors that
    # name a folder rather than a document (issue 48: the doors never touch the session).
    face = {"where", "folder_settings", "display_settings", "cached_settings", "record_of"}
    face = {f"Flow.{name}" for name in (*face, "record_for", "_kernel_of")}
    # (and the verb of a folder's trust and settings: the settings read again when the
    # client's change, the trust decision an agent's leave depends on)
    face |= {"TrustDecisions.settings_changed", "TrustDecisions.agent_may_run"}
    core = {
        name: [f for f in found if f.split(":")[0] not in face] for name, found in looked.items()
    }
    assert {name: found for name, found in core.items() if found} == {}
    assert "Flow.where: self.session" in looked["lsp_server.flow"]


def test_what_reads_the_text_runs_nothing() -> None:
    """`lsp_server/text/` reads a document's text: it imports nothing but itself (no kernel,
    no settings, no LSP), so every front end and the fix check can use it as it is."""
    crossing = {
        name: sorted(m for m in imported if not m.startswith("lsp_server.text"))
        for name, imported in _graph().items()
        if name.startswith("lsp_server.text")
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_the_editors_speak_only_what_the_contract_names() -> None:
    """The contract is what the editors read: every command and message they use is in it."""
    sources = [*(ROOT / "editors/vscode/src").glob("*.ts")]
    sources += [*(ROOT / "editors/nvim").rglob("*.lua")]
    text = "\n".join(p.read_text() for p in sources)
    called = set(re.findall(r'(?:call|request)\("(runfix\.[A-Za-z]+)"', text))
    assert {contract.RUN, contract.RUN_AND_FIX, contract.GENERATE} <= called
    assert called <= set(contract.COMMANDS)
    messages = set(re.findall(r'"(runfix/[A-Za-z]+)"', text))
    assert messages == {
        contract.STATUS_NOTIFICATION,
        contract.INPUT_REQUEST,
        contract.OUTPUTS_NOTIFICATION,
    }
    assert contract.INPUT_CAPABILITY in text and contract.OUTPUTS_CAPABILITY in text


def test_every_executor_kind_is_whole() -> None:
    """Each row of the executor table loads a kernel class with every hook implemented, for
    its own config; its options, if it has a section, are settings."""
    for kind in KINDS.values():
        cls = kind.load()
        assert not inspect.isabstract(cls), f"{kind.name}: {sorted(cls.__abstractmethods__)}"
        if kind.section is not None:
            assert isinstance(getattr(Settings(), kind.section), kind.config)
            assert any(key.startswith(f"{kind.section}.") for key in KNOWN_KEYS)


def test_a_command_of_another_shape_is_refused_when_it_is_registered() -> None:
    """`workspace/executeCommand` calls runfix's commands as `f(*arguments)` (no pygls
    signature reading): a command taking named parameters would get them wrong at run time,
    so it must fail where it is declared."""
    from lsp_server.lsp.server import RunfixServer

    server = RunfixServer()

    async def named(ls: RunfixServer, uri: str) -> None: ...

    with pytest.raises(TypeError, match=r"runfix\.example"):
        server.command("runfix.example")(named)

    async def fits(ls: RunfixServer, *args: object) -> None: ...

    server.command("runfix.example")(fits)
    assert "runfix.example" in server.protocol.fm.commands


DOORS = ("lsp_server.lsp", "lsp_server.cli", "lsp_server.agents", "lsp_server.debug")
"""What calls the core: the LSP front end, the command line, agents' calls, the debugger."""
FACE = ("lsp_server.flow", "lsp_server.commands")
"""The face the doors call (one method a command) and the table they find commands in."""
VERBS = "lsp_server.verbs"
"""What a command does, one module a verb."""
FIXING = "lsp_server.fix"
"""What makes and proves a fix, over the services (the fix verb's and the tests verb's)."""
SERVICES = "lsp_server.services"
"""What the verbs share: the runner, the gate, the results desk, kernel reads, installs."""
STATE = "lsp_server.session"


def _in(module: str, *places: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in places)


def _server_graph() -> dict[str, set[str]]:
    """`lsp_server/`'s imports among its own modules, TYPE_CHECKING ones too."""
    return {
        k: {m for m in v if m.startswith("lsp_server")}
        for k, v in _graph(typing=True).items()
        if k.startswith("lsp_server")
    }


def test_no_import_circle_even_for_the_type_checker_and_none_back_up_to_a_door() -> None:
    """Issue 48: `lsp_server/` has no import circle, TYPE_CHECKING imports included (the
    core's one circle was `flow` ↔ `fix.flow` ↔ `generate`), and nothing below the doors
    imports a door."""
    graph = _server_graph()
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    up = {
        name: sorted(m for m in imported if _in(m, *DOORS))
        for name, imported in graph.items()
        if not _in(name, *DOORS) and name not in ("lsp_server.__main__",)
    }
    assert {k: v for k, v in up.items() if v} == {}


def _crossing(rule: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    """For each folder of `rule`, its modules' imports of what the folder may not import."""
    graph = _server_graph()
    return {
        name: found
        for name, imported in graph.items()
        for place, banned in rule.items()
        if _in(name, place) and (found := sorted(m for m in imported if _in(m, *banned)))
    }


def test_the_rooms_are_layered_doors_face_verbs_fixing_services_state() -> None:
    """Issue 62: the folders are the layers, each importing only those below it — the
    doors, the face (`flow`, `commands`), the verbs (`verbs/`), what makes a fix (`fix/`),
    the services (`services/`), the state (`session`) — so where a change goes reads from
    the tree. Made from the imports, TYPE_CHECKING ones too."""
    assert (
        _crossing(
            {
                VERBS: FACE,
                FIXING: (*FACE, VERBS),
                SERVICES: (*FACE, VERBS, FIXING),
                STATE: (*FACE, VERBS, FIXING, SERVICES),
            }
        )
        == {}
    )
    folders = {p.name for p in (ROOT / "lsp_server").iterdir() if p.is_dir()}
    assert {"verbs", "services"} <= folders
    top = {p.stem for p in (ROOT / "lsp_server").glob("*.py")}
    assert not top & {"runner", "gate", "generate"}, "services and verbs live in their folders"


def test_a_verb_imports_no_other_verb() -> None:
    """Issue 48, 62: each verb depends on the services and the editor port, never on
    another verb (the face composes them)."""
    graph = _server_graph()
    crossing = {
        name: sorted(m for m in imported if _in(m, VERBS))
        for name, imported in graph.items()
        if _in(name, VERBS) and name != VERBS
    }
    assert {k: v for k, v in crossing.items() if v} == {}


def test_only_the_runner_takes_a_folders_run_lock() -> None:
    """Issue 48: runs of a folder go one at a time; the lock is the runner's queue's to
    take (a range's step, a fix's candidate and an agent's run ask the runner's queue)."""
    assert {name: found for name, found in _calls("run_lock").items()} == {
        "lsp_server.services.queue": ["FolderQueue.locked: self.session"]
    }


def test_no_door_touches_the_session() -> None:
    """Issue 48, 62: the doors (the LSP handlers, the command line, agents' calls) ask the
    face (`Flow`) and never reach past it into the state (35 lines of `lsp/` used
    `ls.session`; `runfix test` made its own kernel and fixer): a door that makes a
    `Session` hands it to the face and touches nothing of it. Made from the code's
    attribute reads, not its text."""
    doors = [*(ROOT / "lsp_server/lsp").rglob("*.py"), ROOT / "lsp_server/agents.py"]
    doors += [*(ROOT / "lsp_server/cli").glob("*.py"), *(ROOT / "lsp_server/debug").glob("*.py")]
    touched: dict[str, list[str]] = {}
    for path in doors:
        name = _module_name(path)
        states = (
            _graph(typing=True)[name] & {"lsp_server.session"} or "ls.session" in path.read_text()
        )
        for node in ast.walk(ast.parse(path.read_text())):
            if not (states and isinstance(node, ast.Attribute)):
                continue
            held = node.value
            if (isinstance(held, ast.Name) and held.id == "session") or (
                isinstance(held, ast.Attribute) and held.attr == "session"
            ):
                touched.setdefault(str(path.relative_to(ROOT)), []).append(ast.unparse(node))
    assert touched == {}


def test_one_desk_writes_what_documents_show_and_the_editor_never_reads_it_back() -> None:
    """Issue 48, 4: the results desk (`services.desk`) is the one module that touches the
    result store and the one caller of the editor port's `show`; the gate, the runner and
    the face hand it what to keep. The LSP editor holds no session: it draws what it is
    handed (before, `published(uri, added)` ignored `added` and read the store back)."""
    touching = {
        name: sorted(set(re.findall(r"\bsession\.store\b[.\w]*", path.read_text())))
        for name, path in _modules().items()
        if name.startswith("lsp_server") and name != "lsp_server.services.desk"
    }
    assert {k: v for k, v in touching.items() if v} == {}
    showing = {
        name: on_editor
        for name, found in _calls("show").items()
        if (on_editor := [f for f in found if f.endswith("editor")])
    }
    assert showing == {"lsp_server.services.desk": ["Desk.show: self.editor"]}
    editor = (ROOT / "lsp_server/lsp/editor.py").read_text()
    assert "session" not in editor.lower()


def test_every_contract_command_has_one_row_and_no_door_reaches_past_the_face() -> None:
    """Issue 48, 1 and 62, 2: the one table (`commands.TABLE`) has a row for each command of
    the contract that asks the core to do something (the rest are a door's own: the editor's
    workspace and views); the doors call the face, never a service behind it (`flow.gate.…`,
    `flow.fixes.…`), and no door runs, fixes or generates past the table."""
    from lsp_server.commands import TABLE

    commands = {
        v for k, v in vars(contract).items() if k.isupper() and str(v).startswith("runfix.")
    }
    doors_own = {contract.EXPORT, contract.OUTPUTS, contract.SHOW_OUTPUT}
    doors_own |= {contract.DEBUG_CELL, contract.DEBUG_ERROR}  # (the editor's own commands)
    doors_own |= {contract.TRUST, contract.UNTRUST, contract.HISTORY}  # (workspace folders)
    doors_own |= {contract.STATUS, contract.CLEAR}  # (what the editor shows)
    assert set(TABLE) == commands - doors_own
    services = r"\bflow\.(gate|runner|fixes|generator|desk|reads|installs|session|editor)\."
    # (a code action's resolve asks the face for a fix it does not apply: no command)
    verbs = r"\bflow\.(run|run_and_fix|generate|install|run_tests|fix_tests)\("
    doors = [*(ROOT / "lsp_server/lsp").rglob("*.py"), ROOT / "lsp_server/agents.py"]
    doors += [*(ROOT / "lsp_server/cli").glob("*.py"), *(ROOT / "lsp_server/debug").glob("*.py")]
    reaching = {
        str(path.relative_to(ROOT)): found
        for path in doors
        if (found := re.findall(f"{services}|{verbs}", path.read_text()))
    }
    assert reaching == {}


def test_the_face_only_forwards() -> None:
    """Issue 62, 1: each of `Flow`'s methods is one statement handing the call on (a verb's,
    a service's); the face makes a request's context (`where`) and resolves a document's
    kernel or record, and nothing more."""
    tree = ast.parse((ROOT / "lsp_server/flow.py").read_text())
    face = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Flow")
    own = {"__init__", "where", "record_of", "_kernel_of", "open_kernel"}
    working = {
        node.name: len(body)
        for node in face.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in own
        if len(body := [s for s in node.body if not _is_docstring(s)]) > 1
    }
    assert working == {}


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def test_no_class_of_the_server_or_the_executor_is_over_400_lines() -> None:
    """Issue 48, 62: what grows past 400 lines is a room doing two jobs (the fix flow was
    415; `JupyterKernel` 898, now layered: `KernelLifecycle`, `LiveKernel`,
    `RunningKernel`, `JupyterKernel`)."""
    long = {
        f"{name}.{node.name}": (node.end_lineno or 0) - node.lineno + 1
        for name, path in _modules().items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and (node.end_lineno or 0) - node.lineno + 1 > 400
    }
    assert long == {}


def test_no_module_imports_another_modules_private_name() -> None:
    """Issue 71, 3: a name with a leading underscore is its module's own (`cli/dap.py` took
    `cli.mcp._held_folder`; `fix.silencing` four of `fix.fixcheck`'s). What two modules
    share is public, in the module it belongs to. (`executor._kernel_*` are modules the
    kernel loads, named so to stay out of the user's way: importing a module is not
    importing its privates.)"""
    found = []
    for path in [*(ROOT / "lsp_server").rglob("*.py"), *(ROOT / "executor").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in ("lsp_server", "executor"):
                continue
            base = ROOT.joinpath(*node.module.split("."))
            for alias in node.names:
                is_module = (base / f"{alias.name}.py").exists() or (base / alias.name).is_dir()
                if alias.name.startswith("_") and not alias.name.startswith("__") and not is_module:
                    found.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
    assert found == []
