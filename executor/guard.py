"""What the user allowed model-written code to do for good, per folder ("Allow always" when
runfix's runtime guard stopped it: `executor/_kernel_guard.py`), kept in the user's state
folder (`$XDG_STATE_HOME/runfix/guard.json`, 0600), never in the repository: a project
cannot loosen the guard."""

from __future__ import annotations

import json
from pathlib import Path

from executor.files import replace_file
from executor.trust import resolved, state_folder


class Allowances:
    """The patterns (`write:/data/out/*`, `network:api.example.com:443`) each folder's user
    allowed always; read from disk whenever asked (a second editor's "always" counts)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or state_folder() / "guard.json"

    def _read(self) -> dict[str, list[str]]:
        try:
            raw = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}
        folders = raw.get("folders") if isinstance(raw, dict) else None
        if not isinstance(folders, dict):
            return {}
        return {
            str(name): [p for p in patterns if isinstance(p, str)]
            for name, patterns in folders.items()
            if isinstance(patterns, list)
        }

    def of(self, folder: Path) -> tuple[str, ...]:
        """What the folder's user allowed always (a parent folder's allowances too)."""
        folders = self._read()
        here = resolved(folder)
        found: list[str] = []
        for candidate in (here, *here.parents):
            found += folders.get(str(candidate), [])
        return tuple(dict.fromkeys(found))

    def allow(self, folder: Path, patterns: tuple[str, ...]) -> None:
        folders = self._read()
        key = str(resolved(folder))
        folders[key] = list(dict.fromkeys([*folders.get(key, []), *patterns]))
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        body = {"version": 1, "folders": dict(sorted(folders.items()))}
        replace_file(self.path, json.dumps(body, indent=1).encode(), 0o600)
