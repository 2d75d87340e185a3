"""What model-written Python reaches that runfix cannot vouch for: the allow-list half of
the safety scan (`safety.scan`).

A scan that looks for what is dangerous misses what it was not told of (`f = os.system;
f(…)`, `vars(os)[…]`, `sys.modules['os']`, `operator.methodcaller`, …). This one turns it
around: model-written code runs unasked only when every module, builtin, attribute and
call it reaches is one runfix can name as harmless —

- modules on a short list of pure ones (math, json, re, collections, datetime, numpy,
  pandas, matplotlib, …, each without the parts that are not: `numpy.ctypeslib`,
  `pandas.read_pickle`), the folder's own modules, and its relative imports;
- builtins on a list (`print`, `len`, `sorted`, …: not `eval`, `vars`, `globals`,
  `__import__`, `get_ipython`), and the user's own names, except a module's name the
  kernel may hold (`os` imported in a cell above is still `os`);
- attributes by a literal name that is not a dunder escape hatch (`__class__`,
  `__globals__`, `__subclasses__`, `__dict__`, …) nor a verb on the system (`.system`,
  `.symlink_to`, `.chmod`, `.home()`, `.expanduser()`, `.run_cell_magic`, …);
- files read or written through a path inside the folder: a relative literal without
  `..`, or a name the code did not compute (the user's own value); a URL is the network.

Anything else asks. It reads the syntax tree only, and names the first thing it cannot
vouch for on each line.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Collection, Iterator, Mapping

PURE_MODULES = frozenset(
    {
        "math", "cmath", "statistics", "random", "decimal", "fractions", "numbers", "re",
        "string", "textwrap", "unicodedata", "difflib", "json", "csv", "collections",
        "itertools", "functools", "heapq", "bisect", "array", "copy", "pprint", "reprlib",
        "enum", "dataclasses", "typing", "typing_extensions", "abc", "datetime", "time",
        "calendar", "zoneinfo", "warnings", "uuid", "hashlib", "hmac", "struct", "contextlib",
        "pathlib", "numpy", "pandas", "matplotlib", "seaborn", "scipy", "polars", "tabulate",
        "operator",
    }
)  # fmt: skip
"""Modules whose functions compute, and do no more (their exceptions are below)."""
_DENIED_PARTS: Mapping[str, frozenset[str]] = {
    "numpy": frozenset({"ctypeslib", "f2py", "distutils", "testing", "DataSource"}),
    "pandas": frozenset({"read_pickle", "read_clipboard", "io"}),
    "matplotlib": frozenset({"use", "rcParams", "get_cachedir", "get_configdir"}),
    "scipy": frozenset({"weave", "LowLevelCallable", "datasets"}),
    "contextlib": frozenset({"chdir"}),
    "operator": frozenset({"methodcaller", "attrgetter", "call"}),  # a name in a string
    "time": frozenset({"tzset"}),
}
_PATHLIB = frozenset({"Path", "PurePath", "PurePosixPath", "PureWindowsPath"})
"""All of pathlib runfix vouches for: its classes (`Path.home()`, `Path.cwd()` are not)."""

_BUILTINS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
        "classmethod", "complex", "dict", "divmod", "enumerate", "filter", "float", "format",
        "frozenset", "getattr", "hasattr", "hash", "hex", "id", "int", "isinstance",
        "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct",
        "open", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set",
        "setattr", "slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type",
        "zip", "input", "aiter", "anext", "dir", "help", "memoryview", "NotImplemented",
        "Ellipsis", "True", "False", "None", "display", "__name__", "__file__", "__doc__",
    }
)  # fmt: skip
"""Builtins model-written code may use unasked (not eval, exec, compile, vars, globals,
locals, __import__, breakpoint, delattr)."""
_EXCEPTIONS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
"""The builtin exception and warning classes: raised, caught and named freely."""
_ALL_BUILTINS = frozenset(dir(builtins)) | {"get_ipython", "__builtins__", "__builtin__"}

_MODULE_NAMES = frozenset(
    {
        "os", "sys", "subprocess", "shutil", "socket", "importlib", "builtins", "ctypes",
        "pickle", "marshal", "shelve", "dill", "requests", "urllib", "urllib3", "http",
        "httpx", "aiohttp", "multiprocessing", "threading", "signal", "pty", "webbrowser",
        "runpy", "code", "codeop", "tempfile", "glob", "io", "platform", "resource", "asyncio",
        "concurrent", "ftplib", "smtplib", "telnetlib", "paramiko", "IPython", "operator",
        "inspect", "gc", "atexit", "site", "sysconfig", "zipimport", "pkgutil", "posix",
        "nt", "fcntl", "mmap", "select", "selectors", "ssl", "cffi", "gzip", "zipfile",
        "tarfile", "sqlite3", "dbm", "fileinput", "filecmp", "stat", "pwd", "grp", "getpass",
    }
)  # fmt: skip
"""Module names the user's kernel may hold (imported in a cell above, or by hand): used
without an import in the model's code, they are still those modules."""

