"""runfix's pytest plugin, run as `python -c <program> ARGS…` in the folder's own interpreter
(the kernel's, or the sandbox's), the program being runfix's secret rule and runtime guard
made modules (`executor.shipped`), then this file's text: pytest runs with this plugin and
without its terminal output, and each test's outcome, duration and — for a failure —
pytest's own exception text (the assertion as pytest rewrote it, with the compared values)
and the frames that raised it come as one JSON line each on stdout after a marker, secrets
hidden (`_runfix_redact`). A fix's candidate (the module files given by `--runfix-sources`)
runs under the runtime guard (`_runfix_guard`) wherever its functions run; what the guard
stopped is said too. Nothing of runfix is imported here: the standard library, pytest and
those two modules (`executor.testing` reads what it says)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
from typing import Any

import pytest

MARKER = "\x1erunfix-test "
SOURCES = "--runfix-sources="
"""A leading argument `--runfix-sources={"path": "source", …}`: those module files are
imported from the sources given, not from the files (a fix's candidate, tried before it is
written), and run under the guard."""
GUARD = "--runfix-guard="
"""A leading argument `--runfix-guard={"allow": […], "keep": […]}`: what the guard allows."""
SECRET_NAMES = "--runfix-secret-names="
CONFINED = "--runfix-confined="
"""The run is a test fix's candidate's: the process is confined first (`_kernel_jail`)."""
"""A leading argument `--runfix-secret-names=[…]`: more names whose values are secrets."""
LOCALS_KEPT = 20
"""Names of a frame's locals said (the innermost frames' only), each value's repr cut."""
_EXTRA: list[str] = []
"""The names of `SECRET_NAMES`."""
_MODELS: list[bool] = [False]
"""Whether the sources given are the model's (a guard was given): their code is guarded."""


def _hidden(text: str) -> str:
    """`text` as the secret rule lets it out (the module runfix sent; as it is without)."""
    rule = sys.modules.get("_runfix_redact")
    return rule.Hider(os.environ, _EXTRA).hide(text) if rule is not None else text


def _local(name: str, value: object) -> str:
    """A local's value, cut, a secret's hidden first (a secret cut in two is not found)."""
    text = _short(value, 4000)
    rule = sys.modules.get("_runfix_redact")
    if rule is not None:
        hidden = rule.hide_value(name, text, rule.env_secrets(os.environ, _EXTRA), _EXTRA)
        text = text if hidden is None else hidden
    return text if len(text) <= 200 else text[:199] + "…"


def _say(event: dict[str, Any]) -> None:
    out = sys.__stdout__
    if out is not None:
        out.write(MARKER + json.dumps(event, default=str) + "\n")
        out.flush()


def _short(value: object, width: int = 200) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a repr that raises says so
        text = f"<repr failed: {type(exc).__name__}>"
    return text if len(text) <= width else text[: width - 1] + "…"


def _frames(excinfo: Any, root: str) -> list[dict[str, Any]]:
    """The frames of the folder's own code (not pytest's, not installed packages'),
    outermost first; the last two with their locals."""
    frames = []
    for entry in excinfo.traceback:
        path = os.path.abspath(str(entry.path))
        if not path.startswith(root + os.sep) or "site-packages" in path:
            continue
        frames.append({"path": path, "line": entry.lineno + 1, "name": entry.name, "entry": entry})
    for i, frame in enumerate(frames):
        entry = frame.pop("entry")
        if i >= len(frames) - 2:
            try:
                names = list(entry.locals.items())[:LOCALS_KEPT]
            except Exception:
                names = []
            frame["locals"] = {
                name: _local(name, value) for name, value in names if not name.startswith("@")
            }
    return frames


