"""One form for each document's URI inside runfix, and the client's own form on the wire.

Clients percent-encode file URIs each their own way (VS Code: `file:///c%3A/my%20notes.py`;
Neovim leaves more characters as they are), and pygls keys its documents by the decoded
URI: a command naming a document the way the client does would not find it, and
diagnostics would go out under a URI the client does not know. So every `file:` URI that
comes in (`uri`, `rootUri`, anywhere in a message) is turned into one canonical form (the
path, encoded as `Path.as_uri` does), the client's own form is remembered, and every
canonical URI that goes out is written back in the client's form.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pygls.uris import to_fs_path

KEYS = ("uri", "rootUri")
"""The message fields a client puts document and folder URIs in."""


@functools.lru_cache(maxsize=4096)
def canonical(uri: str) -> str:
    """The form runfix uses for a `file:` URI (others are left as they are). Kept per URI:
    every request names its document, and the form depends on the URI's text alone."""
    if not uri.startswith("file:"):
        return uri
    try:
        path = to_fs_path(uri)
        return Path(path).as_uri() if path else uri
    except (ValueError, TypeError):
        return uri


class ClientUris:
    """The client's form of each canonical URI it used that differs from it."""

    def __init__(self) -> None:
        self.theirs: dict[str, str] = {}

    def incoming(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A JSON object of a message from the client, its URIs in canonical form."""
        for key in KEYS:
            value = obj.get(key)
            if isinstance(value, str) and value.startswith("file:"):
                ours = canonical(value)
                if ours != value:
                    self.theirs[ours] = value
                    obj[key] = ours
        return obj

    def outgoing(self, data: Any) -> Any:
        """JSON-ready data for the client, each canonical URI it knows in its own form."""
        if not self.theirs:
            return data
        return self._back(data)

    def _back(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.theirs.get(data, data)
        if isinstance(data, list):
            return [self._back(item) for item in data]
        if isinstance(data, dict):
            return {self.theirs.get(k, k): self._back(v) for k, v in data.items()}
        return data
