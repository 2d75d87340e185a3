"""Writing a file whole: a new file beside it, renamed over it."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def replace_file(target: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `target` in one step: readers see the old file or the new one, never half of
    one; a link at `target` is replaced, never written through."""
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
