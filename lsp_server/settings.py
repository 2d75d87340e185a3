"""Raw options (camelCase, all optional, from anywhere) → resolved settings (typed, defaults).

Layers, lowest first: defaults → `[tool.runfix]` in the folder's
`pyproject.toml` → `initializationOptions` → `workspace/configuration`
(section `runfix`). A bad value is one clear problem message and the value
from the layer below, never a crash.

A project file comes with the repository, not from the user, so it cannot set
what would send a secret elsewhere or loosen a control (`USER_ONLY`): a cloned
repository must not point the model, with your key, at its own server.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from executor.configs import DockerConfig, RemoteConfig
from executor.kinds import KINDS, LOCAL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RESULTS_MODES = ("inlay", "diagnostics", "both")
EXECUTORS = tuple(KINDS)
OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-5-mini"


DEFAULT_CANDIDATES = 4
"""`model.candidates` where neither the setting nor RUNFIX_MODEL_CANDIDATES says (chosen from
`scripts/bench_fix_live.py`'s figures: docs/model.md)."""
MOST_CANDIDATES = 16
"""Answers asked at once at most, whatever `model.candidates` says (each is a slot the
endpoint fills and a jail the kernel forks)."""


@dataclass(frozen=True)
class Settings:
    """runfix's settings for one folder, resolved: typed, checked, with their defaults."""

    python: str | None = None
    """The interpreter for the kernel; None: .venv/venv → VIRTUAL_ENV → runfix's own."""
    timeout: float = 120.0
    """Seconds a run may take before it is interrupted."""
    output_limit: int = 100_000
    """Characters of output kept per run."""
    outputs_run_mb: float = 20.0
    """Megabytes of rich outputs (images, HTML, …) stored per run; past it (or at 0), text only."""
    outputs_folder_mb: float = 200.0
    """Megabytes of rich outputs kept in a folder's `.runfix/outputs` (oldest go first)."""
    history_max_runs: int = 10_000
    """Runs kept in a folder's run record (`.runfix/runs.db`; oldest pruned); 0: none kept."""
    results: str | None = None
    """inlay | diagnostics | both; None: inlay when the client supports inlay hints."""
    interrupt_grace: float = 3.0
    """Seconds an interrupted kernel gets to stop before it is restarted."""
    kernel_start_timeout: float = 60.0
    """Seconds a kernel (or its container) may take to start."""
    input_timeout: float = 300.0
    """Seconds the code's `input()` waits for the user's answer before its run is cancelled
    (the folder's other runs wait behind it)."""
    transport: str = "auto"
    """How the server talks to a local kernel: ipc | tcp | auto (IPC where ZeroMQ has it)."""
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
    model_max_tokens: int | None = None
    """The most tokens one answer may take (a request asks for less when the code asked
    for is short): an unbounded small model can ramble for a minute. None:
    `RUNFIX_MODEL_MAX_TOKENS`, else 1024."""
    model_seed: int | None = None
    """Sampling seed, for endpoints that take one (None: the endpoint's)."""
    fix_max_attempts: int = 3
    model_candidates: int | None = None
    """Candidates asked at once in a fix's first attempt, each run in its own jail and
    chosen by what they do (1: one answer an attempt; None: RUNFIX_MODEL_CANDIDATES, else
    `DEFAULT_CANDIDATES`; docs/model.md has the figures)."""
    fix_check_dependents: bool = True
    """A fix that ran clean is checked against the cells that depend on it, in a throwaway
    kernel (`fixcheck`), before it is offered."""
    fix_check_budget: float | None = None
    """Seconds the check may take once its kernel started; None: twice the recorded time of
    the cells it runs (at least 2 s)."""
    auto_run: bool = False
    """Run generated code right after inserting it (it is still shown and scanned)."""
    guard_agents: bool = False
    """Coding agents' code (`runfix mcp`) runs under the runtime guard, as model-written
    code does: no writes outside the folder or to its tests, no processes, no network."""
    completion: bool = True
    """Completion, hover and signature help from what the kernel holds (`live`)."""
    prompt_markers: tuple[str, ...] = ("ai:",)
    kernels: tuple[tuple[str, str], ...] = ()
    """Another language's kernel by kernelspec name, where several run it (`{"r": "ir"}`:
    language id → kernelspec name); a language not named runs in the kernelspec whose
    `language` is its (named as the language first, then by name)."""
    context_budget: int = 12_000
    """Characters of document and kernel state sent to the model with a request."""
    secret_extra_names: tuple[str, ...] = ()
    """More names whose values are secrets, hidden from the model as `api_key`, `password`
    or `Authorization` are (`executor.redact`): variables, mapping keys, environment
    variables (`["ssn", "patient_id"]`). Nothing the rule hides can be shown again."""
    executor: str = LOCAL.name
    """kernel: a local Jupyter kernel; docker: a kernel in a locked-down container;
    remote: a kernel on a Jupyter Server or Enterprise Gateway (`remote.*`)."""
    docker: DockerConfig = field(default_factory=DockerConfig)
    """The sandbox's settings (`docker.*`), documented on `DockerConfig`."""
    remote: RemoteConfig = field(default_factory=RemoteConfig)
    """The remote server's settings (`remote.*`), documented on `RemoteConfig`; never the
    token itself."""
    problems: tuple[str, ...] = field(default=(), compare=False)

    def candidates(self, environ: Mapping[str, str] | None = None) -> int:
        """How many answers a fix's first attempt and a Generate ask at once: the setting,
        else the environment's RUNFIX_MODEL_CANDIDATES (a terminal's way, and the tests'
        for scripted flows), else `DEFAULT_CANDIDATES`; at most `MOST_CANDIDATES`."""
        env = os.environ if environ is None else environ
        wanted = self.model_candidates
        if wanted is None:
            raw = env.get("RUNFIX_MODEL_CANDIDATES", "").strip()
            wanted = int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_CANDIDATES
        return min(wanted, MOST_CANDIDATES)

    def secret_names(self) -> set[str]:
        """Environment variables that hold secrets (model keys, the remote server's token):
        never passed to a kernel or an installer."""
        names = {"OPENAI_API_KEY", self.model_api_key_env}
        token = self.remote.token_env
        return names | ({token} if token else set())


def _optional_number(minimum: float) -> Callable[[Any], float | None]:
    number = _number(minimum)

    def check(value: Any) -> float | None:
        return None if value is None else number(value)

    return check


def _number(minimum: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < minimum
        ):
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


def _optional_integer(value: Any) -> int | None:
    return None if value is None else _integer(0)(value)


def _optional_integer_from(minimum: int) -> Callable[[Any], int | None]:
    def check(value: Any) -> int | None:
        return None if value is None else _integer(minimum)(value)

    return check


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


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(n, str) and re.fullmatch(r"[A-Za-z_][\w.-]*", n) for n in value
    ):
        raise ValueError('expected a list of names, e.g. ["ssn", "patient_id"]')
    return tuple(value)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return str(value)

    return check


