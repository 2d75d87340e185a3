"""Raw options (camelCase, all optional, from anywhere) → resolved settings (typed, defaults).

Layers, lowest first: defaults → `[tool.runfix]` in the folder's
`pyproject.toml` → `initializationOptions` → `workspace/configuration`
(section `runfix`). A bad value is one clear problem message and the value
from the layer below, never a crash.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RESULTS_MODES = ("inlay", "diagnostics", "both")


@dataclass(frozen=True)
class Settings:
    python: str | None = None
    """The interpreter for the kernel; None: .venv/venv → VIRTUAL_ENV → runfix's own."""
    timeout: float = 120.0
    """Seconds a run may take before it is interrupted."""
    output_limit: int = 100_000
    """Characters of output kept per run."""
    results: str | None = None
    """inlay | diagnostics | both; None: inlay when the client supports inlay hints."""
    interrupt_grace: float = 3.0
    """Seconds an interrupted kernel gets to stop before it is restarted."""
    problems: tuple[str, ...] = field(default=(), compare=False)


def _number(minimum: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
            raise ValueError(f"expected a number ≥ {minimum:g}")
        return float(value)

    return check


def _integer(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"expected a whole number ≥ {minimum}")
        return value

    return check


def _python(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a path to a Python interpreter or a virtual environment")
    return value


def _results(value: Any) -> str | None:
    if value is None:
        return None
    if value not in RESULTS_MODES:
        raise ValueError(f"expected one of {', '.join(RESULTS_MODES)}")
    return str(value)


# raw key → (Settings field, check)
_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "python": ("python", _python),
    "timeout": ("timeout", _number(0.1)),
    "outputLimit": ("output_limit", _integer(100)),
    "results": ("results", _results),
    "interruptGrace": ("interrupt_grace", _number(0.1)),
}
KNOWN_KEYS = tuple(_KEYS)


def section(raw: Any) -> Mapping[str, Any]:
    """The runfix options in a raw value: `{"runfix": {...}}` or the options themselves."""
    if not isinstance(raw, Mapping):
        return {}
    inner = raw.get("runfix")
    return inner if isinstance(inner, Mapping) else raw


def resolve(*layers: tuple[str, Any]) -> Settings:
    """Apply `(source name, raw options)` layers, lowest first."""
    settings = Settings()
    problems: list[str] = []
    for source, raw in layers:
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            problems.append(f"{source}: expected an object of settings, got {type(raw).__name__}")
            continue
        changes: dict[str, Any] = {}
        for key, value in raw.items():
            if key not in _KEYS:
                problems.append(f"{source}: unknown setting {key!r}")
                continue
            name, check = _KEYS[key]
            try:
                changes[name] = check(value)
            except ValueError as exc:
                problems.append(f"{source}: {key} = {value!r}: {exc}; using the default")
        settings = replace(settings, **changes)
    return replace(settings, problems=tuple(problems))


def read_pyproject(folder: Path) -> tuple[Mapping[str, Any] | None, str | None]:
    """`[tool.runfix]` of the folder's pyproject.toml, and a problem if it cannot be read."""
    path = folder / "pyproject.toml"
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return None, f"{path}: {exc}"
    table = data.get("tool", {}).get("runfix")
    return (table if isinstance(table, Mapping) else None), None
