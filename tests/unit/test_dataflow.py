"""The dataflow map of cells (issue 28): what each cell defines and reads, staleness that
follows it, and the dependents "Run dependents" and the fix check use."""

from __future__ import annotations

from executor.events import RunOutcome, RunStatus, Span, Stream
from lsp_server.outputs.results import build
from lsp_server.outputs.store import ResultStore, line_change
from lsp_server.text.dataflow import DocumentMap, analyse

PATH = "/tmp/flow.py"


def test_what_a_cell_defines_and_reads() -> None:
    flow = analyse(
        "import pandas as pd\n"
        "from os import path as p\n"
        "df = pd.read_csv(src)\n"
        "df['total'] = df.price * qty\n"
        "count += 1\n"
        "cfg.lr = rate\n"
        "def report(n):\n"
        "    global last\n"
        "    last = n\n"
        "    return helper(n) + scale\n"
        "class Model(Base):\n"
        "    size = width\n"
        "squares = [i * i for i in range(limit)]\n"
        "print(df)\n"
    )
    assert flow.defines == {
        "pd", "p", "df", "count", "cfg", "report", "last", "Model", "squares",
    }  # fmt: skip
    assert flow.reads == {
        "src", "qty", "count", "cfg", "rate", "helper", "scale", "Base", "width",
        "range", "limit", "print",
    }  # fmt: skip
    assert "df" not in flow.reads and "pd" not in flow.reads  # defined above their use
    assert "i" not in flow.reads and "n" not in flow.reads  # local to their scopes
    assert not analyse("df = (\n").parsed  # mid-typing: not known


TEXT = (
    "# %% a\nrate = 2\n# %% o\nother = 1\n"  # 0-1, 2-3
    "# %% b\ny = rate * 10\ny\n"  # 4-6
    "# %% c\nother + 1\n"  # 7-8
    "# %% d\ny + 1\n"  # 9-10: reads y, which b makes from rate
    "# %% e\nz = 5\nz\n"  # 11-13: reads nothing above
)


def _ran(lines: list[str]) -> ResultStore:
    """Every cell ran: a result on 6 (b), 8 (c), 10 (d), 13 (e)."""
    store = ResultStore()
    events = tuple(
        Stream("stdout", f"{n}\n", Span(line + 1, line + 1))
        for n, line in enumerate((6, 8, 10, 13))
    )
    outcome = RunOutcome(RunStatus.OK, events, 0.0)
    store.add("u", 1, build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None), lines)
    return store


def _stale(store: ResultStore) -> dict[int, str]:
    results = store.get("u")
    return {
        s.first: front.reason for s in results.statements if (front := results.stale(s)) is not None
    }


def test_an_edit_marks_only_the_cells_that_read_what_it_changed() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    edited = [*lines[:1], "rate = 3\n", *lines[2:]]
    store.edit("u", 2, [line_change(1, 1, "3", deleted=True)], edited)
    stale = _stale(store)
    assert sorted(stale) == [6, 10]  # b reads rate; d reads y, made from rate; not c, not e
    assert stale[6].startswith("line 2 was edited at")
    assert stale[6].endswith("this cell depends on `rate` from the cell at line 1")


def test_renaming_a_name_makes_its_old_readers_stale() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    edited = [*lines[:3], "another = 1\n", *lines[4:]]  # `other` is gone: c read it
    store.edit("u", 2, [line_change(3, 3, "an", deleted=False)], edited)
    assert sorted(_stale(store)) == [8]


def test_typing_on_keeps_the_names_from_before_the_first_keystroke() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    now = list(lines)
    for n, typed in enumerate(["x", "xx"]):  # rate → ratex → ratexx, one keystroke at a time
        now = [*now[:1], f"rate{typed} = 2\n", *now[2:]]
        store.edit("u", 2 + n, [line_change(1, 1, "x")], now)
    assert sorted(_stale(store)) == [6, 10]  # b and d read `rate`, which is no more


def test_a_cell_that_does_not_parse_marks_everything_below() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    edited = [*lines[:3], "other = (\n", *lines[4:]]
    store.edit("u", 2, [line_change(3, 3, "(", deleted=True)], edited)
    assert sorted(_stale(store)) == [6, 8, 10, 13]


def test_a_cell_run_again_marks_its_readers_only() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    store.clear_made_at("u", 1, 4, 6)  # b ran again (its own result goes)
    assert sorted(_stale(store)) == [10]  # d reads y; c and e do not


def test_a_new_cell_moves_the_map_and_a_name_defined_anew_hides_a_change() -> None:
    lines = TEXT.splitlines(True)
    store = _ran(lines)
    added = ["# %% new\n", "rate = 5\n"]
    now = [*added, *lines]  # a cell above all that defines rate: cell a defines it anew
    store.edit("u", 2, [line_change(0, 0, "".join(added))], now)
    flow = store.map("u")
    assert flow is not None and flow.starts == [0, 2, 4, 6, 9, 11, 13]
    assert _stale(store) == {}  # b and d read a's rate, as before
    edited = [*now[:3], "rate = 4\n", *now[4:]]  # cell a, two lines down now
    store.edit("u", 3, [line_change(3, 3, "4", deleted=True)], edited)
    assert sorted(_stale(store)) == [8, 12]  # b and d, two lines down


def test_dependents_follow_the_names_in_file_order() -> None:
    flow = DocumentMap(TEXT.splitlines(True))
    assert flow.dependents(0) == [2, 4]  # b (rate), d (y, through b)
    assert flow.dependents(1) == [3]  # c (other)
    assert flow.dependents(2) == [4]
    assert flow.dependents(3) == [] and flow.dependents(5) == []
