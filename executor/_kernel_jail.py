"""The jail for model-written code: runs inside the kernel as the module `_runfix_jail`.

`run` forks the kernel. The child has the kernel's state as it is (copy-on-write: the
variables, the imported modules, no replay), and before the model's code runs, the
operating system confines it — Landlock: writes only under a private scratch folder made
for this run, reads only where code needs them (the folder, the interpreter and its
libraries, the system's), no program started from a file, no TCP connect or bind,
signals and abstract sockets scoped to the jail; seccomp: starting a process, opening a
network socket, tracing another process and a few calls that reach past Landlock end the
child at once (SIGSYS), so what the code tried shows even if it hid every error. The
child never touches the kernel's ZeroMQ sockets or threads: the kernel's open files are
swapped for /dev/null, shared memory is made read-only, and what the code printed,
displayed, returned or raised comes back over a pipe; the kernel then shows it as its own
run's output. A child still running after its budget is killed.

What the code tried and was refused is told by an audit hook inside the child. It only
reports: the refusal is the kernel's. A hook shares memory with the code it watches
(PEP 578), so model code can silence it; what that code then tries is refused all the
same, and what ends the child (a process, a socket) is seen from here whatever it did.

Stdlib only, Python 3.8; Linux with Landlock (ABI >= 1), else `run` says the jail is
unavailable and runs nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import shutil
import signal
import stat
import struct
import sys
import tempfile
import threading
import time
from typing import Any, NamedTuple

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
"""Landlock's system calls (the same number on every architecture)."""
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE
_READ = _READ_FILE | _READ_DIR
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP = 1, 38, 22
_KILL, _ALLOW = 0x80000000, 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_THREAD = 0x00010000

_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


class _Calls(NamedTuple):
    """One machine's system call numbers the filter names."""

    ends: tuple[int, ...]
    """What ends the child: a process started (fork, exec), tracing or writing another
    process, mounts and namespaces, kernel keys and modules, io_uring (its operations pass
    seccomp by), BPF, handles that open a file past its path, another's descriptors."""
    clone: int
    clone3: int
    socket: int
    signals: tuple[int, ...]
    """kill and tgkill: allowed to this process only."""
    tkill: int


_CALLS = {
    "x86_64": _Calls(
        (57, 58, 59, 322, 101, 310, 311, 312, 425, 426, 427, 321, 165, 166, 155, 161, 272,
         308, 250, 248, 249, 298, 323, 246, 175, 313, 176, 303, 304, 442, 428, 429, 430, 431,
         432, 433, 438, 172, 173, 167, 168, 169),
        clone=56, clone3=435, socket=41, signals=(62, 234), tkill=200,
    ),
    "aarch64": _Calls(
        (221, 281, 117, 270, 271, 272, 425, 426, 427, 280, 40, 39, 41, 51, 97, 268, 219, 217,
         218, 241, 282, 104, 105, 273, 106, 264, 265, 442, 428, 429, 430, 431, 432, 433, 438,
         142, 224, 225),
        clone=220, clone3=435, socket=198, signals=(129, 131), tkill=130,
    ),
}  # fmt: skip
"""System call numbers by machine (`os.uname().machine`)."""

_ETC = (
    "passwd", "group", "nsswitch.conf", "hosts", "host.conf", "resolv.conf", "gai.conf",
    "localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs",
    "ssl/openssl.cnf", "ca-certificates", "pki/tls/certs", "fonts", "mime.types",
    "os-release", "debian_version", "locale.alias", "locale.conf", "matplotlibrc",
    "protocols", "services", "alternatives", "magic", "xdg", "inputrc", "mailcap",
)  # fmt: skip
"""What of /etc code reads (the loader's cache, names, time, certificates, fonts); not the
rest (`shadow`, `ssh/`, `sudoers`…)."""
_SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/proc", "/sys",
           "/dev", "/var/cache/fontconfig", "/nix/store")  # fmt: skip
GRACE = 0.5
"""Seconds the jail's report may take once the code's budget is over."""


_ABI: list[int] = []


def landlock_abi() -> int:
    """Landlock's ABI version here; 0 where there is none (an older kernel, not Linux).
    Asked once a process."""
    if not _ABI:
        _ABI.append(_ask_abi())
    return _ABI[0]


def _ask_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        version = int(libc.syscall(_CREATE_RULESET, None, 0, 1))
    except (OSError, AttributeError):
        return 0
    return max(version, 0)


def unavailable() -> str | None:
    """Why there is no jail here, or None."""
    if not hasattr(os, "fork"):
        return "this system cannot fork a process"
    abi = landlock_abi()
    if abi < 1:
        return "this system has no Landlock (Linux 5.13 or newer, enabled)"
    return None


# -- the kernel's side ---------------------------------------------------------------------


EVIDENCE: dict[str, str] = {}
"""What the frames of the last error a jailed run raised held (`_kernel_live.evidence`'s
answer, by the error's name): the kernel's own last error is not that one. Taken once;
a run in the kernel that fails clears it (`_kernel_side._report`)."""


def evidence(ename: str) -> str | None:
    """The last jailed run's evidence of `ename`, once; None: there is none."""
    found = EVIDENCE.pop(ename, None)
    EVIDENCE.clear()
    return found


