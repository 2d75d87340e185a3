"""Issue 60's breakpoint fixtures: each one a folder as a user leaves it (percent files and a
notebook run, a module on disk, a cell edited and run again, the kernel restarted), a
breakpoint set, a cell debugged through `runfix dap`: the stop is at the file (or notebook
cell) and line the breakpoint was set on, with the frame's values. And "Debug this error"
for each error fixture: the stop is the line that raised."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from tests.conftest import SERVER_ENV, apply_edits, open_doc, run
from tests.e2e.test_debug import DOC
from tests.e2e.test_e2e_notebooks import open_notebook
from tests.support.dap_client import dap, said

Where = tuple[str, int]
"""A document (a file's name, or `cell N` of the notebook) and a line from 1."""


@dataclass
class Case:
    docs: dict[str, str]
    """Percent files, opened in the editor and run whole, in this order."""
    debug: Where
    """The cell Debug Cell runs (the one holding this line)."""
    breakpoint: Where
    stops: Where
    values: dict[str, str] = field(default_factory=dict)
    """Values of the stopped frame's locals (or globals, in a cell's own code)."""
    modules: dict[str, str] = field(default_factory=dict)
    """Files written to the folder, not opened (imported the ordinary way)."""
    notebook: list[str] = field(default_factory=list)
    """A VS Code notebook's code cells, opened and run in order."""
    edit: tuple[str, int, str] | None = None
    """A line (from 1) replaced after the first runs, and the cell holding it run again."""
    restart: bool = False
    """The kernel restarted after the first runs, and everything run again."""
    condition: str | None = None


CLASSES = """\
# %% model
class Basket:
    def __init__(self, items):
        self.items = list(items)

    def weight(self):
        heavy = [i for i in self.items if i > 2]
        return sum(heavy)
# %% use
b = Basket([1, 3, 5])
w = b.weight()
"""

SHAPES = """\
# %% kinds
import functools

def logged(fn):
    @functools.wraps(fn)
    def inner(*args):
        return fn(*args)
    return inner

@logged
def area(w, h):
    size = w * h
    return size

def make_scaler(k):
    def scale(x):
        scaled = x * k
        return scaled
    return scale

def squares(n):
    for i in range(n):
        sq = i * i
        yield sq

def fact(n):
    if n <= 1:
        return 1
    return n * fact(n - 1)

async def fetch(x):
    got = x + 1
    return got
# %% calls
a = area(3, 4)
s = make_scaler(10)(2)
g = list(squares(3))
f = fact(4)
"""

LONG = "".join(f"# %% c{n}\nv{n} = {n}\n" for n in range(120)) + (
    "# %% last\ndef deep(x):\n    far = x * 2\n    return far\n# %% go\nd = deep(21)\n"
)
LONG_DEEP = LONG.splitlines().index("    far = x * 2") + 1
LONG_GO = len(LONG.splitlines())

CASES: dict[str, Case] = {
    "same cell": Case({"sales.py": DOC}, ("sales.py", 10), ("sales.py", 10), ("sales.py", 10)),
    "a function another cell defined (vscode-jupyter#17300)": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 5), ("sales.py", 5), {"s": "0"}
    ),
    "its first line": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 3), ("sales.py", 3)
    ),
    "its return": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 6), ("sales.py", 6), {"s": "9.0"}
    ),
    "a conditional breakpoint in another cell's loop": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 5), ("sales.py", 5), {"s": "6.0"},
        condition="s > 0",
    ),
    "a method of a class another cell defined": Case(
        {"basket.py": CLASSES}, ("basket.py", 11), ("basket.py", 8), ("basket.py", 8),
        {"heavy": "[3, 5]"},
    ),
    "its __init__": Case(
        {"basket.py": CLASSES}, ("basket.py", 10), ("basket.py", 4), ("basket.py", 4),
        {"items": "[1, 3, 5]"},
    ),
    "a decorated function": Case(
        {"shapes.py": SHAPES}, ("shapes.py", 36), ("shapes.py", 13), ("shapes.py", 13),
        {"size": "12"},
    ),
    "a closure": Case(
        {"shapes.py": SHAPES}, ("shapes.py", 36), ("shapes.py", 18), ("shapes.py", 18),
        {"scaled": "20"},
    ),
    "a generator": Case(
        {"shapes.py": SHAPES}, ("shapes.py", 36), ("shapes.py", 24), ("shapes.py", 24),
        {"sq": "0"},
    ),
    "a recursive call": Case(
        {"shapes.py": SHAPES}, ("shapes.py", 36), ("shapes.py", 28), ("shapes.py", 28),
        {"n": "1"},
    ),
    "a coroutine awaited at the top level": Case(
        {"shapes.py": SHAPES + "# %% wait\nr = await fetch(1)\n"},
        ("shapes.py", 40), ("shapes.py", 33), ("shapes.py", 33), {"got": "2"},
    ),
    "a module imported the ordinary way": Case(
        {"use.py": "# %%\nimport pricing\n# %% go\nv = pricing.vat(10)\n"}, ("use.py", 4),
        ("pricing.py", 3), ("pricing.py", 3), {"rate": "0.2"},
        modules={"pricing.py": "def vat(amount):\n    rate = 0.2\n    return amount * rate\n"},
    ),
    "a module called from another cell's function": Case(
        {"use.py": "# %%\nimport pricing\n\ndef gross(x):\n    return x + pricing.vat(x)\n"
                   "# %% go\nv = gross(10)\n"},
        ("use.py", 7), ("pricing.py", 2), ("pricing.py", 2), {"amount": "10"},
        modules={"pricing.py": "def vat(amount):\n    rate = 0.2\n    return amount * rate\n"},
    ),
    "another percent file's function": Case(
        {"lib.py": "# %%\ndef half(x):\n    h = x / 2\n    return h\n",
         "main.py": "# %%\ny = half(9)\n"},
        ("main.py", 2), ("lib.py", 3), ("lib.py", 3), {"x": "9"},
    ),
    "a line far down a long file": Case(
        {"long.py": LONG}, ("long.py", LONG_GO), ("long.py", LONG_DEEP), ("long.py", LONG_DEEP),
        {"x": "21"},
    ),
    "after the defining cell was edited and run again": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 6), ("sales.py", 6), {"s": "2"},
        edit=("sales.py", 5, "        s += 1"),
    ),
    "after a restart": Case(
        {"sales.py": DOC}, ("sales.py", 10), ("sales.py", 5), ("sales.py", 5), {"s": "0"},
        restart=True,
    ),
    "a notebook: the same cell": Case(
        {}, ("cell 1", 2), ("cell 1", 2), ("cell 1", 2),
        notebook=["def area(w, h):\n    size = w * h\n    return size\n",
                  "x = 3\ny = area(x, 4)\n"],
    ),
    "a notebook: another cell's function": Case(
        {}, ("cell 2", 1), ("cell 0", 3), ("cell 0", 3), {"size": "12"},
        notebook=[
            "def area(w, h):\n    size = w * h\n    return size\n",
            "# a cell between\nz = 0\n",
            "y = area(3, 4)\n",
        ],
    ),
    "a notebook: another cell's function after it was edited and run again": Case(
        {}, ("cell 1", 1), ("cell 0", 3), ("cell 0", 3), {"size": "13"},
        notebook=["def area(w, h):\n    size = w * h\n    return size\n", "y = area(3, 4)\n"],
        edit=("cell 0", 2, "    size = w * h + 1"),
    ),
}  # fmt: skip


