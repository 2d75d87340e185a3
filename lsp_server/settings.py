"""Raw options (camelCase, all optional, from anywhere) → resolved settings (typed, defaults).

Layers, lowest first: defaults → `[tool.runfix]` in the folder's
`pyproject.toml` → `initializationOptions` → `workspace/configuration`
(section `runfix`). A bad value is one clear problem message and the value
from the layer below, never a crash.
"""

from __future__ import annotations

import re
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
OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-5-mini"


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
    model_base_url: str | None = None
    """An OpenAI-compatible endpoint; None: `OPENAI_BASE_URL`, else OpenAI's."""
    model_name: str | None = None
    """None: `RUNFIX_MODEL`, else a small current OpenAI model."""
    model_api_key_env: str = "OPENAI_API_KEY"
    """The environment variable holding the key (the key itself is never a setting)."""
    model_timeout: float = 60.0
    """Seconds one model request may take, retries included."""
    model_temperature: float | None = None
    """None: the endpoint's default."""
    model_stream: bool = True
    fix_max_attempts: int = 3
    auto_run: bool = False
    """Run generated code right after inserting it (it is still shown and scanned)."""
    prompt_markers: tuple[str, ...] = ("ai:",)
    context_budget: int = 12_000
    """Characters of document and kernel state sent to the model with a request."""
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


def _optional_text(what: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"expected {what}")
        return value

    return check


def _env_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ValueError("expected the name of an environment variable (not the key itself)")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _temperature(value: Any) -> float | None:
    return None if value is None else _number(0)(value)


def _markers(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(m, str) and m.strip() for m in value)
    ):
        raise ValueError('expected a list of prompt markers, e.g. ["ai:"]')
    return tuple(m.strip() for m in value)


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
    "model.baseUrl": ("model_base_url", _optional_text("a URL")),
    "model.name": ("model_name", _optional_text("a model name")),
    "model.apiKeyEnv": ("model_api_key_env", _env_name),
    "model.timeout": ("model_timeout", _number(1)),
    "model.temperature": ("model_temperature", _temperature),
    "model.stream": ("model_stream", _boolean),
    "fix.maxAttempts": ("fix_max_attempts", _integer(1)),
    "autoRun": ("auto_run", _boolean),
    "promptMarkers": ("prompt_markers", _markers),
    "contextBudget": ("context_budget", _integer(1000)),
}
_NO_ECHO = {"model.apiKeyEnv"}  # someone may paste the key itself here: never repeat it
_GROUPS = {key.split(".")[0] for key in _KEYS if "." in key}
KNOWN_KEYS = tuple(_KEYS)


def section(raw: Any) -> Mapping[str, Any]:
    """The runfix options in a raw value: `{"runfix": {...}}` or the options themselves."""
    if not isinstance(raw, Mapping):
        return {}
    inner = raw.get("runfix")
    return inner if isinstance(inner, Mapping) else raw


def _flatten(raw: Mapping[str, Any]) -> dict[str, Any]:
    """`{"model": {"name": x}}` and `{"model.name": x}` both → `{"model.name": x}`."""
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _GROUPS and isinstance(value, Mapping):
            flat.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    return flat


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
        for key, value in _flatten(raw).items():
            if key not in _KEYS:
                problems.append(f"{source}: unknown setting {key!r}")
                continue
            name, check = _KEYS[key]
            try:
                changes[name] = check(value)
            except ValueError as exc:
                shown = "<hidden>" if key in _NO_ECHO else repr(value)
                problems.append(f"{source}: {key} = {shown}: {exc}; using the default")
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