def run(
    pieces: str, limit: int = 100000, budget: float = 60.0, secrets: Any = (), through: bool = False
) -> None:
    """Run `pieces` (JSON: [[code, filename, first_line], …], in order, stopping at the first
    that fails) in a confined fork of this kernel, within `budget` seconds; show what the
    last piece that ran printed, displayed, returned or raised as this run's output, and
    say what the code tried (a `jail` payload). `secrets`: the names the evidence of its
    error hides besides the usual ones; `through`: the pieces before the last run on past
    their errors, as cells run one after another (the last one's outcome is the run's)."""
    kernel = sys.modules["_runfix_kernel"]
    began = time.perf_counter()
    why = unavailable()
    if why is not None:
        kernel._publish({"jail": {"how": "unavailable", "why": why, "tried": []}})
        return
    asked = [(str(c), str(f), int(n)) for c, f, n in json.loads(pieces)]
    scratch = tempfile.mkdtemp(prefix="runfix-jail-")
    _reap_exited()
    read, write = os.pipe()
    folder = os.getcwd()
    readable = [*_readable(folder), os.path.realpath(scratch)]
    state = _State(folder, asked)  # (read here: read in the child, each page read is copied)
    shared = _shared_memory()
    writers = _history_writers()
    try:
        pid = os.fork()
    except OSError as exc:
        _history_writers(put_back=writers)
        os.close(read)
        os.close(write)
        shutil.rmtree(scratch, ignore_errors=True)
        kernel._publish({"jail": {"how": "unavailable", "why": f"fork: {exc}", "tried": []}})
        return
    if pid != 0:
        _history_writers(put_back=writers)
    if pid == 0:  # the child: never returns
        _child(
            read, write, scratch, asked, limit, budget, list(secrets), readable, state, through,
            shared,
        )  # fmt: skip
    os.close(write)
    lines, how = _collect(read, pid, budget)
    if how == "done":  # it is exiting (killed all the same: a last line can be forged)
        how, status = "ran", 0
        _kill(pid)
        _EXITING.append(pid)
        _reap_exited()
    else:
        status = _reap(pid)
    shutil.rmtree(scratch, ignore_errors=True)
    _tell(kernel, lines, how, status, budget, time.perf_counter() - began)


def _history_writers(put_back: list[Any] | None = None) -> list[Any]:
    """IPython stops its history writer before every fork (joining its thread: ~3 ms of the
    kernel's) and starts it again at the next cell. The child never writes history (its
    writer stays stopped, with locks of its own), so the managers are taken out of IPython's
    list for the fork (what they were), and `put_back` after it."""
    history = sys.modules.get("IPython.core.history")
    managers = getattr(getattr(history, "HistoryManager", None), "_instances", None)
    if managers is None:
        return []
    if put_back is not None:
        for manager in put_back:
            managers.add(manager)
        return put_back
    taken = list(managers)
    managers.clear()
    return taken


def _collect(read: int, pid: int, budget: float) -> tuple[list[bytes], str]:
    """The child's report, line by line, until it ends, its budget runs out (it is killed)
    or the kernel is interrupted (it is killed)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + budget + GRACE
    how = "ran"
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                how = "timeout"
                break
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                continue
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n") and _DONE in b"\n" + b"".join(chunks[-2:]):
                how = "done"  # (its last word: its exit, a big process's unmapping, not awaited)
                break
    except KeyboardInterrupt:
        how = "interrupted"
    finally:
        if how != "ran":
            _kill(pid)
        os.close(read)
    return b"".join(chunks).split(b"\n"), how


_DONE = b'\n{"done": '
"""How the child's last line begins."""
_EXITING: list[int] = []
"""Children that said their last word and were not reaped yet (they are as the next run
starts, or whenever they have exited)."""