_SAFE_DUNDERS = frozenset(
    {
        "__init__", "__name__", "__qualname__", "__doc__", "__module__", "__len__",
        "__iter__", "__next__", "__enter__", "__exit__", "__repr__", "__str__", "__eq__",
        "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__contains__",
        "__getitem__", "__setitem__", "__delitem__", "__call__", "__add__", "__sub__",
        "__mul__", "__truediv__", "__floordiv__", "__mod__", "__neg__", "__bool__",
        "__post_init__", "__version__",
    }
)  # fmt: skip
_SYSTEM_VERBS = frozenset(
    {
        "system", "popen", "spawn", "spawnl", "fork", "kill", "killpg", "execv", "execve",
        "run_cell_magic", "run_line_magic", "run_cell", "getoutput", "getstatusoutput",
        "symlink_to", "hardlink_to", "link_to", "chmod", "lchmod", "chown", "lchown",
        "expanduser", "home", "cwd", "rmtree", "unlink", "rmdir", "remove", "removedirs",
        "load_module", "exec_module", "to_pickle", "read_pickle", "urlopen", "urlretrieve",
        "connect", "sendall", "__import__", "setattr", "chdir", "startfile",
    }
)  # fmt: skip
"""Method names that act on the machine whatever object they are called on."""
_PATH_METHODS = frozenset(
    {
        "read_text", "read_bytes", "write_text", "write_bytes", "open", "exists", "is_file",
        "is_dir", "iterdir", "glob", "rglob", "stat", "mkdir", "with_suffix", "with_name",
        "with_stem", "joinpath", "relative_to", "is_relative_to", "resolve", "absolute",
        "as_posix", "as_uri", "match", "samefile", "is_absolute", "touch",
    }
)  # fmt: skip
"""What runfix vouches for on a `Path` (not `.rename`, `.replace`, `.symlink_to`, …)."""
_PATH_IO = frozenset({"read_text", "read_bytes", "write_text", "write_bytes", "open", "mkdir"})
_FILE_ARGS = ("file", "path", "fname", "filepath_or_buffer", "path_or_buf", "io", "buf")
"""Keyword names a file's path is given by (pandas, numpy, matplotlib, open)."""


_IO = frozenset(
    {
        "read_csv", "read_table", "read_excel", "read_json", "read_parquet", "read_feather",
        "read_fwf", "read_html", "read_xml", "read_hdf", "read_orc", "read_sas", "read_spss",
        "read_stata", "read_sql", "read_sql_query", "read_sql_table", "loadtxt", "genfromtxt",
        "fromfile", "load", "imread", "to_csv", "to_excel", "to_json", "to_parquet",
        "to_feather", "to_hdf", "to_html", "to_latex", "to_markdown", "to_stata", "to_orc",
        "to_xml", "to_sql", "savefig", "save", "savez", "savez_compressed", "savetxt",
        "tofile", "imsave", "makedirs", "mkdir", "listdir", "scandir",
    }
)  # fmt: skip
"""Functions and methods that take a file's path (or a URL) first: pandas' readers and
writers, numpy's loads and saves, savefig, making a folder."""
_PARTLY: Mapping[str, frozenset[str]] = {
    "os": frozenset(
        {
            "path.join",
            "path.exists",
            "path.isfile",
            "path.isdir",
            "path.basename",
            "path.dirname",
            "path.splitext",
            "path.split",
            "path.getsize",
            "path.relpath",
            "path.normpath",
            "path.sep",
            "sep",
            "linesep",
            "getcwd",
            "listdir",
            "makedirs",
            "mkdir",
            "scandir",
        }
    ),
    "sys": frozenset(
        {
            "version",
            "version_info",
            "platform",
            "maxsize",
            "float_info",
            "stdout.write",
            "stdout.flush",
            "stderr.write",
            "stderr.flush",
            "getrecursionlimit",
        }
    ),
}
"""Modules runfix vouches for in part: these of their names (and what leads to them)."""


def dotted_parts(node: ast.expr) -> list[str] | None:
    """`a.b.c` as [a, b, c]; None for anything but a dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _bound_names(tree: ast.AST) -> set[str]:
    """The names the code binds itself (assigned, defined, imported, arguments, loop and
    `with`/`except` targets)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
    return bound


