"""Which folders may run their own code: the user's decisions, kept where a repository
cannot write them.

A folder's interpreter (`.venv/bin/python`), its `.pth` files and anything on its
path run with the user's rights once a kernel starts there, so nothing starts in
a folder until its user has said how: trust it (its own interpreter and
settings), run it in the sandbox (the Docker executor, whatever the settings
say), or run it on runfix's own Python (not the folder's interpreter). The
decision is kept per resolved path in the user's state folder
(`$XDG_STATE_HOME/runfix/trust.json`, 0600 in a 0700 folder) and covers the
folders below it, as VS Code's Workspace Trust does. "Don't run" is not kept:
the next run asks again.

Nothing in a repository, its project file included, can write this file. The
same folder also holds a per-machine secret, with which runfix marks the run
records it writes (`owner_mark`): a record a repository ships is not this
machine's and is never shown as results.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

from executor.files import replace_file


class Choice(str, enum.Enum):
    TRUST = "trust"
    """The folder's own interpreter and settings."""
    SANDBOX = "sandbox"
    """The Docker executor, whatever the settings say."""
    OWN = "own"
    """runfix's own Python, not the folder's interpreter."""


def state_folder() -> Path:
    """runfix's folder in the user's state folder (`$XDG_STATE_HOME/runfix`)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "runfix"


def _private_folder() -> Path:
    folder = state_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


class TrustFileError(OSError):
    """The decisions' file exists but cannot be read: nothing is written over it."""


def resolved(folder: Path) -> Path:
    """The folder as decisions name it: absolute, links resolved."""
    return Path(os.path.realpath(folder))


RACY_NS = 2_000_000_000
"""How recent a change of the decisions' file is read again at every look (git's racy
rule; 2 s covers the coarsest file times, FAT's)."""


class TrustStore:
    """The decisions, read from disk whenever it changed (`runfix trust` in a terminal
    counts for a running server at its next run)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_folder() / "trust.json"
        self._seen: tuple[int, ...] | None = None
        self._racy = False
        """The file changed within `RACY_NS` of when it was read: read it again next time."""
        self._folders: dict[str, Choice] = {}
        self._decided: dict[Path, tuple[tuple[int, int], tuple[Path, Choice] | None, object]] = {}
        """Each folder's decision as last derived: the folder's identity then (device, inode,
        links followed), the decision, and the decisions it was read from."""
        self.problem: str | None = None
        """Why the file could not be read (then nothing is trusted, and nothing written)."""

    def _load(self) -> dict[str, Choice]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._seen, self._folders, self.problem = None, {}, None
            return self._folders
        except OSError as exc:
            self._seen, self._folders = None, {}
            self.problem = f"{self.path} cannot be read ({exc.strerror})"
            return self._folders
        seen = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
        if seen == self._seen and not self._racy:
            return self._folders
        read_at = time.time_ns()
        folders: dict[str, Choice] = {}
        self.problem = None
        try:
            raw = json.loads(self.path.read_bytes())
            for name, value in dict(raw.get("folders", {})).items():
                if isinstance(name, str) and value in Choice._value2member_map_:
                    folders[name] = Choice(value)
        except OSError as exc:
            folders, self.problem = {}, f"{self.path} cannot be read ({exc.strerror})"
        except (ValueError, TypeError, AttributeError) as exc:
            # unreadable: nothing is trusted, and nothing is written over it (the decisions
            # in it are the user's: `runfix trust` says so rather than drop them)
            folders, self.problem = {}, f"{self.path} is not runfix's decisions ({exc})"
        self._seen, self._folders = seen, folders
        # git's racy rule: a file written in the same clock tick as it was read can change
        # again unseen (the same times, the same size): until it is older, read it each time
        self._racy = read_at - max(info.st_mtime_ns, info.st_ctime_ns) < RACY_NS
        return folders

    def _writable(self) -> dict[str, Choice]:
        """The decisions, to change: TrustFileError when the file cannot be read (writing
        would drop the decisions it holds)."""
        folders = dict(self._load())
        if self.problem is not None:
            raise TrustFileError(
                f"{self.problem}: nothing was changed (fix the file or remove it, then "
                "decide again)"
            )
        return folders

    def _save(self, folders: dict[str, Choice]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"version": 1, "folders": {k: v.value for k, v in sorted(folders.items())}}
        replace_file(self.path, json.dumps(body, indent=1).encode(), 0o600)
        self._seen = None

    def decision(self, folder: Path) -> tuple[Path, Choice] | None:
        """The decision that covers `folder` (its own, else its nearest parent's). Derived
        again only when the decisions changed or `folder` is another folder than it was (a
        link changed, removed, made again): one `stat` a run, not a `realpath` and a walk up."""
        folders = self._load()
        if not folders:
            return None
        try:
            found = os.stat(folder)
            identity: tuple[int, int] | None = (found.st_dev, found.st_ino)
        except OSError:
            identity = None  # (not there: derived each time, as a parent's may cover it)
        kept = self._decided.get(folder)
        if kept is not None and kept[0] == identity and kept[2] is folders:
            return kept[1]
        here, decided = resolved(folder), None
        for candidate in (here, *here.parents):
            if (choice := folders.get(str(candidate))) is not None:
                decided = candidate, choice
                break
        if identity is not None:
            self._decided[folder] = (identity, decided, folders)
        return decided

    def decide(self, folder: Path, choice: Choice) -> Path:
        folders = self._writable()
        key = resolved(folder)
        folders[str(key)] = choice
        self._save(folders)
        return key

    def revoke(self, folder: Path) -> list[Path]:
        """Forget the folder's own decision; which (none: it had none of its own — a
        parent's may still cover it, and is not revoked for it)."""
        folders = self._writable()
        here = resolved(folder)
        if folders.pop(str(here), None) is None:
            return []
        self._save(folders)
        return [here]

    def entries(self) -> Iterator[tuple[Path, Choice]]:
        for name, choice in sorted(self._load().items()):
            yield Path(name), choice


def machine_secret() -> bytes:
    """A random secret of this user on this machine, made once (0600)."""
    path = state_folder() / "machine-key"
    with contextlib.suppress(OSError):
        data = path.read_bytes()
        if len(data) >= 32:
            return data
    _private_folder()
    data = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another runfix made it first
        return path.read_bytes()
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return data


def owner_mark(folder: Path) -> str:
    """What marks a record as written by runfix on this machine for this folder: a record
    copied from elsewhere (a repository, another folder) carries another mark."""
    key = machine_secret()
    return hmac.new(key, str(resolved(folder)).encode(), hashlib.sha256).hexdigest()
