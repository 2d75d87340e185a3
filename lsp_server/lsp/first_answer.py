"""`initialize` answered before pygls and lsprotocol are imported, from the answer the same
server gave the same client before.

Building the server imports lsprotocol (~600 classes) and pygls: ~0.6 s of a ~1.1 s
start, all before `initialize` could be answered, and an editor waits for that answer
before it sends anything. The answer depends only on the server's code (its features,
commands and options) and on the client's capabilities, so it is kept, keyed by both, in
the user's cache folder: a server that finds its key there answers at once, then builds
itself and handles `initialize` as always (its own answer is then compared with the one
sent, and kept instead if they differ). Anything else — another client, another version,
a changed source file, no cache — is answered the usual way, and remembered.

Only the user's cache is read (never a folder's). No pygls or lsprotocol is imported here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.files import replace_file
from lsp_server import __version__
from lsp_server.text.frames import framed, response_body

log = logging.getLogger(__name__)

PACKAGES = ("pygls", "lsprotocol")


def cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "runfix" / "initialize"


def _code_signature() -> str:
    """What the answer is made from on the server's side: runfix's version and its source
    files (name, size, modification time), and the versions of pygls and lsprotocol."""
    root = Path(__file__).resolve().parents[1]
    parts = [__version__]
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        parts.append(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}")
    for name in PACKAGES:
        parts.append(f"{name}:{_distribution_version(name)}")
    return "\n".join(parts)


def _distribution_version(name: str) -> str:
    """The installed version, read from its metadata folder's name (no import, no
    importlib.metadata scan: ~10 ms)."""
    import sys

    for entry in sys.path:
        folder = Path(entry or ".")
        try:
            found = sorted(folder.glob(f"{name}-*.dist-info"))
        except OSError:
            continue
        if found:
            return found[0].name.removesuffix(".dist-info").partition("-")[2]
    return "?"


def key(params: Any) -> str | None:
    """The cache key of an `initialize` request's params (None: not one to answer early)."""
    if not isinstance(params, dict):
        return None
    capabilities = json.dumps(params.get("capabilities"), sort_keys=True)
    digest = hashlib.sha256(f"{_code_signature()}\n{capabilities}".encode())
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class First:
    """The client's `initialize`: its id, its key, and the answer known for it (JSON)."""

    msg_id: int | str
    key: str
    known: str | None

    def response(self) -> bytes:
        """The known answer as a framed response."""
        assert self.known is not None
        return framed(response_body(self.msg_id, self.known))


def first_initialize(first: bytes) -> First | None:
    """The first message, if it is `initialize`, with the answer known for it, if any."""
    try:
        message = json.loads(first)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    msg_id = message.get("id")
    cache_key = key(message.get("params"))
    if cache_key is None or not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
        return None
    try:
        known: str | None = (cache_folder() / f"{cache_key}.json").read_text(encoding="utf-8")
        json.loads(known or "")
    except (OSError, ValueError):
        known = None
    return First(msg_id, cache_key, known)


def remember(cache_key: str, result: Any, sent: str | None = None) -> None:
    """Keep the server's own answer (JSON-ready) for next time, unless it is what was
    `sent` already."""
    text = json.dumps(result, separators=(",", ":"), sort_keys=True)
    if sent is not None and json.loads(sent) == json.loads(text):
        return
    if sent is not None:
        log.warning("the early answer to initialize differed from the server's; keeping its own")
    try:
        folder = cache_folder()
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(folder / f"{cache_key}.json", text.encode())
    except OSError as exc:
        log.debug("initialize's answer not kept: %s", exc)
