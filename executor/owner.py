"""Which runfix server made something that outlives a crash (a container, a remote kernel).

An owner is `host:pid:start-time`: the start time tells a live server from a
new process that reuses a dead server's pid. Whatever a gone owner left behind
is removed by the next server that finds it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def _start_token(pid: int) -> str:
    """The process's start time (so a reused pid is not taken for a live server)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def owner() -> str:
    """This process, as an owner."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_token(pid)}"


def owner_alive(value: str) -> bool:
    """Whether the owner is still running (another machine's owner is taken to be)."""
    host, _, rest = value.partition(":")
    pid_text, _, token = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another machine's: not ours to judge
    pid = int(pid_text)
    if not pid_exists(pid):
        return False
    return not token or _start_token(pid) in ("", token)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
