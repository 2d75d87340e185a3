"""Tests are a fix's check, never its target: the folder's test files as they were before a
candidate ran, and put back if it changed them.

The runtime guard stops a candidate's write to a test file in the test run's process
(`executor/_kernel_guard.py`); this is what holds whatever wrote it (a process the guard
did not see, a C extension): every test file and `conftest.py` of the folder, and every
file under a `tests/` (or `test/`) folder, hashed before each run of a candidate and after.
A file changed, removed or added is put back as it was, and the candidate is refused with
what it did.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from executor.files import replace_file

KEPT_BYTES = 4_000_000
"""A test file larger than this is hashed, not kept: changed, it cannot be put back (said)."""
_SKIPPED = {
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "node_modules", ".runfix",
    "__pypackages__", "site-packages", ".mypy_cache", ".ruff_cache", ".pytest_cache",
}  # fmt: skip
_TEST_FOLDERS = {"tests", "test"}
MAX_FILES = 20_000


def is_kept(relative: Path) -> bool:
    """A test file, a conftest, or anything in a tests folder (its data, its caches)."""
    name = relative.name
    if any(part in _TEST_FOLDERS for part in relative.parts[:-1]):
        return True
    return (
        name == "conftest.py"
        or (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
    )


@dataclass
class KeptTests:
    """The folder's test files at one moment: each one's hash, and its bytes to put back."""

    folder: Path
    files: dict[Path, tuple[str, bytes | None]] = field(default_factory=dict)

    @classmethod
    def read(cls, folder: Path) -> KeptTests:
        kept = cls(folder)
        for path in _walk(folder):
            read = _read(path)
            if read is not None:
                kept.files[path] = read
        return kept

    def changed(self) -> list[str]:
        """What changed since (each said in words), everything put back that can be; []:
        nothing changed."""
        now = {path for path in _walk(self.folder)}
        said: list[str] = []
        for path, (digest, data) in self.files.items():
            current = _read(path) if path in now else None
            if current is not None and current[0] == digest:
                continue
            what = "removed" if current is None else "changed"
            said.append(f"{self._shown(path)} {what}{self._put_back(path, data)}")
        for path in sorted(now - set(self.files)):
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    path.unlink()
                    said.append(f"{self._shown(path)} added (removed again)")
                    continue
            said.append(f"{self._shown(path)} added")
        return said

    def _put_back(self, path: Path, data: bytes | None) -> str:
        if data is None:
            return " (too large to have been kept: not put back)"
        try:
            if path.is_symlink():
                path.unlink()
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(path, data)
        except OSError as exc:
            return f" (could not be put back: {exc.strerror})"
        return " (put back)"

    def _shown(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()


def _read(path: Path) -> tuple[str, bytes | None] | None:
    """A regular file's hash, and its bytes when small enough to keep (None: not a file)."""
    try:
        with path.open("rb") as f:
            info = os.fstat(f.fileno())
            digest = hashlib.sha256()
            data = f.read(KEPT_BYTES + 1)
            digest.update(data)
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    size_ok = len(data) <= KEPT_BYTES and info.st_size <= KEPT_BYTES
    return digest.hexdigest(), data if size_ok else None


def _walk(folder: Path) -> list[Path]:
    """The folder's test files (links not followed), its environments and caches left out."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in _SKIPPED and not d.endswith(".egg-info")]
        here = Path(root)
        for name in names:
            path = here / name
            if is_kept(path.relative_to(folder)) and not path.is_symlink():
                found.append(path)
                if len(found) >= MAX_FILES:
                    return found
    return found