Names = tuple[dict[str, str], frozenset[str]]
"""What a document binds: by import (name → what it is), and otherwise (the user's values)."""


def document_names(text: str) -> Names:
    """What a document's code binds (`Names`), read from its syntax: cell by cell where
    the whole does not parse (a cell being fixed may not)."""
    try:
        trees = [ast.parse(text)]
    except (SyntaxError, ValueError):
        trees = []
        for cell in re.split(r"(?m)^# %%.*$", text):
            try:
                trees.append(ast.parse(cell))
            except (SyntaxError, ValueError):
                continue
    aliases: dict[str, str] = {}
    bound: set[str] = set()
    for tree in trees:
        aliases.update(imports_of(tree))
        bound.update(_bound_names(tree))
    return aliases, frozenset(bound - aliases.keys())


def imports_of(tree: ast.AST) -> dict[str, str]:
    """What each name an import binds is (`pd` → `pandas`, `mean` → `statistics.mean`)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            for a in node.names:
                aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    return aliases


class _Vouch:
    def __init__(self, tree: ast.AST, context: Names | None, modules: Collection[str]):
        self.modules = modules
        self.own = _bound_names(tree)
        outside, users = context if context is not None else ({}, frozenset())
        self.users = users
        """What the document binds otherwise: the user's own values."""
        self.aliases = {
            **{k: v for k, v in outside.items() if k not in self.own},
            **imports_of(tree),
        }
        self.rooted = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        }
        """The names that lead an attribute (`os` of `os.path.join`): checked there."""
        self.literals: dict[str, str] = {}
        """Names the code assigns a string literal to, and that literal."""
        self.computed: set[str] = set()
        """Names the code assigns anything else to."""
        self.paths: set[str] = set()
        """Names the code assigns a `Path(…)` to."""
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and node.value is not None:
                        if isinstance(node.value, ast.Constant) and isinstance(
                            node.value.value, str
                        ):
                            self.literals[target.id] = node.value.value
                        else:
                            self.computed.add(target.id)
                        if self._is_path(node.value):
                            self.paths.add(target.id)

    # -- what a name or a dotted name is ---------------------------------------------------

    def module_of(self, parts: list[str]) -> list[str] | None:
        """`parts` as a module's dotted name, where its first part is a module (imported
        here or in the document, or a module's name the user's kernel may hold)."""
        head = parts[0]
        if head in self.aliases:
            return self.aliases[head].split(".") + parts[1:]
        if head not in self.own and head not in self.users and head in _MODULE_NAMES:
            return parts
        return None

    def module_ok(self, dotted: list[str], importing: bool = False) -> bool:
        top = dotted[0]
        if top == "" or top in self.modules:  # a relative import, or the folder's own module
            return True
        if top in _PARTLY:
            rest = ".".join(dotted[1:])
            if importing and rest in ("", "path"):
                return True  # what it uses of it is checked where it is used
            return bool(rest) and any(
                name == rest or name.startswith(rest + ".") for name in _PARTLY[top]
            )
        if top not in PURE_MODULES:
            return False
        if top == "pathlib":
            return len(dotted) == 1 or (dotted[1] in _PATHLIB and len(dotted) == 2)
        denied = _DENIED_PARTS.get(top, frozenset())
        return not any(part in denied or part in _SYSTEM_VERBS for part in dotted[1:])

    def _is_path(self, node: ast.expr | None) -> bool:
        if isinstance(node, ast.Call):
            parts = dotted_parts(node.func)
            dotted = self.module_of(parts) if parts else None
            return dotted is not None and dotted[-1] in _PATHLIB
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self._is_path(node.left)
        return isinstance(node, ast.Name) and node.id in self.paths

    # -- paths -----------------------------------------------------------------------------

    def path_said(self, node: ast.expr | None) -> str | None:
        """Why a file's path is not one runfix vouches for (None: it is)."""
        if node is None:
            return None
        if isinstance(node, ast.Name):
            if node.id in self.literals:
                return _literal_said(self.literals[node.id])
            if node.id in self.computed:
                return f"reads or writes a file whose path it computes ({node.id})"
            return None  # the user's own value (or the code's loop variable)
        if isinstance(node, ast.Constant):
            return _literal_said(node.value) if isinstance(node.value, str) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and self._is_path(node):
            return self.path_said(node.left) or self.path_said(node.right)
        if isinstance(node, ast.Call) and self._is_path(node):
            return self.path_said(node.args[0]) if node.args else None
        return "reads or writes a file whose path it computes"

    # -- the walk --------------------------------------------------------------------------

    def findings(self, tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield from self._import(node)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                yield from self._name(node)
            elif isinstance(node, ast.Attribute):
                yield from self._attribute(node)
            elif isinstance(node, ast.Call):
                yield from self._call(node)

    def _import(self, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[ast.AST, str]]:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                return  # the folder's own package
            base = (node.module or "").split(".")
            for a in node.names:
                dotted = base + ([] if a.name == "*" else [a.name])
                if not self.module_ok(dotted, importing=a.name != "*"):
                    yield node, f"imports {'.'.join(dotted)}, which runfix does not run unasked"
            return
        for a in node.names:
            if not self.module_ok(a.name.split("."), importing=True):
                yield node, f"imports {a.name}, which runfix does not run unasked"

    def _name(self, node: ast.Name) -> Iterator[tuple[ast.AST, str]]:
        name = node.id
        if name in self.own and name not in self.aliases:
            return
        if name in self.aliases:
            dotted = self.aliases[name].split(".")
            if id(node) not in self.rooted and not self.module_ok(dotted):
                yield node, f"uses {'.'.join(dotted)}, which runfix does not run unasked"
        elif name in self.users:
            return
        elif name in _MODULE_NAMES:
            yield (
                node,
                f"uses {name} (a module the kernel may hold), which runfix does not run unasked",
            )
        elif name in _ALL_BUILTINS and name not in _BUILTINS and name not in _EXCEPTIONS:
            yield node, f"uses {name}(), which runfix does not run unasked"

    def _attribute(self, node: ast.Attribute) -> Iterator[tuple[ast.AST, str]]:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in _SAFE_DUNDERS:
            yield node, f"reaches into {attr}"
            return
        parts = dotted_parts(node)
        dotted = self.module_of(parts) if parts else None
        if dotted is not None:
            if not self.module_ok(dotted):
                yield node, f"uses {'.'.join(dotted)}, which runfix does not run unasked"
            return
        if attr in _SYSTEM_VERBS:
            yield node, f"calls .{attr}(), which acts on the machine"
        elif (
            self._is_path(node.value)
            and attr not in _PATH_METHODS
            and not attr.startswith(("name", "stem", "suffix", "parent", "parts", "anchor"))
        ):
            yield node, f"calls .{attr}() on a path, which runfix does not run unasked"

    def _call(self, node: ast.Call) -> Iterator[tuple[ast.AST, str]]:
        func = node.func
        parts = dotted_parts(func)
        name = parts[-1] if parts else None
        if isinstance(func, ast.Name) and func.id not in self.own:
            if func.id in ("getattr", "setattr", "hasattr") and len(node.args) >= 2:
                attr = node.args[1]
                named = attr.value if isinstance(attr, ast.Constant) else None
                if not isinstance(named, str):
                    yield node, f"looks up an attribute by a computed name ({func.id})"
                elif named in _SYSTEM_VERBS or (
                    named.startswith("__") and named not in _SAFE_DUNDERS
                ):
                    yield node, f"looks up {named!r} ({func.id})"
                return
            if func.id == "open":
                yield from self._file(node, node.args[0] if node.args else None)
                return
        if name is None:
            return
        if isinstance(func, ast.Attribute) and self._is_path(func.value) and name in _PATH_IO:
            yield from self._file(node, func.value)
        elif name in _IO:
            given = node.args[0] if node.args else None
            keyword = next((k.value for k in node.keywords if k.arg in _FILE_ARGS), None)
            yield from self._file(node, given if given is not None else keyword)
            if name == "load" and any(
                k.arg == "allow_pickle"
                and not (isinstance(k.value, ast.Constant) and not k.value.value)
                for k in node.keywords
            ):
                yield node, "loads pickled objects (allow_pickle), which can run code"

    def _file(self, node: ast.AST, path: ast.expr | None) -> Iterator[tuple[ast.AST, str]]:
        said = self.path_said(path)
        if said is not None:
            yield node, said


def _literal_said(path: str) -> str | None:
    """Why a path literal is not inside the folder (None: it is)."""
    if "://" in path:
        return f"uses the network ({path[:60]})"
    if (
        path.startswith(("/", "~", "\\"))
        or ".." in path.replace("\\", "/").split("/")
        or (len(path) > 1 and path[1] == ":")
    ):
        return f"reads or writes outside the folder ({path[:60]})"
    return None


def unvouched(
    tree: ast.AST, context: Names | None = None, modules: Collection[str] = ()
) -> list[tuple[ast.AST, str]]:
    """What the code reaches that runfix cannot vouch for, each with why. `context`: what
    the document binds (`document_names`), as the kernel will have it; `modules`: the
    folder's own modules."""
    return list(_Vouch(tree, context, modules).findings(tree))
