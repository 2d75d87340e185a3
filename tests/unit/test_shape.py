"""The package's shape: no import cycle, and `runfix run` without any LSP machinery."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_server import contract

ROOT = Path(__file__).parents[2]
PACKAGES = ("lsp_server", "executor")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports when it runs: every import, also inside functions
    (an import moved into a function to break a cycle is still a cycle), but not those only
    a type checker sees."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if _under_type_checking(node, parents):
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
    modules = _modules()
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    assert graph["lsp_server.lsp.app"] >= {"lsp_server.lsp.server", "lsp_server.lsp.features"}
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_the_executor_and_the_flow_know_nothing_of_lsp() -> None:
    """`executor/` never imports LSP; the services reach the editor only through its interface."""
    modules = _modules()
    lsp_side = {"lsprotocol", "pygls"}
    plain = [m for m in modules if m.startswith("executor")] + [
        "lsp_server.flow",
        "lsp_server.session",
        "lsp_server.editor",
        "lsp_server.contract",
        "lsp_server.capabilities",
        "lsp_server.cli.run",
    ]
    for name in plain:
        tree = ast.parse(modules[name].read_text())
        imported = {
            (node.module or "").split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
        } | {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert not imported & lsp_side, f"{name} imports {imported & lsp_side}"


@pytest.mark.kernel
def test_runfix_run_imports_neither_pygls_nor_the_server(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('headless')\n")
    probe = (
        "import json, sys\n"
        "from lsp_server.cli.main import main\n"
        f"code = main(['run', {str(script)!r}])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    *printed, last = done.stdout.splitlines()
    report = json.loads(last)
    assert report["code"] == 0, done.stdout + done.stderr
    assert printed == [f"{script}:1:1: note: headless"]
    loaded = set(report["modules"])
    lsp_machinery = {"pygls", "lsprotocol", "lsp_server.lsp.server", "lsp_server.lsp.app"}
    lsp_machinery |= {"lsp_server.lsp.editor", "lsp_server.lsp.features", "lsp_server.lsp.convert"}
    assert not loaded & lsp_machinery, sorted(loaded & lsp_machinery)
    assert {"lsp_server.flow", "lsp_server.cli.run"} <= loaded  # the same flow as the editor's
    assert "openai" not in loaded  # imported when a model is first asked, not before


def test_the_server_answers_initialize_before_it_loads_kernel_or_model_libraries() -> None:
    """jupyter_client, docker-py and openai take ~0.5 s to import: a server answers
    `initialize` without them, and loads each when a kernel or a model is first needed."""
    init = {"processId": None, "rootUri": None, "capabilities": {}}
    probe = (
        "import json, sys\n"
        "from lsp_server.lsp.app import create_server\n"
        "from lsp_server.lsp.transport import handle_frame\n"
        "server = create_server()\n"
        "sent = []\n"
        "server.protocol.set_writer(type('W', (), {'write': lambda self, b: sent.append(b)})())\n"
        f"message = {{'jsonrpc': '2.0', 'id': 1, 'method': 'initialize', 'params': {init!r}}}\n"
        "handle_frame(server.protocol, json.dumps(message).encode())\n"
        "print(json.dumps({'answered': len(sent), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["answered"] == 1, done.stdout + done.stderr
    heavy = {"jupyter_client", "docker", "openai", "zmq", "executor.local", "executor.docker"}
    assert not set(report["modules"]) & heavy, sorted(set(report["modules"]) & heavy)


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