class RunfixPlugin:
    def __init__(self) -> None:
        self.root = os.path.abspath(os.getcwd())

    def pytest_configure(self, config: Any) -> None:
        self.rootpath = str(config.rootpath)

    def pytest_collection_finish(self, session: Any) -> None:
        _say({"event": "collected", "count": len(session.items)})

    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            text = _hidden(str(report.longrepr))
            _say({"event": "collect-error", "path": str(report.fspath), "text": text})

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        path, line, _ = location
        where = os.path.join(getattr(self, "rootpath", self.root), path)
        _say({"event": "start", "id": nodeid, "path": where, "line": (line or 0) + 1})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        outcome = yield
        report = outcome.get_result()
        report.runfix_path = os.path.abspath(str(item.path))
        if call.excinfo is not None and report.failed:
            report.runfix_error = _hidden(call.excinfo.exconly())
            report.runfix_frames = _frames(call.excinfo, self.root)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or report.failed or (report.skipped and report.when == "setup"):
            outcome = report.outcome
            if hasattr(report, "wasxfail"):
                outcome = "xfailed" if report.skipped else "xpassed"
            elif report.failed and report.when != "call":
                outcome = "error"
            path, line, name = report.location
            _say(
                {
                    "event": "test",
                    "id": report.nodeid,
                    "outcome": outcome,
                    "when": report.when,
                    "duration": report.duration,
                    "path": getattr(report, "runfix_path", os.path.abspath(path)),
                    "line": (line or 0) + 1,
                    "name": name,
                    "error": getattr(report, "runfix_error", None),
                    "frames": getattr(report, "runfix_frames", []),
                }
            )

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        _said_refusals(nodeid)

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        _said_refusals(None)
        _say({"event": "end", "exit": int(exitstatus)})


def _guard() -> Any:
    module = sys.modules.get("_runfix_guard")
    return module.install() if module is not None else None


def _said_refusals(nodeid: str | None) -> None:
    """What the guard stopped since last said (during the test `nodeid`; None: elsewhere)."""
    guard = _guard() if _MODELS[0] else None
    for refusal in guard.taken() if guard is not None else ():
        _say({"event": "guard", "id": nodeid, **refusal.said()})


class _Given(importlib.machinery.SourceFileLoader):
    """A module file's loader that reads the source given for it, never a cached .pyc."""

    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_source(self, fullname: str) -> str:
        return self.source

    def get_code(self, fullname: str) -> Any:
        code = compile(self.source, self.path, "exec", dont_inherit=True)
        guard = _guard() if _MODELS[0] else None
        if guard is not None:  # the model's code, wherever its functions run
            guard.adopt(code)
        return code


class _Sources(importlib.abc.MetaPathFinder):
    """Finds modules as the other finders do; those of the files given import the source
    given for them."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = {os.path.realpath(path): text for path, text in sources.items()}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is None:
                continue
            origin = os.path.realpath(spec.origin) if isinstance(spec.origin, str) else None
            if origin not in self.sources:
                return None  # the usual import
            spec.loader = _Given(name, spec.origin, self.sources[origin])
            return spec
        return None


def _leading(argv: list[str]) -> dict[str, Any]:
    """runfix's own leading arguments, taken off `argv`."""
    found: dict[str, Any] = {}
    while argv and argv[0].startswith((SOURCES, GUARD, SECRET_NAMES, CONFINED)):
        key, _, value = argv.pop(0).partition("=")
        found[key + "="] = json.loads(value)
    return found


def main(argv: list[str]) -> int:
    given = _leading(argv)
    _EXTRA[:] = [str(n) for n in given.get(SECRET_NAMES) or ()]
    guard = _guard() if GUARD in given else None
    _MODELS[0] = guard is not None
    if guard is not None:
        policy = given.get(GUARD) or {}
        guard.kept = (*policy.get("allow", ()), *guard.kept)  # (no arm: the model's code only)
    if SOURCES in given:
        sys.meta_path.insert(0, _Sources(given[SOURCES]))
        sys.dont_write_bytecode = True
    if given.get(CONFINED):  # (before any of the folder's code is imported)
        jail = sys.modules.get("_runfix_jail")
        why = jail.confine_process() if jail is not None else "no jail was sent"
        if why is not None:
            print(f"runfix: the test run is not confined: {why}", file=sys.stderr)
    status = int(pytest.main(argv, plugins=[RunfixPlugin()]))
    if guard is not None:
        guard.arm(guard.kept)  # what the model's code left to run at exit runs guarded
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
