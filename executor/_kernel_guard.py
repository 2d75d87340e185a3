"""The runtime guard for model-written code: Python's audit hooks (PEP 578), in the process
the code runs in — the kernel (as the module `_runfix_guard`) and a fix's test run.

While code the model wrote runs, the hook stops what the policy does not allow:

- a write outside the folder (the temporary folder and the user's cache folder aside), or
  to what the folder keeps its history, tests, environment and configuration in: `.git/`,
  `.runfix/`, a virtual environment, a test file, `conftest.py`, `pyproject.toml`, a
  `.pth`, …;
- starting a process (or signalling one), a network connection or a name lookup;
- loading native code (`ctypes`), unpickling anything but plain data;
- taking the guard apart from Python: a trace or profile function, the garbage collector's
  lists of objects, a function's code swapped, runfix's own functions replaced (put back
  when the run ends).

"While code the model wrote runs": from the start to the end of its run, in every thread
of the process (`arm`, `disarm`); afterwards, wherever a function it defined runs (its code
objects are known: `adopt`), and in every thread its run left running. A refusal raises
`GuardStop` — not an `Exception`, so `except Exception` in library code does not swallow
it — and is recorded here whatever happens to the exception, so the run ends with it.

What it cannot stop: code that disables it from C (a C extension it can import, as the
folder's own); work handed, during the run, to something that calls a builtin later
outside it (an `atexit` handler, a timer on the event loop that calls `os.system`). The
sandbox (`executor: docker`) is what isolates. This file is sent to the kernel as it is:
the standard library only, Python 3.8.
"""

from __future__ import annotations

import operator
import os
import sys
import tempfile
import threading
import types
import weakref
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any


class GuardStop(BaseException):
    """What the guard raises: not an `Exception` (library code that catches those, as
    `uuid` does an `OSError`, would hide it); the run ends with it all the same."""


