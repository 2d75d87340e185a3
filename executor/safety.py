"""A scan of model-written code for what it could do to the machine it runs on.

It reads the syntax tree (never runs anything) and names what it finds:
spawning processes, shell commands, deleting files, writing outside the
folder, network access, `eval`/`exec`, obfuscated imports and attribute
look-ups, decoded payloads, native code. Import aliases are followed
(`import subprocess as sp; sp.run(...)` is `subprocess.run`).

The scan advises; it is not a sandbox. Isolation (the Docker executor) and
the user's confirmation are the controls — a determined author can hide
intent from any static scan, so a clean scan never means "safe".
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from executor.text import split_lines
from executor.vouched import Names, dotted_parts, unvouched


@dataclass(frozen=True)
class Finding:
    line: int
    """1-based line in the scanned code's coordinates (after `first_line`)."""
    end_line: int
    category: str
    message: str


_SPAWN = {
    "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call",
    "subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput",
    "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp", "pty.spawn",
    "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
}  # fmt: skip
_SPAWN_PREFIXES = ("os.spawn", "os.exec")
_SHELL = {"os.system", "subprocess.getoutput", "subprocess.getstatusoutput"}
_DELETE = {
    "os.remove", "os.unlink", "os.rmdir", "os.removedirs", "shutil.rmtree", "os.truncate",
}  # fmt: skip
_DELETE_METHODS = {"unlink", "rmdir", "rmtree"}
_NETWORK_MODULES = {
    "socket", "ssl", "urllib.request", "urllib3", "requests", "httpx", "http.client", "aiohttp",
    "ftplib", "smtplib", "telnetlib", "poplib", "imaplib", "paramiko", "websocket", "websockets",
    "xmlrpc.client", "pycurl",
}  # fmt: skip
_DYNAMIC = {"eval", "exec", "compile", "builtins.eval", "builtins.exec"}
_DECODE = {
    "base64.b64decode", "base64.b32decode", "base64.b16decode", "base64.b85decode",
    "base64.a85decode", "base64.decodebytes", "base64.urlsafe_b64decode", "codecs.decode",
    "zlib.decompress", "marshal.loads", "pickle.loads", "bytes.fromhex",
}  # fmt: skip
_NATIVE_MODULES = {"ctypes", "cffi"}
_DANGEROUS_ATTRS = {"system", "popen", "exec", "eval", "remove", "unlink", "rmtree", "__import__"}
_WRITE_MODE = re.compile(r"[wax+]")
_MAGIC = re.compile(r"^(\s*)(!|%%?(?:system|sx|bash|sh|script)\b)")


def _dotted(node: ast.expr) -> str | None:
    parts = dotted_parts(node)
    return ".".join(parts) if parts is not None else None