def _reap_exited() -> None:
    """The children that said their last word and have exited since."""
    for pid in list(_EXITING):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _EXITING.remove(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _reap(pid: int) -> int:
    """The child's wait status (waited for as it exits — its report ends as it does — and
    killed if it lingers a second)."""
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        time.sleep(0.0002)
    _kill(pid)
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


def _report_of(lines: list[bytes]) -> tuple[list[dict[str, str]], dict[str, Any] | None, str]:
    """What the child said: what it tried, its end (its output; None: it never said), and
    why the jail could not be made ("": it was; nothing of the code ran otherwise)."""
    tried: list[dict[str, str]] = []
    done: dict[str, Any] | None = None
    broke = ""
    for line in lines:
        try:
            said = json.loads(line.decode("utf-8", "replace")) if line.strip() else None
        except ValueError:
            continue
        if not isinstance(said, dict):
            continue
        if isinstance(said.get("tried"), dict):
            tried.append({k: str(v) for k, v in said["tried"].items()})
        elif isinstance(said.get("done"), dict) and done is None:
            done = said["done"]
        elif "broke" in said and done is None:
            broke = str(said["broke"])[:500]
    return tried, done, broke


def _tell(
    kernel: Any, lines: list[bytes], how: str, status: int, budget: float, took: float
) -> None:
    """Show the child's output as this run's, then what it tried and how it ended."""
    tried, done, broke = _report_of(lines)
    if broke and done is None and not tried:  # (a kernel whose system refuses a part of it)
        kernel._publish({"jail": {"how": "unavailable", "why": broke, "tried": []}})
        return
    signalled = os.WIFSIGNALED(status)
    killed_by = os.WTERMSIG(status) if signalled else 0
    if how == "ran" and killed_by == signal.SIGSYS:
        how = "stopped"
        if not any(t.get("kind") in ("process", "network") for t in tried):
            tried.append(
                _said(
                    "system",
                    "a process, a socket or a reach past the jail",
                    "the jail ended the code there",
                )
            )
    elif how == "ran" and done is None:
        how = "crashed" if signalled else "cut"
        if not signalled:  # it ended without its report: something closed or took the pipe
            tried.append(_said("tamper", "the jail's report", "the code ended it"))
    if done is not None:
        _replay(done.get("events") or [])
        found = done.get("evidence")
        EVIDENCE.clear()
        if isinstance(found, list) and len(found) == 2:
            EVIDENCE[str(found[0])] = str(found[1])
    report: dict[str, Any] = {"how": how, "tried": tried, "ms": round(took * 1000, 3)}
    if done is not None:
        report["pieces"] = done.get("pieces", 0)
        report["failed"] = bool(done.get("failed"))
    if how in ("timeout", "crashed", "interrupted", "stopped", "cut") and not (
        done is not None and done.get("failed")
    ):
        evalue = {
            "timeout": f"the code did not finish within {budget:g} s in the jail (it was stopped)",
            "crashed": f"the code crashed the jail's process (signal {killed_by})",
            "interrupted": "interrupted",
            "stopped": "the jail stopped the code: "
            + "; ".join(t.get("sentence", "") for t in tried),
            "cut": "the jail's process ended without its report",
        }[how]
        kernel._publish(
            {
                "error": {
                    "ename": "KeyboardInterrupt" if how == "interrupted" else "JailStop",
                    "evalue": evalue,
                    "frames": [],
                    "text": evalue,
                },
                "interrupted": how == "interrupted",
            }
        )
        report["failed"] = True
    kernel._publish({"jail": report})


def _replay(events: list[Any]) -> None:
    """What the child showed, shown by the kernel in the same order."""
    shell = sys.modules["_runfix_kernel"]._shell()
    publisher = shell.display_pub
    for event in events:
        if not isinstance(event, list) or not event:
            continue
        if event[0] == "out" and len(event) == 3:
            stream = getattr(sys, str(event[1]), None)
            stream = getattr(stream, "_stream", stream)  # (runfix's cap was applied there)
            if stream is not None:
                stream.write(str(event[2]))
        elif event[0] == "pub" and len(event) == 5:
            _, data, metadata, transient, update = event
            extra: dict[str, Any] = {}
            if transient:
                extra["transient"] = transient
            if update:
                extra["update"] = True
            publisher.publish(data, metadata or {}, **extra)
        elif event[0] == "clear" and len(event) == 2:
            publisher.clear_output(bool(event[1]))


_WORDS = {
    "read": "a read",
    "signal": "signalling another process",
    "system": "a system call the jail forbids",
    "tamper": "tampering with the jail",
    "later": "a change that acts later",
    "input": "asking for input",
}
"""The jail's own kinds; the others are said as the guard says them (`_kernel_guard._KINDS`)."""


def _said(kind: str, what: str, why: str) -> dict[str, str]:
    """One thing the code tried, as the guard says a refusal (`_kernel_guard.Refusal.said`):
    its pattern matches only what it names."""
    guard = sys.modules["_runfix_guard"]
    words = _WORDS.get(kind) or guard._KINDS.get(kind, kind)
    return {"kind": kind, "what": what, "why": why, "pattern": f"{kind}:{guard.literal(what)}",
            "sentence": f"{words} ({what}): {why}"}  # fmt: skip


def confine_process() -> str | None:
    """Confine this whole process (a test fix's pytest run) the way the jail is, with what a
    test run needs: writes only under a scratch folder of its own (its `TMPDIR`, pytest's
    `tmp_path`) and /dev/null, reads as the jail's, no TCP, signals scoped; programs may
    start (a project's tests start them), confined as it is. Why not (None: it is)."""
    why = unavailable()
    if why is not None:
        return why
    import atexit
    import ctypes

    scratch = tempfile.mkdtemp(prefix="runfix-tests-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["TMPDIR"] = scratch
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    tempfile.tempdir = scratch
    sys.dont_write_bytecode = True
    readable = [*_readable(os.getcwd()), os.path.realpath(scratch)]
    try:
        _landlock(ctypes.CDLL(None, use_errno=True), scratch, readable, programs=True)
    except OSError as exc:
        return str(exc)
    return None


# -- the child's side ----------------------------------------------------------------------


def _child(
    read: int, write: int, scratch: str, pieces: list[tuple[str, str, int]], limit: int,
    budget: float, secrets: list[str], readable: list[str], state: _State, through: bool,
    shared: list[tuple[int, int]],
) -> None:  # fmt: skip
    """Confine this process, run the pieces, report; never returns."""
    code = 0
    try:
        os.close(read)
        events: list[Any] = []
        _prepare(write, scratch, events)
        state.ours()
        folder = os.getcwd()
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _protect_shared(libc, shared)
        _landlock(libc, scratch, readable)
        _seccomp(libc)
        reporter = _Reporter(write, scratch, readable, folder)
        sys.addaudithook(reporter.hook)
        signal.alarm(max(1, int(budget + 1)))  # (the kernel kills it too)
        earlier = getattr(sys, "last_value", None)
        ran, failed, shown = _run_pieces(pieces, limit, events, through)
        for what in state.changed():
            reporter.report("later", what, "it would act after the code ran, in your kernel")
        done: dict[str, Any] = {"events": events[shown:], "pieces": ran, "failed": failed}
        if failed and getattr(sys, "last_value", None) is not earlier:
            done["evidence"] = _evidence(secrets)
        _send(write, {"done": done})
    except BaseException as exc:  # a jail that could not be made runs nothing
        code = 3
        with contextlib.suppress(BaseException):
            _send(write, {"broke": f"{type(exc).__name__}: {exc}"})
    finally:
        os._exit(code)


_DUMPS, _WRITE = json.dumps, os.write
"""Taken when the jail is loaded: code that replaces `json.dumps` does not change its report."""


def _send(fd: int, said: dict[str, Any]) -> None:
    data = (_DUMPS(said, default=str) + "\n").encode("utf-8", "replace")
    view = memoryview(data)
    while view:
        view = view[_WRITE(fd, view) :]


def _prepare(write: int, scratch: str, events: list[Any]) -> None:
    """Before any confinement: the kernel's files, sockets and streams out of reach, what
    the code shows kept in `events`, temp and bytecode where the jail lets them be."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in _open_descriptors():
        if fd not in (write, null):
            with contextlib.suppress(OSError):  # (the number stays taken: nothing reuses it)
                os.dup2(null, fd)
    kernel = sys.modules["_runfix_kernel"]
    kernel._current._shared = None  # (the statement file is the kernel's)
    kernel._PROC.clear()
    kernel._usage_start()  # (opens its /proc files now, before the jail)
    guard = sys.modules.get("_runfix_guard")
    for held in getattr(guard, "_GUARD", ()):  # the jail is the wall here: the guard rests
        held.armed, held.codes, held.threads = None, {}, set()
    history = getattr(kernel._shell(), "history_manager", None)
    if history is not None:  # (the kernel's writer is not the child's: it writes nothing)
        with contextlib.suppress(Exception):
            history._restart_thread_if_stopped = lambda: None
            history.save_thread = None
            history.using_thread = False
            history.db_input_cache_lock = threading.Lock()
            history.db_output_cache_lock = threading.Lock()
    _capture(events, write)
    sys.dont_write_bytecode = True
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    for wrapper in kernel._WRAPPERS:  # (what the kernel's streams counted is the kernel's)
        wrapper._between = wrapper.strays = 0
    config = os.environ.get("MPLCONFIGDIR") or _matplotlib_dir()
    if not os.path.isdir(config):  # (matplotlib would make it: in the scratch folder instead)
        os.environ["MPLCONFIGDIR"] = os.path.join(scratch, "matplotlib")


def _matplotlib_dir() -> str:
    home = os.path.expanduser("~")
    return os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                        "matplotlib")  # fmt: skip


def _open_descriptors() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd") if n.isdigit() and int(n) > 2] + [
            0,
            1,
            2,
        ]
    except OSError:
        return list(range(256))


class _Recorder:
    """A stream the child's code writes to: kept in order with its displays."""

    def __init__(self, name: str, events: list[Any]) -> None:
        self.name, self.events = name, events
        self.encoding, self.errors = "utf-8", "replace"

    def write(self, text: Any) -> int:
        text = text if isinstance(text, str) else str(text)
        last = self.events[-1] if self.events else None
        if last is not None and last[0] == "out" and last[1] == self.name:
            last[2] += text
        else:
            self.events.append(["out", self.name, text])
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "the jail's stream has no descriptor")


def _capture(events: list[Any], write: int) -> None:
    """The kernel's streams, display publisher and `input()` as the child's own (code that
    asks for input is said to have tried it: only the kernel can ask the user)."""
    kernel = sys.modules["_runfix_kernel"]
    shell = kernel._shell()
    for name in ("stdout", "stderr"):
        recorder = _Recorder(name, events)
        current = getattr(sys, name)
        inner = getattr(current, "_stream", None)
        if isinstance(current, kernel._CappedStream):
            current._stream = recorder
        else:
            setattr(sys, name, recorder)
        for stream in (inner, current):  # (a logging handler may hold the kernel's own)
            if stream is not None and stream is not recorder:
                try:
                    stream.write = recorder.write
                    stream.flush = recorder.flush
                except (AttributeError, TypeError):
                    pass

    def publish(data: Any, metadata: Any = None, source: Any = None, **more: Any) -> None:
        if kernel.MIME not in (data or {}):
            kernel._current.announce()  # (the display hook the kernel would have run)
        events.append(["pub", data, metadata, more.get("transient"), more.get("update")])

    def clear_output(wait: bool = False) -> None:
        events.append(["clear", wait])

    publisher = shell.display_pub
    publisher.publish = publish
    publisher.clear_output = clear_output

    def no_input(*args: Any, **kwargs: Any) -> str:
        said = _said("input", "input()", "only your kernel can ask you")
        with contextlib.suppress(OSError):
            _send(write, {"tried": said})
        raise EOFError("runfix's jail: nobody answers input() here")

    import builtins
    import getpass

    builtins.input = no_input
    getpass.getpass = no_input


_SHARED_WRITABLE = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) rw.s", re.M)
_SHARED: list[list[tuple[int, int]]] = []
"""The kernel's shared writable memory ([start, end) ranges), as last read; read again once
Python maps more (`mmap.__new__`: numpy's memmap, shared memory) — the maps of a kernel that
imported pandas took 4 ms to read."""


