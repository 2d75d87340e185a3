"""The debugger's breakpoints without a kernel or a client (`lsp_server.debug.breakpoints`,
issue 71, 5: `debug/` had no unit test): which function a breakpoint's line is in, a line
changed since it ran, a function another document redefined since, what the kernel's
debugger is asked, and the answer in the user's terms."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsp_server.debug.breakpoints import Breakpoints, enclosing_def
from tests.support.editors import URI, FakeEditor

FILE = (
    "# %%\n@cached\ndef area(w, h):\n    size = w * h\n    return size\n# %%\nprint(area(3, 4))\n"
)
PATH = "/ws/doc.py"


def test_the_function_a_line_is_in_is_the_top_level_def_above_it() -> None:
    rows = FILE.splitlines(True)
    assert enclosing_def(rows, 3) == ("area", 1, 2)  # its body: the decorator is its top
    assert enclosing_def(rows, 4) == ("area", 1, 2)
    assert enclosing_def(rows, 2) is None  # the `def` line runs as its cell does
    assert enclosing_def(rows, 6) is None  # a cell's own code
    assert enclosing_def(rows, 0) is None
    signature = ["def f(\n", "    a,\n", "):\n", "    return a\n"]
    assert enclosing_def(signature, 3) == ("f", 0, 0)
    method = ["class A:\n", "    def m(self):\n", "        return 1\n"]
    assert enclosing_def(method, 2) is None  # only top-level functions are looked up


class Kernel:
    """The kernel's debugger (what `setBreakpoints` it was sent) and where its functions
    were last defined."""

    def __init__(self, defined: dict[str, tuple[str, int]]) -> None:
        self.sent: list[dict[str, Any]] = []
        self.defined, self.asked = defined, 0

    async def forward(self, command: str, arguments: dict[str, Any]) -> Any:
        self.sent.append(arguments)
        return {
            "breakpoints": [{"verified": True, "line": b["line"]} for b in arguments["breakpoints"]]
        }

    async def defined_at(self, names: list[str]) -> dict[str, tuple[str, int]]:
        self.asked += 1
        return {n: self.defined[n] for n in names if n in self.defined}


def _set(points: Breakpoints, kernel: Kernel, *lines: int, ask: bool = True) -> list[Any]:
    arguments = {"source": {"path": PATH}, "breakpoints": [{"line": n} for n in lines]}
    defined = kernel.defined_at if ask else None
    said = asyncio.run(points.set(arguments, kernel.forward, defined))
    return list(said["breakpoints"])


def _breakpoints() -> Breakpoints:
    points = Breakpoints(FakeEditor(FILE), Path("/ws"))
    points.ran = {PATH: FILE.splitlines(True)}
    return points


def test_a_breakpoint_in_a_function_the_kernel_holds_from_here_is_set() -> None:
    kernel = Kernel({"area": (PATH, 2)})  # (its decorator's line: where the code starts)
    [point] = _set(_breakpoints(), kernel, 4)
    assert point == {"verified": True, "line": 4}
    assert kernel.sent == [{"source": {"path": PATH}, "breakpoints": [{"line": 4}]}]


def test_a_function_another_document_redefined_is_said_and_not_trusted_to_stop() -> None:
    kernel = Kernel({"area": ("/ws/shapes.py", 7)})
    [point, elsewhere] = _set(_breakpoints(), kernel, 4, 7)
    assert point["verified"] is False
    assert point["message"] == (
        "`area` was last defined by shapes.py, line 7: the kernel's `area` is that one (one "
        "kernel per folder); run this cell again to stop here"
    )
    assert elsewhere == {"verified": True, "line": 7}  # a cell's own line: not a function's
    assert kernel.sent[0]["breakpoints"] == [{"line": 7}]  # the held one is not sent


def test_in_the_debugged_cell_or_once_it_runs_nothing_is_asked_of_the_kernel() -> None:
    kernel = Kernel({"area": ("/ws/shapes.py", 7)})
    points = _breakpoints()
    points.debugged = (URI, 1, 4)  # the cell that defines it runs now, as it is
    assert _set(points, kernel, 4) == [{"verified": True, "line": 4}]
    assert _set(_breakpoints(), kernel, 4, ask=False) == [{"verified": True, "line": 4}]
    assert kernel.asked == 0


def test_a_line_changed_since_it_ran_is_not_set_and_says_what_the_kernel_holds() -> None:
    points = _breakpoints()
    points.ran = {PATH: FILE.replace("w * h", "w + h").splitlines(True)}
    [point] = _set(points, Kernel({}), 4)
    assert point["verified"] is False
    assert point["message"].startswith("line 4 changed since it last ran (the kernel holds")
    assert "size = w + h" in point["message"]