def _url(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.match(r"https?://[^/\s]+", value.strip()):
        raise ValueError('expected an http(s) URL, e.g. "http://127.0.0.1:8888"')
    return value.strip().rstrip("/")


def _optional_env_name(value: Any) -> str | None:
    return None if value is None or value == "" else _env_name(value)


def _kernel_name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", value):
        raise ValueError('expected a kernel spec name, e.g. "python3"')
    return value


def _kernels(value: Any) -> tuple[tuple[str, str], ...]:
    from lsp_server.text.languages import BY_ID

    if not isinstance(value, Mapping):
        raise ValueError('expected an object of language ids to kernel spec names ({"r": "ir"})')
    out = []
    for language, name in value.items():
        known = BY_ID.get(str(language).lower())
        if known is None:
            raise ValueError(f"{language!r} is not a language runfix runs")
        if known.python:
            raise ValueError("Python runs in the folder's interpreter (the `python` setting)")
        out.append((known.id, _kernel_name(name)))
    return tuple(sorted(out))


def _pairs(what: str, *, env_names: bool) -> Callable[[Any], tuple[tuple[str, str], ...]]:
    name = r"[A-Za-z_][A-Za-z0-9_]*" if env_names else r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"

    def check(value: Any) -> tuple[tuple[str, str], ...]:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and re.fullmatch(name, k) and isinstance(v, str)
            for k, v in value.items()
        ):
            raise ValueError(f"expected an object of {what} names to text values")
        return tuple(sorted(value.items()))

    return check