_HOOKED: list[bool] = []


def _shared_memory() -> list[tuple[int, int]]:
    """The kernel's shared writable memory (read in the kernel, before the fork)."""
    if not _HOOKED:
        sys.addaudithook(_mapped)
        _HOOKED.append(True)
    if not _SHARED:
        _SHARED.append(_read_shared())
    return _SHARED[0]


def _mapped(event: str, args: Any) -> None:
    if event == "mmap.__new__":
        _SHARED.clear()  # (read again at the next run)


def _read_shared() -> list[tuple[int, int]]:
    try:
        fd = os.open("/proc/self/maps", os.O_RDONLY)
    except OSError:
        return []
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    found = _SHARED_WRITABLE.finditer(b"".join(chunks))
    return [(int(m.group(1), 16), int(m.group(2), 16)) for m in found]


def _protect_shared(libc: Any, ranges: list[tuple[int, int]]) -> None:
    """Memory the child shares with the kernel or a file (a statement file, `np.memmap`,
    shared memory) becomes read-only: a write to it ends the child, never reaches them."""
    import ctypes

    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for start, end in ranges:
        libc.mprotect(start, end - start, 1)  # PROT_READ


_READABLE: dict[tuple[str, ...], list[str]] = {}
"""What `_readable` found, by what it read (the folder, `sys.path`, the environment)."""


