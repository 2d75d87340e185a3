"""The folder socket: where the `runfix serve` holding a workspace folder listens for its
local clients — agents (`runfix mcp`) and debuggers (`runfix dap`) — in the user's private
runtime folder, named by the folder's identity; how a client finds the folder an editor
holds above a path, and connects, checking who serves it. The server's side of the door is
`lsp_server.agents`."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import stat
import struct
import sys
from pathlib import Path

LINE_LIMIT = 16 * 1024 * 1024
"""The longest call or answer taken (a snippet, an output)."""
DAP_HELLO = b'{"op": "dap"'
"""How `runfix dap` opens a connection: the rest of it is a debug session's."""


class AgentError(Exception):
    """A call that cannot be carried out; its message goes back to the agent."""


def runtime_dir() -> Path:
    """The user's private runtime folder for runfix's sockets (0700, the user's own, not a
    link): `$XDG_RUNTIME_DIR/runfix`, else `~/.local/state/runfix/run` (the home folder's,
    whatever `XDG_STATE_HOME` says: an editor's server and an agent started with another
    state folder still find each other) — never the shared temp folder; made if missing.
    Checked at every use, not once: a folder someone else made or opened up is refused, and
    so is one below a folder another user could rename it out of (owned by someone but this
    user or root, or writable by others without the sticky bit: `XDG_RUNTIME_DIR` left
    pointing into another user's folder by `su`)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / "runfix" if base else Path.home() / ".local" / "state" / "runfix" / "run"
    if not base:  # (not the shared temp folder: another of this user's processes' to rename)
        root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    for parent in root.parents:
        try:
            above = os.lstat(parent)
        except OSError:
            continue  # made below
        if above.st_uid not in (os.getuid(), 0):
            raise AgentError(
                f"{root} is inside {parent}, which another user owns (uid {above.st_uid}): "
                "agents are not served (is XDG_RUNTIME_DIR another user's?)"
            )
        if above.st_mode & stat.S_IWOTH and not above.st_mode & stat.S_ISVTX:
            raise AgentError(f"{root} is inside {parent}, which anyone may write to")
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o700, parents=False)
    _private(os.lstat(root), root)
    return root


def _private(found: os.stat_result, root: Path) -> None:
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid():
        raise AgentError(f"{root} is not a folder of this user's: agents are not served")
    if stat.S_IMODE(found.st_mode) & 0o077:
        raise AgentError(f"{root} is open to other users (mode {found.st_mode & 0o777:o})")


async def connect(folder: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the socket of the `runfix serve` holding `folder`: the runtime folder
    checked again and pinned by a descriptor while connecting (it cannot be swapped between
    the check and the connect), and the server's user checked on the socket itself
    (`SO_PEERCRED`): one run by another user is refused, saying so. FileNotFoundError or
    ConnectionRefusedError: nobody listens there."""
    where = socket_path(folder)
    fd = os.open(where.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _private(os.fstat(fd), where.parent)
        pinned = f"/proc/self/fd/{fd}/{where.name}"
        target = pinned if sys.platform.startswith("linux") else str(where)
        reader, writer = await asyncio.open_unix_connection(target, limit=LINE_LIMIT)
    finally:
        os.close(fd)
    peer = writer.get_extra_info("socket")
    if peer is not None and hasattr(socket, "SO_PEERCRED"):
        raw = peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", raw)
        if uid != os.getuid():
            writer.close()
            raise AgentError(
                f"the socket for {folder} is served by another user (uid {uid}), not by "
                "your editor: refused"
            )
    return reader, writer


STAND_BY = 2.0
"""Seconds between looks at whether the editor serving a folder to agents is still there."""


async def answers(where: Path) -> bool:
    """Whether a server listens on the socket `where` (a live editor's, not one a dead server
    left: that refuses)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(where)), 2.0)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def identity(folder: Path) -> tuple[int, int] | None:
    """A folder's identity (device, inode; links followed), None where it is not there."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def socket_path(folder: Path, root: Path | None = None) -> Path:
    """Where the `runfix serve` holding `folder` listens for agents: named by the folder's
    identity (device and inode, links followed), so that every spelling of it — `//path`, a
    link to it, its real path when the editor opened it through a link — finds the editor's
    socket, and an agent never gets a folder an editor holds served alone, unasked. `root`:
    the runtime folder, already checked."""
    return (root or runtime_dir()) / socket_name(folder)


def socket_name(folder: Path) -> str:
    """The name of `folder`'s socket in the runtime folder (`socket_path`)."""
    found = identity(folder)
    named = f"{found[0]}:{found[1]}" if found is not None else os.path.realpath(folder)
    return hashlib.sha256(named.encode()).hexdigest()[:24] + ".sock"


async def held_folder(path: Path) -> Path | None:
    """The folder (the path itself when a folder, or one above) that an editor's `runfix
    serve` holds. A socket is named by its folder's device and inode, and one a killed
    server left stays: a file is never a folder held (its inode may be one a gone folder
    had), and where several folders on the way up have a socket, the nearest that answers
    is (else the nearest: its server may be taking it over). One socket is not probed:
    the connection to it tells."""
    found = _with_sockets(path)
    if len(found) > 1:
        for folder, where in found:
            if await answers(where):
                return folder
    return found[0][0] if found else None


def _with_sockets(path: Path) -> list[tuple[Path, Path]]:
    """The folders from `path` (a file's: from its folder) up that have a socket, nearest
    first, each with its socket."""
    path = Path(os.path.abspath(path))
    start = path if os.path.isdir(path) else path.parent
    root = runtime_dir()  # checked once for the walk up, not once per folder above
    sockets = ((folder, root / socket_name(folder)) for folder in (start, *start.parents))
    return [(folder, where) for folder, where in sockets if where.exists()]