def _ids() -> list[str]:
    return list(CASES)


async def _place(client: Any, folder: Path, case: Case) -> dict[str, str]:
    """Open and run what the case has; each document's URI by its name (`cell N` too)."""
    uris: dict[str, str] = {}
    for name, text in case.modules.items():
        (folder / name).write_text(text, encoding="utf-8")
    for name, text in case.docs.items():
        uris[name] = open_doc(client, folder / name, text)
    if case.notebook:
        _, cells = open_notebook(client, folder / "book.ipynb", case.notebook)
        uris.update({f"cell {n}": uri for n, uri in enumerate(cells)})
    await _run_all(client, uris)
    if case.edit is not None:
        name, line, text = case.edit
        uri = uris[name]
        old = client.texts[uri].splitlines()[line - 1]
        span = lsp.Range(lsp.Position(line - 1, 0), lsp.Position(line - 1, len(old)))
        apply_edits(client, uri, [lsp.TextEdit(span, text)])  # (a notebook's cell: as VS Code)
        assert (await run(client, uri))["status"] == "ok"
    if case.restart:
        first = next(iter(uris.values()))
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="runfix.restart", arguments=[{"uri": first}])
        )
        await _run_all(client, uris)
    return uris


async def _run_all(client: Any, uris: dict[str, str]) -> None:
    for uri in uris.values():
        assert (await run(client, uri))["status"] == "ok", uri


