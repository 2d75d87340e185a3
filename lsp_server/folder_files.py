"""runfix's files inside a folder it does not own (`.runfix/`): no link is ever followed.

A repository can ship, and code in the sandbox (which writes to the folder) can
plant, a symbolic link where runfix keeps its files: `.runfix/` or
`.runfix/outputs` linking to a folder elsewhere, a dangling `<hash>.md` linking to
a shell start-up file, a record whose stored output names `/proc/self/environ`.
So every path below the folder is walked one component at a time from the
folder with `O_NOFOLLOW` (a link anywhere is refused, never followed, and cannot
be swapped in between a check and the use); files are created with `O_EXCL`;
only regular files with the names runfix gives are read, pruned or shown.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

RUNFIX = ".runfix"
OUTPUTS = "outputs"
STORED_NAME = re.compile(r"[0-9a-f]{16}\.(png|jpg|svg|html|md|tex|json)")
"""The names runfix gives stored outputs: all it ever reads from a folder's outputs."""
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_WITH_FDS = os.open in os.supports_dir_fd and _NOFOLLOW != 0


class LinkRefused(OSError):
    """A link (or something not a folder) where runfix keeps its files."""


def _refused(path: Path, exc: OSError) -> LinkRefused:
    return LinkRefused(
        errno.ELOOP,
        f"{path} is a link or not a folder; runfix never follows links in {RUNFIX}/ "
        f"(remove it to let runfix keep its files there) [{exc.strerror}]",
    )