def _literal(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _outside(path: str) -> bool:
    """A path literal that leaves the working folder: absolute, home or `..`."""
    return (
        path.startswith(("/", "~", "\\"))
        or ".." in re.split(r"[\\/]", path)
        or (len(path) > 1 and path[1] == ":")
    )


class _Scanner(ast.NodeVisitor):
    """Walks model-written code once, naming what it could do (through the aliases it made)."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.found: list[tuple[ast.AST, str, str]] = []

    def add(self, node: ast.AST, category: str, message: str) -> None:
        self.found.append((node, category, message))

    def resolve(self, node: ast.expr) -> str | None:
        name = _dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    # -- imports ---------------------------------------------------------------------

    def _imported(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        if module in _NETWORK_MODULES or top in _NETWORK_MODULES:
            self.add(node, "network", f"uses the network ({module})")
        if top in _NATIVE_MODULES:
            self.add(node, "native", f"loads native code ({module})")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.aliases[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
            self._imported(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}"
            self._imported(node, f"{module}.{alias.name}" if module else alias.name)
        self._imported(node, module)

    # -- calls -----------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        name = self.resolve(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if name is not None:
            self._call(node, name)
        if method in _DELETE_METHODS and (name is None or name not in _DELETE):
            self.add(node, "delete", f"deletes files (.{method}())")
        if method in ("write_text", "write_bytes", "open"):
            path = self._path_of(node.func)
            if path is not None and _outside(path) and _writes(node, method):
                self.add(node, "write", f"writes outside the folder ({path})")

    def _path_of(self, func: ast.expr) -> str | None:
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
            return _literal(func.value.args[0]) if func.value.args else None
        return None

    def _call(self, node: ast.Call, name: str) -> None:
        shell = any(
            k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value
            for k in node.keywords
        )
        if name in _SHELL or shell or name == "asyncio.create_subprocess_shell":
            self.add(node, "shell", f"runs a shell command ({name})")
        elif name in _SPAWN or name.startswith(_SPAWN_PREFIXES):
            self.add(node, "process", f"starts a process ({name})")
        if name in _DELETE:
            self.add(node, "delete", f"deletes files ({name})")
        if name in _DYNAMIC:
            self.add(node, "dynamic", f"runs code built at run time ({name.split('.')[-1]})")
        if name in ("__import__", "importlib.import_module", "builtins.__import__"):
            self.add(node, "obfuscated", f"imports a module by a computed name ({name})")
        if name in ("getattr", "builtins.getattr") and len(node.args) >= 2:
            attr = _literal(node.args[1])
            if attr is None or attr in _DANGEROUS_ATTRS:
                shown = repr(attr) if attr is not None else "a computed name"
                self.add(node, "obfuscated", f"looks up an attribute by {shown} (getattr)")
        if name in _DECODE:
            self.add(node, "payload", f"decodes a hidden payload ({name})")
        if name in ("open", "io.open", "builtins.open") and node.args:
            path = _literal(node.args[0])
            if path is not None and _outside(path) and _writes(node, "open"):
                self.add(node, "write", f"writes outside the folder ({path})")
        if name.split(".")[0] in _NETWORK_MODULES or name in ("urllib.request.urlopen",):
            self.add(node, "network", f"uses the network ({name})")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "__builtins__":
            self.add(node, "obfuscated", "reaches into __builtins__")


def _writes(node: ast.Call, method: str) -> bool:
    if method in ("write_text", "write_bytes"):
        return True
    mode: ast.expr | None = node.args[1] if len(node.args) > 1 else None
    if method == "open" and isinstance(node.func, ast.Attribute):
        mode = node.args[0] if node.args else None  # Path(...).open(mode)
    for keyword in node.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    text = _literal(mode)
    return text is not None and _WRITE_MODE.search(text) is not None


def _magics(code: str) -> Iterator[tuple[int, str]]:
    """IPython shell escapes (`!ls`, `%system`, `%%bash`), which the parser cannot see."""
    for number, line in enumerate(split_lines(code), 1):
        if _MAGIC.match(line):
            yield number, line.strip()


def without_magics(code: str) -> str:
    return "\n".join(
        (m.group(1) + "pass") if (m := _MAGIC.match(line)) else line.rstrip("\r\n")
        for line in split_lines(code)
    )


def scan(
    code: str,
    first_line: int = 1,
    *,
    language: str | None = None,
    context: Names | None = None,
    modules: Collection[str] = (),
) -> list[Finding]:
    """What the code could do, one finding per (line, category); empty if it does not parse.

    `language`: the name of the language `code` is in when it is not Python. runfix reads
    Python only, so such code is one finding over all its lines: model-written code in it
    runs once the user has looked (or in the sandbox), whatever it does.

    Beyond what it names (a shell, a process, the network, …), every line that reaches
    something runfix cannot vouch for (`vouched.unvouched`: a module, builtin, attribute or
    file off its allow-list) is a finding too: code runs unasked only when all of it is
    vouched for. `context`: what the document binds (`vouched.document_names`, so that
    `os` imported in a cell above is known to be os); `modules`: the folder's own."""
    offset = first_line - 1
    if language is not None:
        last = first_line + code.rstrip("\n").count("\n")
        said = f"is {language} code, which runfix cannot check (it reads Python only)"
        return [Finding(first_line, last, "unread", said)]
    findings = [
        Finding(n + offset, n + offset, "shell", f"runs a shell command ({text[:40]})")
        for n, text in _magics(code)
    ]
    try:
        tree = ast.parse(without_magics(code))
    except (SyntaxError, ValueError):
        return findings
    scanner = _Scanner()
    # Imports first, so that aliases are known wherever the call sits.
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            scanner.visit(node)
    imports = list(scanner.found)
    scanner.found.clear()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Call, ast.Name)):
            getattr(scanner, f"visit_{type(node).__name__}")(node)
    seen: set[tuple[int, str]] = {(f.line, f.category) for f in findings}
    if not findings and not imports and not scanner.found:  # what is named says more
        lines: set[int] = set()
        for node, message in unvouched(tree, context, modules):
            if getattr(node, "lineno", 1) not in lines:
                lines.add(getattr(node, "lineno", 1))
                scanner.found.append((node, "unvouched", message))
    for node, category, message in imports + scanner.found:
        line = getattr(node, "lineno", 1) + offset
        end = (getattr(node, "end_lineno", None) or line - offset) + offset
        if (line, category) not in seen:
            seen.add((line, category))
            findings.append(Finding(line, end, category, message))
    return sorted(findings, key=lambda f: (f.line, f.category))


def describe(findings: list[Finding]) -> str:
    """One sentence naming what was found, for a confirmation question."""
    kinds: list[str] = []
    for f in findings:
        if f.message not in kinds:
            kinds.append(f.message)
    shown = "; ".join(kinds[:4]) + ("; …" if len(kinds) > 4 else "")
    return shown