@pytest.mark.parametrize("case", _ids())
async def test_the_breakpoint_hits_at_its_file_and_line(
    initialized: Any, folder: Path, case: str
) -> None:
    fixture = CASES[case]
    uris = await _place(initialized, folder, fixture)

    def source(name: str) -> str:
        return uris[name] if name.startswith("cell ") else str(folder / name)

    async with dap(SERVER_ENV) as client:
        await client.start(Path(source(fixture.debug[0])), fixture.debug[1])
        point: dict[str, Any] = {"line": fixture.breakpoint[1]}
        if fixture.condition:
            point["condition"] = fixture.condition
        placed = await client.request(
            "setBreakpoints", source={"path": source(fixture.breakpoint[0])}, breakpoints=[point]
        )
        assert placed["breakpoints"][0]["verified"], placed
        assert placed["breakpoints"][0]["line"] == fixture.breakpoint[1], placed
        await client.request("configurationDone")
        stop = await client.stopped()
        top = stop["frame"]
        assert (top["source"]["path"], top["line"]) == (source(fixture.stops[0]), fixture.stops[1])
        scopes = (await client.request("scopes", frameId=top["id"]))["scopes"]
        seen: dict[str, str] = {}
        for scope in scopes:
            found = await client.request(
                "variables", variablesReference=scope["variablesReference"]
            )
            seen = {**said(found["variables"]), **seen}
        for name, value in fixture.values.items():
            assert seen.get(name) == value, (name, seen)


ERRORS: dict[str, tuple[str, int, Where]] = {
    "a KeyError in another cell's function": (
        "# %% defs\ndef price(item):\n    return item['price'] * item['qty']\n"
        "# %% go\nitems = [{'price': 1, 'qty': 2}, {'price': 3}]\n"
        "t = sum(price(i) for i in items)\n",
        6, ("errors.py", 3),
    ),
    "a ZeroDivisionError in the cell itself": (
        "# %% go\nxs = [4, 2, 0]\nfor x in xs:\n    q = 8 / x\n", 2, ("errors.py", 4),
    ),
    "an IndexError in a closure": (
        "# %% defs\ndef picker(xs):\n    def pick(i):\n        return xs[i]\n    return pick\n"
        "# %% go\np = picker([1, 2])\nv = p(5)\n",
        8, ("errors.py", 4),
    ),
    "a TypeError in a comprehension": (
        "# %% go\nraw = ['1', 2, '3']\ntotal = sum([len(r) for r in raw])\n", 3, ("errors.py", 3),
    ),
    "a ValueError the user's method raises": (
        "# %% defs\nclass Account:\n    def __init__(self):\n        self.balance = 0\n\n"
        "    def take(self, n):\n        if n > self.balance:\n"
        "            raise ValueError('not enough')\n        self.balance -= n\n"
        "# %% go\nAccount().take(5)\n",
        11, ("errors.py", 8),
    ),
    "an AttributeError in a module": (
        "# %%\nimport shop\n# %% go\nshop.label(None)\n", 4, ("shop.py", 2),
    ),
    "a KeyError after json's own ValueError was caught": (
        "# %% defs\nimport json\n\ndef parse(raw):\n    try:\n        return json.loads(raw)\n"
        "    except ValueError:\n        return {}\n"
        "# %% go\ncfg = parse('not json')\nport = cfg['port']\n",
        11, ("errors.py", 11),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
async def test_debug_this_error_stops_on_the_line_that_raised(
    initialized: Any, folder: Path, case: str
) -> None:
    text, line, (name, raised) = ERRORS[case]
    (folder / "shop.py").write_text("def label(item):\n    return item.name.title()\n")
    path = folder / "errors.py"
    uri = open_doc(initialized, path, text)
    assert (await run(initialized, uri))["status"] == "error"  # the error being debugged
    async with dap(SERVER_ENV) as client:
        await client.start(path, line, stopOnError=True)
        await client.request("configurationDone")
        stop = await client.stopped()
        assert stop["reason"] == "exception"
        top = stop["frame"]
        assert (top["source"]["path"], top["line"]) == (str(folder / name), raised)


async def test_each_frame_of_a_recursion_shows_its_own_locals(
    initialized: Any, folder: Path
) -> None:
    """The same function on the stack three times at the same line: each frame's Locals are
    its own (`n` 1, 2, 3 from the top), read by runfix's inspector in that frame."""
    text = (
        "# %% defs\ndef fact(n):\n    if n <= 1:\n        return 1\n"
        "    return n * fact(n - 1)\n# %% go\nf = fact(3)\n"
    )
    path = folder / "rec.py"
    uri = open_doc(initialized, path, text)
    assert (await run(initialized, uri))["status"] == "ok"
    async with dap(SERVER_ENV) as client:
        await client.start(path, 7)
        await client.request(
            "setBreakpoints", source={"path": str(path)}, breakpoints=[{"line": 4}]
        )
        await client.request("configurationDone")
        stop = await client.stopped()
        frames = [f for f in stop["frames"] if f["name"] == "fact"]
        assert [f["line"] for f in frames] == [4, 5, 5]
        seen = [said(await client.variables(f["id"]))["n"] for f in frames]
        assert seen == ["1", "2", "3"]