_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _size(minimum: str) -> Callable[[Any], str]:
    """A Docker size: a number of bytes with an optional unit (b, k, m, g)."""

    def parse(text: str) -> float | None:
        match = re.fullmatch(r"(\d+(?:\.\d+)?)([bkmg]?)", text.strip().lower())
        return float(match[1]) * _UNITS[match[2]] if match else None

    def check(value: Any) -> str:
        size = parse(value) if isinstance(value, str) else None
        if size is None or size < (parse(minimum) or 0):
            raise ValueError(f'expected a size of at least {minimum}, like "512m" or "2g"')
        return str(value).strip().lower()

    return check


def _image(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:/@-]*", value):
        raise ValueError('expected an image name, e.g. "runfix-sandbox:latest"')
    return value


def _network(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        raise ValueError('expected a Docker network name, e.g. "none" or "bridge"')
    return value


def _user(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.fullmatch(r"\d+(:\d+)?", value):
        raise ValueError('expected a numeric "uid" or "uid:gid"')
    if value.split(":")[0] == "0":
        raise ValueError("the sandbox never runs as root")
    return value


def _folder(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not Path(value).expanduser().is_absolute():
        raise ValueError("expected an absolute path to a folder")
    return str(Path(value).expanduser())


def _results(value: Any) -> str | None:
    if value is None:
        return None
    if value not in RESULTS_MODES:
        raise ValueError(f"expected one of {', '.join(RESULTS_MODES)}")
    return str(value)


# raw key → (Settings field, check); an executor's options (`docker.image`) are the fields of
# its config (`Settings.docker.image`), checked by `_SECTION_CHECKS`.
_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "python": ("python", _python),
    "timeout": ("timeout", _number(0.1)),
    "outputLimit": ("output_limit", _integer(100)),
    "outputs.maxRunMB": ("outputs_run_mb", _number(0)),
    "outputs.maxFolderMB": ("outputs_folder_mb", _number(0)),
    "history.maxRuns": ("history_max_runs", _integer(0)),
    "results": ("results", _results),
    "interruptGrace": ("interrupt_grace", _number(0.1)),
    "kernelStartTimeout": ("kernel_start_timeout", _number(1)),
    "inputTimeout": ("input_timeout", _number(1)),
    "transport": ("transport", _choice("auto", "ipc", "tcp")),
    "model.baseUrl": ("model_base_url", _optional_text("a URL")),
    "model.name": ("model_name", _optional_text("a model name")),
    "model.apiKeyEnv": ("model_api_key_env", _env_name),
    "model.timeout": ("model_timeout", _number(1)),
    "model.temperature": ("model_temperature", _temperature),
    "model.stream": ("model_stream", _boolean),
    "model.maxTokens": ("model_max_tokens", _optional_integer_from(16)),
    "model.seed": ("model_seed", _optional_integer),
    "fix.maxAttempts": ("fix_max_attempts", _integer(1)),
    "model.candidates": ("model_candidates", _optional_integer_from(1)),
    "fix.checkDependents": ("fix_check_dependents", _boolean),
    "fix.checkBudget": ("fix_check_budget", _optional_number(0.1)),
    "autoRun": ("auto_run", _boolean),
    "guardAgents": ("guard_agents", _boolean),
    "completion": ("completion", _boolean),
    "promptMarkers": ("prompt_markers", _markers),
    "kernels": ("kernels", _kernels),
    "contextBudget": ("context_budget", _integer(1000)),
    "secretNames": ("secret_extra_names", _names),
    "executor": ("executor", _choice(*EXECUTORS)),
}
_SECTION_CHECKS: dict[str, Callable[[Any], Any]] = {
    "docker.image": _image,
    "docker.network": _network,
    "docker.memory": _size("6m"),
    "docker.cpus": _number(0.01),
    "docker.pids": _integer(16),
    "docker.tmpfsSize": _size("1m"),
    "docker.workspace": _choice("rw", "ro"),
    "docker.user": _user,
    "docker.wheels": _folder,
    "remote.url": _url,
    "remote.tokenEnv": _optional_env_name,
    "remote.kernelName": _kernel_name,
    "remote.kernelEnv": _pairs("environment variable", env_names=True),
    "remote.headers": _pairs("HTTP header", env_names=False),
    "remote.verifyTls": _boolean,
}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


def _section_keys() -> dict[str, tuple[str, Callable[[Any], Any]]]:
    """`docker.tmpfsSize` → ("docker.tmpfs_size", its check), for each field of each kind's
    config; a field without a check is a mistake caught at import."""
    keys = {}
    for kind in KINDS.values():
        if kind.section is None:
            continue
        for option in fields(kind.config):
            if option.metadata.get("setting") is False:
                continue
            key = f"{kind.section}.{_camel(option.name)}"
            keys[key] = (f"{kind.section}.{option.name}", _SECTION_CHECKS[key])
    if missing := set(_SECTION_CHECKS) - set(keys):
        raise AssertionError(f"checks for options no config has: {sorted(missing)}")
    return keys


_KEYS.update(_section_keys())
PROJECT = "pyproject.toml [tool.runfix]"
USER_ONLY = {
    "model.baseUrl": "it decides where your API key is sent",
    "model.apiKeyEnv": "it decides which secret is sent to the model",
    "autoRun": "it runs model-written code before you have read it",
    "docker.network": "it opens the sandbox's network",
    "docker.wheels": "it mounts a folder of this machine in the sandbox",
    "remote.url": "it decides where your code and your server's token are sent",
    "remote.tokenEnv": "it decides which secret is sent to the remote server",
    "remote.headers": "they are sent to your remote server with its token",
    "remote.kernelEnv": "it chooses who your remote kernel runs as, with your token",
    "remote.verifyTls": "it loosens the check of your remote server's identity",
    "kernels": "it chooses which program runs your files (a repository's kernel, say)",
}
"""Settings a project file cannot set, and why."""
_NO_ECHO = {
    "model.apiKeyEnv",
    "remote.tokenEnv",
    "remote.headers",
}  # someone may paste the key itself here: never repeat it
_GROUPS = {key.split(".")[0] for key in _KEYS if "." in key}
KNOWN_KEYS = tuple(_KEYS)


CLIENT_TRUST = "workspaceTrust"
"""`initializationOptions.workspaceTrust`: `trusted` or `restricted`, what the client's own
trust decision is (VS Code's Workspace Trust). Not a setting: a project file cannot say it."""


def section(raw: Any) -> Mapping[str, Any]:
    """The runfix options in a raw value: `{"runfix": {...}}` or the options themselves."""
    if not isinstance(raw, Mapping):
        return {}
    inner = raw.get("runfix")
    if isinstance(inner, Mapping):
        return inner
    return {k: v for k, v in raw.items() if k != CLIENT_TRUST} if CLIENT_TRUST in raw else raw


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
            if source == PROJECT and key in USER_ONLY:
                yours = "the editor's runfix settings" + (
                    " or OPENAI_BASE_URL" if key == "model.baseUrl" else ""
                )
                problems.append(
                    f"{source}: {key} is ignored: {USER_ONLY[key]}, so a project file cannot "
                    f"set it; set it in {yours}"
                )
                continue
            name, check = _KEYS[key]
            try:
                changes[name] = check(value)
            except ValueError as exc:
                shown = "<hidden>" if key in _NO_ECHO else repr(value)
                problems.append(f"{source}: {key} = {shown}: {exc}; using the default")
        settings = _apply(settings, changes)
    return replace(settings, problems=tuple(problems))


def _apply(settings: Settings, changes: dict[str, Any]) -> Settings:
    """Settings with `changes` made; "docker.image" changes `settings.docker.image`."""
    top = {name: value for name, value in changes.items() if "." not in name}
    for name, value in changes.items():
        if "." in name:
            section, option = name.split(".", 1)
            top[section] = replace(top.get(section, getattr(settings, section)), **{option: value})
    return replace(settings, **top)


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


def folder_settings(
    folder: Path, init_options: Any, client: Any = None
) -> tuple[Settings, str | None]:
    """The project file, then `initializationOptions`, then what the client answered to
    `workspace/configuration` (None: not asked); and a problem reading the project file."""
    pyproject, problem = read_pyproject(folder)
    settings = resolve(
        (PROJECT, pyproject),
        ("initializationOptions", section(init_options) or None),
        ("workspace/configuration", section(client) if client is not None else None),
    )
    return settings, problem