_WRITE_MODES = set("wax+")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATHS_WRITTEN: dict[str, tuple[int, ...]] = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (1,),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.chflags": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.rmtree": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.chown": (0,),
}
"""Events that change a file, and which of their arguments name it (`os.replace` raises
`os.rename`)."""
_PROCESS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.startfile",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
}
_CONNECTS = {
    "http.client.connect",
    "ftplib.connect",
    "smtplib.connect",
    "poplib.connect",
    "imaplib.open",
    "nntplib.connect",
    "telnetlib.Telnet.open",
}
"""Network events whose arguments are (the client, host, port)."""
_NETWORK = {
    "socket.connect",
    "socket.sendto",
    "socket.sendmsg",
    "socket.bind",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
    "urllib.Request",
    "webbrowser.open",
    *_CONNECTS,
}
_NATIVE = {
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.dlsym/handle",
    "ctypes.call_function",
    "ctypes.cdata",
    "ctypes.addressof",
    "ctypes.string_at",
    "ctypes.wstring_at",
    "ctypes.PyObj_FromPtr",
}
_TAMPER = {
    "sys.settrace",
    "sys.setprofile",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys._current_frames",
}
_ENVIRONMENT = {"os.putenv", "os.unsetenv"}
WATCHED = (
    {"open", "pickle.find_class", "object.__setattr__"}
    | set(_PATHS_WRITTEN)
    | _PROCESS
    | _NETWORK
    | _NATIVE
    | _TAMPER
    | _ENVIRONMENT
)
PLAIN_DATA = {
    "builtins": {
        "list", "dict", "set", "frozenset", "tuple", "str", "bytes", "bytearray", "int",
        "float", "complex", "bool", "slice", "range", "object", "NoneType",
    },
    "collections": {"OrderedDict", "defaultdict", "deque", "Counter"},
    "datetime": {"date", "datetime", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "copyreg": {"_reconstructor"},
}  # fmt: skip
"""What may be unpickled while model code runs: plain data, nothing that calls anything."""
PROTECTED_PARTS = {
    ".git", ".hg", ".svn", ".runfix", ".venv", "venv", ".tox", ".nox", "__pypackages__",
    "site-packages", "dist-packages", ".github", ".gitlab", ".vscode", ".idea", "tests",
    "test", "testing",
}  # fmt: skip
"""A path through one of these (as a folder) is the folder's history, environment, CI,
editor settings or tests: never written by model code."""
PROTECTED_NAMES = (
    "test_*.py", "test_*.pyc", "*_test.py", "*_test.*.pyc", "conftest.py", "conftest.*.pyc",
    "pyproject.toml", "setup.cfg", "setup.py", "tox.ini", "pytest.ini", "noxfile.py",
    ".pre-commit-config.yaml", ".env", ".envrc", ".git*", "Makefile", "requirements*.txt",
    "sitecustomize.py", "usercustomize.py", "*.pth", "runfix.toml",
)  # fmt: skip
"""A file named so is a test, the folder's configuration, or code Python runs at start."""
ALWAYS_ALLOWED = ("process:fc-list", "process:fc-match", "process:ldconfig", "process:uname")
"""What libraries run on import, harmless whoever asks: matplotlib builds its font cache with
`fc-list`, `ctypes.util.find_library` asks `ldconfig -p`, `platform` asks `uname -p`."""
_LOADER_VARIABLES = ("LD_", "DYLD_", "PYTHON")
_RUN_VARIABLES = {"PATH", "BASH_ENV", "ENV", "PERL5OPT", "NODE_OPTIONS", "GIT_SSH_COMMAND"}

_KINDS = {
    "write": "a write",
    "process": "starting a process",
    "network": "a network connection",
    "native": "loading native code",
    "unpickle": "unpickling",
    "tamper": "taking the guard apart",
    "environment": "changing how programs start",
}


def literal(what: str) -> str:
    """`what` as a pattern that matches only itself: a path holding `*` allowed always is
    that path, never a wildcard."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in what)


class Refusal:
    """One thing the guard stopped: its kind, what it was (a path, a command, an address),
    why, and the pattern a user's "allow always" would keep."""

    __slots__ = ("kind", "pattern", "what", "why")

    def __init__(self, kind: str, what: str, why: str) -> None:
        self.kind, self.what, self.why = kind, what, why
        self.pattern = f"{kind}:{literal(what)}"

    def said(self) -> dict[str, str]:
        said = {"kind": self.kind, "what": self.what, "why": self.why, "pattern": self.pattern}
        return {**said, "sentence": self.sentence()}

    def sentence(self) -> str:
        return f"{_KINDS.get(self.kind, self.kind)} ({self.what}): {self.why}"


class _Guard:
    """The hook's state. It is reachable from Python (runfix's helper calls it), so what it
    decides is kept where calling it cannot loosen it: a run armed by one caller is disarmed
    only by that caller (`disarm` checks the token), and allowances never widen an arm under
    way."""

    def __init__(self) -> None:
        self.root = os.path.realpath(os.getcwd())
        self.writable: list[str] = [os.path.realpath(tempfile.gettempdir())]
        home = os.path.expanduser("~")
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
        matplotlib = os.environ.get("MPLCONFIGDIR") or os.path.join(home, ".config", "matplotlib")
        for place in (cache, matplotlib):  # (not ~/.ipython: its startup files run later)
            self.writable.append(os.path.realpath(place))
        self.armed: object | None = None
        """The token of the arm under way (None: not armed)."""
        self.allowed: tuple[str, ...] = ()
        """The patterns allowed while armed (the user's "allow once" and "always")."""
        self.kept: tuple[str, ...] = ALWAYS_ALLOWED
        """The patterns allowed for good (what holds where a model function runs later)."""
        self.threads_before: set[int] = set()
        self.threads: set[int] = set()
        """Threads a model run left running: guarded for their lives."""
        self.codes: dict[int, Any] = {}
        """id → weak reference of each code object model code was compiled to."""
        self.refusals: list[Refusal] = []
        self.busy = threading.local()
        self.originals: dict[str, tuple[dict[str, Any], list[str], Any, Any]] = {}

    # -- when code is the model's --------------------------------------------------------

    def adopt(self, code: Any) -> None:
        """`code` (and every code object in it) is the model's, wherever it runs later."""
        stack = [code]
        while stack:
            one = stack.pop()
            key = id(one)
            if key not in self.codes:
                self.codes[key] = weakref.ref(one, self._forget(key))
            stack.extend(c for c in one.co_consts if type(c) is types.CodeType)

    def _forget(self, key: int) -> Callable[[Any], None]:
        """What drops a code object's entry once it is gone (its id may be reused)."""
        return lambda _: self.codes.pop(key, None)

    def _model_frame(self) -> bool:
        codes = self.codes
        if not codes:
            return False
        frame: Any = sys._getframe(3)  # (past this, `guarding` and the hook)
        while frame is not None:
            ref = codes.get(id(frame.f_code))
            if ref is not None and ref() is frame.f_code:
                return True
            frame = frame.f_back
        return False

    def guarding(self) -> tuple[str, ...] | None:
        """The patterns allowed now, if the code running now is the model's; else None."""
        if self.armed is not None:
            return self.allowed
        if self.threads and threading.get_ident() in self.threads:
            return self.kept
        if self._model_frame():
            return self.kept
        return None

    # -- arming --------------------------------------------------------------------------

    def arm(self, allowed: Iterable[str] = (), kept: Iterable[str] = ()) -> object | None:
        """Guard everything from now until `disarm(token)`; the token (None: already armed,
        by another caller whose arm holds)."""
        if self.armed is not None:
            return None
        token = object()
        self.kept = tuple(kept) + ALWAYS_ALLOWED
        self.allowed = tuple(allowed) + self.kept
        self.threads_before = set(self._live_threads())
        self.refusals = []
        self.armed = token
        return token

    def disarm(self, token: object | None) -> list[Refusal]:
        """End the arm `token` made (another token, or None, changes nothing); what was
        refused since it began, and what of runfix's own was replaced, put back."""
        if token is None or token is not self.armed:
            return []
        self.armed = None
        self.allowed = ()
        alive = set(self._live_threads())
        self.threads = (self.threads & alive) | (alive - self.threads_before)
        self._restore()
        refused, self.refusals = self.refusals, []
        return refused

    def taken(self) -> list[Refusal]:
        """What was refused outside an arm (a model function a user's run called), taken."""
        if self.armed is not None:
            return []
        refused, self.refusals = self.refusals, []
        return refused

    def _live_threads(self) -> Iterable[int]:
        self.busy.inside = True
        try:
            return list(sys._current_frames())
        finally:
            self.busy.inside = False

    def keep_originals(self, modules: Iterable[str]) -> None:
        """What runfix's own modules hold now (and the builtins it calls, the first time) is
        put back after every arm (a model's code that replaced one of them would have
        switched the guard off for the next run)."""
        import builtins

        names = list(modules)
        if not self.originals:
            calls = ["__import__", "exec", "eval", "compile", "open"]
            self._keep("builtins", builtins.__dict__, calls)
        for name in names:
            module = sys.modules.get(name)
            if module is not None:
                space = vars(module)
                kept = [k for k, v in space.items() if isinstance(v, (types.FunctionType, type))]
                self._keep(name, space, kept)
        if names:
            self._keep("sys.modules", sys.modules, names)

    def _keep(self, name: str, space: dict[str, Any], keys: list[str]) -> None:
        """`space`'s `keys` as they are now: looked at as one tuple (`itemgetter`, compared
        in C: a few microseconds a run for some 250 functions)."""
        if keys:
            get = operator.itemgetter(*keys)
            self.originals[name] = (space, keys, get, get(space))

    def _restore(self) -> None:
        """runfix's own functions and modules as `keep_originals` found them (at the end of
        every arm: what a model function called later replaced too); each one that was
        replaced is said as a refusal that stopped nothing."""
        replaced = []
        for name, (space, keys, get, values) in self.originals.items():
            try:
                if get(space) == values:  # (functions and modules compare by identity)
                    continue
            except KeyError:
                pass
            for key, value in zip(keys, values if len(keys) > 1 else (values,)):  # noqa: B905
                if space.get(key) is not value:
                    space[key] = value
                    said = f"{name}[{key!r}]" if name == "sys.modules" else f"{name}.{key}"
                    replaced.append(said)
        for what in replaced:
            self._refused("tamper", what, "runfix's own code was replaced; put back", stop=False)

    # -- the hook ------------------------------------------------------------------------

    def _refused(self, kind: str, what: str, why: str, stop: bool = True) -> None:
        refusal = Refusal(kind, what, why)
        self.refusals.append(refusal)
        if stop:
            raise GuardStop(f"runfix's guard stopped the model's code: {refusal.sentence()}")

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in WATCHED or getattr(self.busy, "inside", False):
            return
        if self.armed is None and not self.codes and not self.threads:
            return
        self.busy.inside = True
        try:  # what the event is first (cheap), whose code asks it only then (a stack walk)
            found = self._judge(event, args)
            allowed = self.guarding() if found is not None else None
        finally:
            self.busy.inside = False
        if found is None or allowed is None:
            return
        if any(fnmatchcase(found[0] + ":" + found[1], p) for p in allowed):
            return
        if found[0] == "write" and found[1].endswith(".pyc") and "__pycache__" in found[1]:
            # The interpreter caching an import: it goes on without (it catches an OSError)
            # and nothing was lost; a .pyc planted where Python loads it would be code.
            raise PermissionError(f"runfix's guard: no bytecode cache at {found[1]}")
        self._refused(*found)

    def _judge(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
        """(kind, what, why) where the event is one the policy does not allow, else None."""
        if event == "open":
            path, mode, flags = (*tuple(args), None, None, 0)[:3]
            writing = (isinstance(mode, str) and bool(_WRITE_MODES & set(mode))) or (
                mode is None and isinstance(flags, int) and bool(flags & _WRITE_FLAGS)
            )
            if writing:
                return self._write(path)
            return self._folder_descriptor(path) if mode is None else None
        if event in _PATHS_WRITTEN:
            written = (self._write(args[i]) for i in _PATHS_WRITTEN[event] if i < len(args))
            return next((found for found in written if found is not None), None)
        if event in _PROCESS:
            why = "model code may not start or signal a process"
            return ("process", _command(event, args), why)
        if event in _NETWORK:
            return ("network", _address(event, args), "model code may not reach the network")
        if event in _NATIVE:
            return ("native", _first(args), "model code may not load or call native code")
        return _other(event, args)

    def _folder_descriptor(self, path: Any) -> tuple[str, str, str] | None:
        """A folder opened as a descriptor (`os.open(folder)`), through which a relative
        write (`dir_fd=`) names no path the guard sees: only one model code may write in."""
        if isinstance(path, int) or path is None:
            return None
        try:
            real = os.path.realpath(os.fsdecode(path))
        except TypeError:
            return None
        if not os.path.isdir(real):
            return None
        found = self._write(os.path.join(real, "_"))
        if found is None:
            return None
        return ("write", real, f"a folder opened for writes relative to it, {found[2]}")

    def _write(self, path: Any) -> tuple[str, str, str] | None:
        if isinstance(path, int) or path is None:
            return None  # an open descriptor: its file was checked when it was opened
        try:
            text = os.fsdecode(path)
        except TypeError:
            return None
        if text in ("/dev/null", "/dev/stdout", "/dev/stderr", "nul"):
            return None
        real = os.path.realpath(text)
        inside = _within(real, self.root)
        if not inside:
            if any(_within(real, place) for place in self.writable):
                return None
            return ("write", real, "outside the folder")
        relative = os.path.relpath(real, self.root)
        parts = relative.split(os.sep)
        protected = next((p for p in parts[:-1] if p in PROTECTED_PARTS), None)
        if protected is not None:
            return ("write", real, f"inside {protected}/, which model code never writes")
        name = parts[-1]
        if name in PROTECTED_PARTS:
            return ("write", real, f"it is the folder's {name}")
        pattern = next((p for p in PROTECTED_NAMES if fnmatchcase(name, p)), None)
        if pattern is not None:
            return ("write", real, "a test, the folder's configuration or start-up code")
        return None


def _other(event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
    """`_Guard._judge` of the events that need no paths: unpickling, tampering, the
    environment later programs start with."""
    if event == "pickle.find_class":
        module, name = str(args[0]), str(args[1])
        if name in PLAIN_DATA.get(module, ()):
            return None
        return ("unpickle", f"{module}.{name}", "unpickling can run any code")
    if event == "object.__setattr__":
        if len(args) > 1 and args[1] == "__code__":
            return ("tamper", f"{_name(args[0])}.__code__", "a function's code swapped")
        return None
    if event in _ENVIRONMENT:
        name = str(args[0]) if args else ""
        if name.startswith(_LOADER_VARIABLES) or name in _RUN_VARIABLES:
            return ("environment", name, "it changes what later programs load")
        return None
    if event in _TAMPER:
        return ("tamper", event, "it reaches past the guard")
    return None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _first(args: tuple[Any, ...]) -> str:
    return str(args[0])[:200] if args else "?"


def _name(value: Any) -> str:
    return str(getattr(value, "__qualname__", None) or type(value).__name__)


def _command(event: str, args: tuple[Any, ...]) -> str:
    """The program a process event starts (its name, not its arguments)."""
    if event in ("os.fork", "os.forkpty"):
        return "fork"
    if event in ("os.kill", "os.killpg", "signal.pthread_kill"):
        return f"signal {args[0] if args else '?'}"
    if not args:
        return event
    program = args[0] if event != "subprocess.Popen" else args[1]
    if isinstance(program, (list, tuple)):
        program = program[0] if program else "?"
    if event == "os.system" and isinstance(program, (str, bytes)):
        program = os.fsdecode(program).split()[0] if os.fsdecode(program).split() else "?"
    if isinstance(program, (str, bytes, os.PathLike)):
        return os.path.basename(os.fsdecode(program))
    return str(program)[:100]


def _address(event: str, args: tuple[Any, ...]) -> str:
    """The host (and port) a network event reaches."""
    given = [*args, None, None, None]
    if event.startswith("socket.") and event != "socket.getaddrinfo" and len(args) > 1:
        address: Any = given[1]
        if isinstance(address, tuple) and len(address) >= 2:
            return f"{address[0]}:{address[1]}"
        return str(address)[:200]
    if event == "socket.getaddrinfo" or event in _CONNECTS:
        host, port = given[0:2] if event == "socket.getaddrinfo" else given[1:3]
        host = host.decode() if isinstance(host, bytes) else host
        return f"{host}:{port}" if port not in ("", None) else str(host)
    if event == "urllib.Request":
        return str(given[0])[:200]
    return _first(args)


_GUARD: list[_Guard] = []


def install(modules: Iterable[str] = ()) -> _Guard:
    """The guard of this process (its hook added once: a hook cannot be removed); runfix's
    `modules` kept as they are now (`keep_originals`)."""
    if not _GUARD:
        guard = _Guard()
        sys.addaudithook(guard.hook)
        _GUARD.append(guard)
    _GUARD[0].keep_originals(modules)
    return _GUARD[0]