def _readable(folder: str) -> list[str]:
    """Where the code may read: its folder, the interpreter and what it imports from, the
    system's libraries and data (and its own temp, the scratch folder, given apart); never
    the rest of the home folder, nor the shared temp folder (another folder's files, a
    socket's name). Kept while what it depends on is the same."""
    key = (folder, *sys.path, os.environ.get("HOME", ""), os.environ.get("XDG_CACHE_HOME", ""),
           os.environ.get("XDG_CONFIG_HOME", ""), os.environ.get("MPLCONFIGDIR", ""))  # fmt: skip
    found = _READABLE.get(key)
    if found is None:
        _READABLE.clear()
        found = _READABLE[key] = _places(folder)
    return found


def _places(folder: str) -> list[str]:
    places = [folder, sys.prefix, sys.exec_prefix,
              getattr(sys, "base_prefix", sys.prefix), getattr(sys, "base_exec_prefix",
              sys.exec_prefix), *_SYSTEM, *("/etc/" + name for name in _ETC)]  # fmt: skip
    places += [p or folder for p in sys.path]
    home = os.path.expanduser("~")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    places += [_matplotlib_dir(), os.path.join(cache, "matplotlib"),
               os.path.join(cache, "fontconfig")]  # fmt: skip
    seen: list[str] = []
    for place in places:
        real = os.path.realpath(place)
        if real not in seen and os.path.exists(real):
            seen.append(real)
    # (a place inside another needs no rule of its own: fewer rules, a cheaper jail)
    return [p for p in seen if not any(p != q and _within(p, q) for q in seen)]


