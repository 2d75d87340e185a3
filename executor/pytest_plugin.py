"""runfix's pytest plugin, run as `python -c <this file's text> ARGS…` in the folder's own
interpreter (the kernel's, or the sandbox's): pytest runs with this plugin and without its
terminal output, and each test's outcome, duration and — for a failure — pytest's own
exception text (the assertion as pytest rewrote it, with the compared values) and the
frames that raised it come as one JSON line each on stdout after a marker. Nothing of
runfix is imported here: the standard library and pytest only (`executor.testing` reads
what it says)."""

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
"""A first argument `--runfix-sources={"path": "source", …}`: those module files are imported
from the sources given, not from the files (a fix's candidate, tried before it is written)."""
LOCALS_KEPT = 20
"""Names of a frame's locals said (the innermost frames' only), each value's repr cut."""


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
                name: _short(value) for name, value in names if not name.startswith("@")
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
            _say(
                {"event": "collect-error", "path": str(report.fspath), "text": str(report.longrepr)}
            )

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
            report.runfix_error = call.excinfo.exconly()
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

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        _say({"event": "end", "exit": int(exitstatus)})


class _Given(importlib.machinery.SourceFileLoader):
    """A module file's loader that reads the source given for it, never a cached .pyc."""

    def __init__(self, fullname: str, path: str, source: str) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_source(self, fullname: str) -> str:
        return self.source

    def get_code(self, fullname: str) -> Any:
        return compile(self.source, self.path, "exec", dont_inherit=True)


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


def main(argv: list[str]) -> int:
    if argv and argv[0].startswith(SOURCES):
        sources = json.loads(argv.pop(0)[len(SOURCES) :])
        sys.meta_path.insert(0, _Sources(sources))
        sys.dont_write_bytecode = True
    return int(pytest.main(argv, plugins=[RunfixPlugin()]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