@contextlib.contextmanager
def opened_folder(folder: Path, *parts: str, create: bool = False) -> Iterator[int]:
    """A descriptor of `folder/parts…`, each part opened without following a link (made,
    0700, when `create`); LinkRefused where a part is a link; FileNotFoundError where it is
    missing."""
    if not _WITH_FDS:  # no dir_fd (Windows): the same checks, by path
        for i in range(1, len(parts) + 1):
            at = folder.joinpath(*parts[:i])
            if not os.path.lexists(at):
                if not create:
                    raise FileNotFoundError(errno.ENOENT, "no such folder", str(at))
                at.mkdir(mode=0o700)
                if i == 1 and parts[0] == RUNFIX:
                    (at / ".gitignore").write_bytes(IGNORE_ALL)
            if at.is_symlink() or not at.is_dir():
                raise _refused(at, OSError(errno.ELOOP, "not a folder"))
        yield -1
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for i, part in enumerate(parts):
            try:
                inner = os.open(part, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    inner = os.open(part, _DIR, dir_fd=fd)
                except OSError as exc:
                    raise _refused(folder.joinpath(*parts[: i + 1]), exc) from None
            except OSError as exc:
                raise _refused(folder.joinpath(*parts[: i + 1]), exc) from None
            os.close(fd)
            fd = inner
            if create and i == 0 and part == RUNFIX:
                _ignored(fd)
        yield fd
    finally:
        os.close(fd)


IGNORE_ALL = b"# runfix's own files (its record, stored outputs): not the project's\n*\n"


def _ignored(fd: int) -> None:
    """`.runfix/.gitignore` saying `*` (as pytest, mypy and ruff write in their caches): the
    folder is never the repository's to track. Made once, never over what is there."""
    try:
        out = os.open(
            ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=fd
        )
    except OSError:
        return  # there already (or not ours to write): left as it is
    try:
        os.write(out, IGNORE_ALL)
    finally:
        os.close(out)


def regular(fd: int, name: str, where: Path) -> os.stat_result | None:
    """The file `name` in the folder `fd` if it is a regular file (a link is not)."""
    try:
        if fd >= 0:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        else:
            info = os.lstat(where / name)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def write_new(fd: int, where: Path, name: str, data: bytes) -> None:
    """Create `name` (it must not exist, not even as a dangling link) holding `data`."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
    out = os.open(name, flags, 0o644, dir_fd=fd) if fd >= 0 else os.open(where / name, flags, 0o644)
    with os.fdopen(out, "wb") as f:
        f.write(data)


FileId = tuple[int, int]
"""A file's identity: its device and inode."""


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file, never through a link, never waiting on a FIFO or a
    device, at most `limit` bytes (OSError otherwise, saying which)."""
    return read_regular_file(path, limit)[0]


def read_regular_file(path: Path, limit: int | None = None) -> tuple[bytes, FileId]:
    """`read_regular`, and which file it read (to write that file, and only it, later)."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        found = _checked(f.fileno(), path, limit)
        data = f.read() if limit is None else f.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise OSError(errno.EFBIG, f"{path} grew past the {limit:,} bytes read")
    return data, (found.st_dev, found.st_ino)


def _checked(fd: int, path: Path, limit: int | None) -> os.stat_result:
    found = os.fstat(fd)
    if not stat.S_ISREG(found.st_mode):
        raise OSError(errno.EINVAL, f"{path} is not a regular file")
    if limit is not None and found.st_size > limit:
        raise OSError(errno.EFBIG, f"{path} is {found.st_size:,} bytes, over the {limit:,} read")
    return found


def rewrite_regular(
    path: Path, read_as: FileId | None, limit: int, change: Callable[[bytes], bytes | None]
) -> bool:
    """Write `change(its bytes)` into the regular file at `path` — the file read as
    `read_as`, and only it: not through a link, not a FIFO, not a file with other names
    (a hard link out of the folder), not one swapped in since it was read. Read and
    written through one descriptor, so nothing can be swapped in between. False where
    `change` gives None (the file no longer says what the change was made against), or
    the file is another; OSError where it cannot be read or written."""
    fd = os.open(path, os.O_RDWR | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "r+b") as f:
        found = _checked(f.fileno(), path, limit)
        if found.st_nlink != 1 or (read_as is not None and read_as != (found.st_dev, found.st_ino)):
            return False
        data = f.read(limit + 1)
        changed = change(data) if len(data) <= limit else None
        if changed is None:
            return False
        f.seek(0)
        f.truncate()
        f.write(changed)
    return True


def stored_output(folder: Path | None, recorded: str | Path | None) -> Path | None:
    """The stored output a record or a view names, if it is one runfix stored: a name
    runfix gives, directly in the folder's `.runfix/outputs/`, a regular file reached
    without a link. Anything else (`/proc/self/environ`, `../x`, a link) is None."""
    if folder is None or not recorded:
        return None
    path = Path(recorded)
    if not STORED_NAME.fullmatch(path.name):
        return None
    home = folder / RUNFIX / OUTPUTS
    if len(path.parts) > 1 and Path(os.path.normpath(path.parent)) != home:
        return None
    try:
        with opened_folder(folder, RUNFIX, OUTPUTS) as fd:
            if regular(fd, path.name, home) is None:
                return None
    except OSError:
        return None
    return home / path.name


def safe_target(target: Path) -> str | None:
    """Why runfix must not write `target` (a link, or not a regular file), else None."""
    if target.is_symlink():
        return f"{target} is a symbolic link; runfix does not write through links"
    if target.exists() and not target.is_file():
        return f"{target} is not a regular file"
    return None


def module_names(folder: Path, limit: int = 5000) -> frozenset[str]:
    """The names the folder's own modules are imported by: its top-level `.py` files and
    its folders (packages), the first `limit` entries read. Nothing where it cannot be
    listed."""
    names: set[str] = set()
    try:
        with os.scandir(folder) as entries:
            for entry in itertools.islice(entries, limit):
                name = entry.name
                if name.endswith(".py") and name[:-3].isidentifier():
                    names.add(name[:-3])
                elif name.isidentifier() and entry.is_dir(follow_symlinks=False):
                    names.add(name)
    except OSError:
        pass
    return frozenset(names)