def _landlock(libc: Any, scratch: str, readable: list[str], programs: bool = False) -> None:
    """Landlock on this process and its future children: writes only under `scratch` (and
    to /dev/null), reads only under `readable`, no program started from a file (`programs`:
    programs under `readable` may start), no TCP; signals and abstract sockets within the
    jail (ABI >= 6). Irreversible."""
    import ctypes

    abi = landlock_abi()
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= 6:
        attr = struct.pack("=QQQ", handled, 3, 3)
    elif abi >= 4:
        attr = struct.pack("=QQ", handled, 3)
    else:
        attr = struct.pack("=Q", handled)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = int(libc.syscall(_CREATE_RULESET, buffer, len(attr), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def allow(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                rights &= _FILE_RIGHTS
            rule = ctypes.create_string_buffer(struct.pack("=Qi", rights & handled, fd), 12)
            if libc.syscall(_ADD_RULE, ruleset, 1, rule, 0) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(fd)

    for place in readable:
        allow(place, _READ | (_EXECUTE if programs else 0))
    allow(scratch, handled & ~_EXECUTE)
    allow(os.devnull, _READ_FILE | _WRITE_FILE | _TRUNCATE)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(ruleset)


def _seccomp(libc: Any) -> bool:
    """A seccomp filter that ends the child when it starts a process, opens a network socket
    or reaches past Landlock (`_CALLS`); local sockets are refused (EACCES); signals only to
    itself. False where this machine's calls are not known here (Landlock still holds)."""
    import ctypes

    machine = os.uname().machine
    calls, arch = _CALLS.get(machine), _ARCH.get(machine)
    if calls is None or arch is None:
        return False
    me = os.getpid()

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("=HBBI", code, jt, jf, k)

    def load(offset: int) -> bytes:
        return op(0x20, 0, 0, offset)  # BPF_LD | BPF_W | BPF_ABS

    def equal(k: int, jt: int, jf: int) -> bytes:
        return op(0x15, jt, jf, k)  # BPF_JMP | BPF_JEQ | BPF_K

    def answer(k: int) -> bytes:
        return op(0x06, 0, 0, k)  # BPF_RET | BPF_K

    program = [load(4), equal(arch, 1, 0), answer(_KILL), load(0)]
    if machine == "x86_64":  # the x32 calls
        program += [op(0x35, 0, 1, 0x40000000), answer(_KILL)]  # BPF_JGE
    for number in calls.ends:
        program += [equal(number, 0, 1), answer(_KILL)]
    program += [equal(calls.clone3, 0, 1), answer(_ERRNO | errno.ENOSYS)]  # (glibc: clone)
    program += [equal(calls.tkill, 0, 1), answer(_ERRNO | errno.EPERM)]
    program += [  # a thread is a clone with CLONE_THREAD; anything else is a process
        equal(calls.clone, 0, 4), load(16), op(0x45, 1, 0, _CLONE_THREAD),
        answer(_KILL), answer(_ALLOW),
    ]  # fmt: skip
    program += [  # a local socket is refused; any other ends the child
        equal(calls.socket, 0, 4), load(16), equal(1, 0, 1),
        answer(_ERRNO | errno.EACCES), answer(_KILL),
    ]  # fmt: skip
    for number in calls.signals:  # kill(pid, …), tgkill(pid, …): this process only
        program += [equal(number, 0, 4), load(16), equal(me, 0, 1), answer(_ALLOW),
                    answer(_ERRNO | errno.EPERM)]  # fmt: skip
    program.append(answer(_ALLOW))
    code = b"".join(program)
    filters = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = Program(len(program), ctypes.addressof(filters))
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]  # fmt: skip
    if libc.prctl(_PR_SET_SECCOMP, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")
    return True


def _evidence(secrets: list[str]) -> list[str] | None:
    """[the error's name, what its frames held] for the error a piece raised here (read as
    the kernel reads its own: nothing of the code runs)."""
    live, raised = sys.modules.get("_runfix_live"), getattr(sys, "last_value", None)
    if live is None or raised is None:
        return None
    ename = type(raised).__name__
    try:
        return [ename, live.evidence(ename, 0, secrets)]
    except Exception:
        return None


def _run_pieces(
    pieces: list[tuple[str, str, int]], limit: int, events: list[Any], through: bool = False
) -> tuple[int, bool, int]:
    """Each piece in turn, as the kernel runs the user's; stops at the first that fails
    (`through`: only the last counts, as cells run one after another). (Pieces run, whether
    the one shown failed, where its events start)."""
    kernel = sys.modules["_runfix_kernel"]
    ran, shown = 0, 0
    for at, (code, filename, first) in enumerate(pieces):
        shown = len(events)
        if "await" in code or "async" in code:
            _run_async(kernel, code, filename, first, limit)
        else:
            kernel.run(code, filename, first, limit)
        ran += 1
        last = at == len(pieces) - 1
        if any(_failed(event) for event in events[shown:]) and (last or not through):
            return ran, True, shown
    return ran, False, shown


def _failed(event: Any) -> bool:
    if event[0] != "pub":
        return False
    said = (event[1] or {}).get(sys.modules["_runfix_kernel"].MIME)
    return isinstance(said, dict) and "error" in said


def _run_async(kernel: Any, code: str, filename: str, first: int, limit: int) -> None:
    """Code with a top-level `await`, on a loop of the child's own (the kernel's is not
    running here)."""
    import asyncio

    asyncio.events._set_running_loop(None)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(kernel.run_async(code, filename, first, limit))
    finally:
        loop.close()


_SYS_OWN = {"last_type", "last_value", "last_traceback", "last_exc", "stdout", "stderr"}
"""What of `sys` a run itself sets (its error, runfix's streams)."""


class _State:
    """What of the process outlives a run and acts later, as it was before the code ran:
    builtins, the modules, the functions and classes of the modules the code names or the
    user's namespace holds, import hooks, trace and profile functions, IPython's event
    callbacks and transformers, exit handlers, threads, signal handlers. What the code
    changed of it would act in the user's kernel once it ran there (a function put into
    `builtins.sorted` runs in the user's next cell): `changed` names it. The user's own
    namespace and the folder's modules are the code's to change.

    Only the modules the code names are read whole: reading every object of a forked
    process copies each page it touches (a reference count is a write), 0.3 s in a kernel
    that imported pandas and matplotlib."""

    def __init__(self, folder: str, pieces: list[tuple[str, str, int]]) -> None:
        import builtins
        import threading

        self.folder = os.path.realpath(folder)
        self.builtins = dict(builtins.__dict__)
        self.modules = dict(sys.modules)
        self.named = _named_modules(pieces)
        self.spaces = [(name, space, space.copy()) for name, space in self._spaces()]
        self.hooks = self._hooks()
        self.threads = {t.ident for t in threading.enumerate()}
        self.exits: tuple[int, list[Any]] = (0, [])
        """The functions registered to run at exit before the code ran, and those since."""

    def ours(self) -> None:
        """What the jail itself put in place before the code runs (`_capture`) is no
        change of the code's; what is registered to run at exit is kept to be judged (a
        library registers its own on import)."""
        import atexit
        import builtins
        import getpass

        registered: list[Any] = []
        self.exits = (atexit._ncallbacks(), registered)
        register = atexit.register

        def kept(function: Any, *args: Any, **kwargs: Any) -> Any:
            registered.append(function)
            return register(function, *args, **kwargs)

        atexit.register = kept  # type: ignore[assignment]

        self.builtins["input"] = builtins.input
        for name, _, was in self.spaces:
            if name == "atexit":
                was["register"] = kept
        for name, _, was in self.spaces:
            if name == "getpass":
                was["getpass"] = getpass.getpass

    def _spaces(self) -> list[tuple[str, dict[str, Any]]]:
        """The namespaces of the modules the code names (or the user's namespace holds)
        that are not the user's (nor runfix's)."""
        found = []
        for name in self.named:
            module = sys.modules.get(name)
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict) or name in ("__main__", "builtins"):
                continue
            if name.startswith("_runfix_"):
                continue
            path = space.get("__file__")
            if isinstance(path, str) and _within(os.path.realpath(path), self.folder):
                continue
            found.append((name, space))
        return found

    @staticmethod
    def _hooks() -> dict[str, list[Any]]:
        """What the interpreter and IPython call later, by name: the objects each holds."""
        shell = sys.modules["_runfix_kernel"]._shell()
        events = getattr(getattr(shell, "events", None), "callbacks", {}) or {}
        hooks: dict[str, list[Any]] = {
            "sys.meta_path": list(sys.meta_path),
            "sys.path_hooks": list(sys.path_hooks),
            "sys.settrace": [sys.gettrace()],
            "sys.setprofile": [sys.getprofile()],
            "sys.displayhook": [sys.displayhook],
            "sys.excepthook": [sys.excepthook],
            "IPython's input transformers": list(getattr(shell, "input_transformers_post", [])),
            "IPython's AST transformers": list(getattr(shell, "ast_transformers", [])),
        }
        for event, callbacks in events.items():
            hooks[f"IPython's {event} callbacks"] = list(callbacks)
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGUSR1):
            hooks[f"the {signal.Signals(number).name} handler"] = [signal.getsignal(number)]
        return hooks

    def changed(self) -> list[str]:
        """What the code changed that acts later (a name each), oldest first."""
        import builtins
        import threading

        found = [
            f"builtins.{k}"
            for k, v in builtins.__dict__.items()
            if k not in ("_", "__", "___") and self.builtins.get(k, v) is not v
        ]
        found += [f"builtins.{k}" for k in builtins.__dict__.keys() - self.builtins.keys()]
        found += [
            f"sys.modules[{k!r}]"
            for k, v in self.modules.items()
            if sys.modules.get(k, v) is not v and not k.startswith("_runfix_")
        ]
        for name, space, was in self.spaces:
            for key, old in was.items():
                new = space.get(key, old)
                if new is old or not callable(old) or (name == "sys" and key in _SYS_OWN):
                    continue
                if not _library(new):
                    found.append(f"{name}.{key}")
        for name in self.named:  # imported by the code: none of its functions is the code's
            made = getattr(sys.modules.get(name), "__dict__", None)
            if name in self.modules or not isinstance(made, dict) or name == "__main__":
                continue
            found += [
                f"{name}.{key}"
                for key, value in list(made.items())
                if hasattr(value, "__code__") and not _library(value)
            ]
        now = self._hooks()
        for what, hooked in self.hooks.items():
            held = now.get(what, [])
            added = [h for h in held if not any(h is w for w in hooked)]
            if len(held) != len(hooked) and not added:
                continue  # (one taken away: nothing of the code's runs later for it)
            if any(not _library(h) for h in added):
                found.append(what)
        import atexit

        registered = self.exits[1]
        unseen = atexit._ncallbacks() - self.exits[0] - len(registered)
        if unseen > 0 or any(not _library(f) for f in registered):
            found.append("atexit")  # (a function the code registered, run at the kernel's exit)
        left = [t for t in threading.enumerate() if t.ident not in self.threads and t.is_alive()]
        found += [
            f"a thread left running ({t.name})"
            for t in left
            if not _library(getattr(t, "_target", None) or t.run)
        ]
        return found[:20]


def _named_modules(pieces: list[tuple[str, str, int]]) -> list[str]:
    """The modules the pieces import or name (`os.path.join = …`: os and os.path), and
    those the user's namespace holds."""
    import ast

    names: list[str] = []
    main = getattr(sys.modules.get("__main__"), "__dict__", {})
    for code, _, _ in pieces:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    names += [".".join(parts[: i + 1]) for i in range(len(parts))]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
                names += [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Name):
                held = main.get(node.id)
                if type(held).__name__ == "module":
                    names.append(str(getattr(held, "__name__", "")))
    names += [
        str(getattr(v, "__name__", "")) for v in list(main.values()) if type(v).__name__ == "module"
    ]
    return list(dict.fromkeys(n for n in names if n))


def _library(value: Any) -> bool:
    """Whether `value` (a function, a method, an object) is the code of a file of the
    interpreter's (a library rebinding its own function, matplotlib's pyplot binding its
    backend's `show` on first use, registering its callback), not the code that ran. Code
    can forge it only by naming such a file as it compiles itself."""
    function = getattr(value, "__func__", value)
    code = getattr(function, "__code__", None)
    owner = getattr(function, "__self__", None)
    if code is not None:
        where = code.co_filename
    elif type(owner).__name__ == "module":  # (a native module's function: its own file)
        where = getattr(owner, "__file__", None)
    else:
        named = getattr(function, "__module__", None) or getattr(type(value), "__module__", "")
        where = getattr(sys.modules.get(str(named)), "__file__", None)
    if not isinstance(where, str) or not where or getattr(function, "__module__", "") == "__main__":
        return False
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    real = os.path.realpath(where)
    return any(_within(real, os.path.realpath(p)) for p in prefixes) and os.path.isfile(real)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Reporter:
    """The audit hook that says what the code tried that the jail refuses; a process or a
    network call it also stops here, as a refusal the code can catch (else the system call
    ends the child). It only reports writes and reads: Landlock refuses them."""

    def __init__(self, fd: int, scratch: str, readable: list[str], folder: str) -> None:
        self.fd, self.scratch, self.readable, self.folder = fd, scratch, readable, folder
        self.seen: set[str] = set()
        self.inside = False
        guard = sys.modules["_runfix_guard"]
        self.written, self.process, self.network = (
            guard._PATHS_WRITTEN, guard._PROCESS, guard._NETWORK,
        )  # fmt: skip
        self.tamper = guard._TAMPER
        self.harmless = {p.split(":", 1)[1] for p in guard.ALWAYS_ALLOWED if p[:8] == "process:"}
        """Programs libraries start on import (matplotlib's font cache, `ctypes.util.
        find_library`, `platform`): refused in the jail as if missing (they go on without),
        never reported — what the guard always allows."""
        self.command, self.address = guard._command, guard._address
        self.write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.inside:
            return
        self.inside = True
        try:
            found = self._judge(event, args)
        except Exception:
            found = None
        finally:
            self.inside = False
        if found is None:
            return
        kind, what, why = found
        if kind == "harmless":
            raise FileNotFoundError(errno.ENOENT, f"runfix's jail: no {what} here")
        sentence = self.report(kind, what, why)
        if kind in ("process", "signal", "network"):
            raise PermissionError(errno.EACCES, "runfix's jail refused " + sentence)

    def report(self, kind: str, what: str, why: str) -> str:
        """Say once what the code tried; the sentence."""
        said = _said(kind, what, why)
        if said["pattern"] not in self.seen:
            self.seen.add(said["pattern"])
            with contextlib.suppress(OSError):
                _send(self.fd, {"tried": said})
        return said["sentence"]

    def _judge(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
        if event == "open":
            path, mode, flags = (*tuple(args), None, None, 0)[:3]
            if isinstance(path, int) or path is None:
                return None
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and bool(flags & self.write_flags)
            )
            return self._write(path) if writing else self._read(path)
        if event in self.written:
            return self._changed(event, args)
        if event in self.process:
            return self._process(event, args)
        if event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            if family == 1:  # AF_UNIX
                return ("network", "a local socket", "model code may not open sockets")
            return ("network", "a network socket", "model code may not reach the network")
        if event in self.network:
            return ("network", self.address(event, args), "model code may not reach the network")
        if event in self.tamper:
            return ("tamper", event, "it reaches into the interpreter past its own code")
        return None

    def _changed(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
        """A file or folder made, removed, renamed, linked or changed outside the scratch
        folder (one that exists made again, or one that is not there removed: no write)."""
        for at in self.written[event]:
            if at >= len(args) or args[at] is None or isinstance(args[at], int):
                continue
            path = os.fsdecode(args[at])
            if event == "os.mkdir" and os.path.exists(path):
                continue
            if event in ("os.remove", "os.rmdir") and not os.path.lexists(path):
                continue
            found = self._write(path)
            if found is not None:
                return found
        return None

    def _process(self, event: str, args: tuple[Any, ...]) -> tuple[str, str, str] | None:
        if event == "signal.pthread_kill":
            return None  # (a thread of this process)
        if event in ("os.kill", "os.killpg"):
            target = args[0] if args else None
            if event == "os.kill" and target in (os.getpid(), None):
                return None
        program = self.command(event, args)
        if program in self.harmless:
            return ("harmless", program, "")
        if event in ("os.kill", "os.killpg"):
            return ("signal", program, "model code may signal only itself")
        return ("process", program, "model code may not start a process")

    def _write(self, path: Any) -> tuple[str, str, str] | None:
        text = os.fsdecode(path)
        if text in (os.devnull, "/dev/stdout", "/dev/stderr"):
            return None
        real = os.path.realpath(text)
        if _within(real, os.path.realpath(self.scratch)):
            return None
        return ("write", real, "the jail lets code write only in its scratch folder")

    def _read(self, path: Any) -> tuple[str, str, str] | None:
        real = os.path.realpath(os.fsdecode(path))
        if any(_within(real, place) for place in self.readable):
            return None
        if not os.path.lexists(real):
            return None
        return ("read", real, "the jail lets code read only its folder, the interpreter and "
                "the system's libraries")  # fmt: skip
