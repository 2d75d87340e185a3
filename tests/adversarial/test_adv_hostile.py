"""Issue 36, S1 1: nothing of the user's code runs to answer a keystroke. Each value of
`hostile_objects.py` writes a marker from any of its hooks; the kernel's helper is asked
everything a keystroke or an agent can ask of it, and no marker may exist after."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from executor import _kernel_live as live
from tests.conftest import change, hover_text, open_doc, run
from tests.support.agent_client import agent, tool

HOSTILE = Path(__file__).with_name("hostile_objects.py")


def hostile_namespace(marks: Path) -> dict[str, Any]:
    namespace: dict[str, Any] = {"MARKS": str(marks), "__name__": "__main__"}
    exec(
        compile(HOSTILE.read_text(encoding="utf-8"), str(HOSTILE), "exec", dont_inherit=True),
        namespace,
    )
    return namespace


def _triggers() -> tuple[str, ...]:
    namespace: dict[str, Any] = {}
    exec(
        compile(HOSTILE.read_text(encoding="utf-8"), str(HOSTILE), "exec", dont_inherit=True),
        namespace,
    )
    return tuple(namespace["TRIGGERS"])


TRIGGERS = _triggers()


def typed(name: str) -> list[str]:
    """What a user types about `name` that reaches the kernel: completion contexts."""
    return [
        name[:2],
        f"x = {name}",
        f"{name}.",
        f"{name}.a",
        f"{name}.attr.",
        f"{name}.plain.",
        f"{name}.other[",
        f'{name}["',
        f"{name}[",
        f'{name}["a"].',
        f'{name}["a"]["',
        f"{name}[0].",
        f"{name}[0][",
        f"{name}.attr[",
        f'{name}.attr["',
    ]


def hovered(name: str) -> list[str]:
    return [name, f"{name}.attr", f'{name}["a"]', f"{name}[0]", f"{name}.plain", f"{name}.x"]


def called(name: str) -> list[str]:
    return [f"{name}(", f"y = {name}(1, ", f"{name}.attr(", f'{name}["a"](']


@pytest.fixture
def marks(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "marks"
    where.mkdir()
    yield where


def asked(namespace: dict[str, Any], name: str) -> None:
    """Every question a keystroke or an agent puts to the helper about `name`."""
    for before in typed(name):
        live.complete(namespace, before, [], set())
    for chain in hovered(name):
        live.describe(namespace, chain)
    for before in called(name):
        live.signature(namespace, before)


@pytest.mark.parametrize("name", TRIGGERS)
def test_no_hook_of_a_hostile_value_runs(name: str, marks: Path) -> None:
    everything = hostile_namespace(marks)
    # `name` alone (with the key that holds it, a plain str or not): a completion of names
    # reads every value of the namespace, and a marker must name its own trigger
    alone = {k: v for k, v in dict.items(everything) if str.__eq__(k, name) is True}
    everything["arm"]()
    try:
        asked(alone, name)
    finally:
        everything["disarm"]()
    assert sorted(p.name for p in marks.iterdir()) == []


def test_the_namespace_in_brief_and_the_variables_run_nothing(marks: Path) -> None:
    namespace = hostile_namespace(marks)
    namespace["arm"]()
    try:
        brief = live.picture(namespace, set())
        listed = json.loads(json.dumps(live.variables_of(namespace, set())))
    finally:
        namespace["disarm"]()
    assert sorted(p.name for p in marks.iterdir()) == []
    # and they still say what a user would want to know, from metadata alone
    assert brief["names"]["lazy_users"]["type"] == "SimpleLazyObject"
    by_name = {v["name"]: v for v in listed}
    assert by_name["list_len"]["length"] == 3  # list's own length, not the subclass's
    assert by_name["np_objects"]["shape"] == [2]
    assert "Shown" not in by_name["np_objects"]["summary"]  # no element's repr
    assert by_name["frame_labels"]["shape"] == [1, 2]
    assert by_name["series_objects"]["summary"].startswith("<pandas.")
    assert "ns_str_key" not in by_name  # a key that is not a plain str is not a name


def test_what_can_be_said_without_running_anything_is_still_said(marks: Path) -> None:
    namespace = hostile_namespace(marks)
    about = live.describe(namespace, "default_repr_func")
    assert about is not None
    assert about["signature"] == "(x, fallback=<Shown>)"
    about = live.describe(namespace, "annotation_func")
    assert about is not None and about["signature"] == "(x: Named, y: <Shown> = 1) -> list[Named]"
    about = live.describe(namespace, "meta_getattribute_obj.attr")
    assert about is not None and about["length"] == 1 and about["preview"] == "{'a': 1}"
    assert live.describe(namespace, "prop_obj.attr") is None  # a property: not read
    slots = live.describe(namespace, "slots_getattr.other")
    assert slots is not None and slots["preview"] == "{'a': 1}"  # a slot is read as stored
    keys = live.complete(namespace, 'keys_eq["', [])
    assert keys is not None and [i["label"] for i in keys["items"]] == ["a"]
    assert live.describe(namespace, 'keys_eq["a"]') is not None  # found without __eq__
    assert sorted(p.name for p in marks.iterdir()) == []


async def test_over_lsp_and_mcp_a_real_kernel_runs_no_hook(
    initialized: LanguageClient, folder: Path
) -> None:
    """The same values in the folder's kernel: completion, hover and signature help from the
    editor, `runfix.variables`, and an agent's `variables` and `inspect_value`."""
    marks = folder / "marks"
    marks.mkdir()
    code = f"MARKS = {str(marks)!r}\n" + HOSTILE.read_text(encoding="utf-8") + "arm()\n"
    path = folder / "hostile.py"
    uri = open_doc(initialized, path, code)
    assert (await run(initialized, uri))["status"] == "ok"
    last = code.count("\n")  # an empty last line, typed over
    version, typed_now = 1, ""

    def type_line(text: str) -> None:
        nonlocal version, typed_now
        version += 1
        change(initialized, uri, version, (last, 0), (last, len(typed_now)), text)
        typed_now = text

    where = lsp.TextDocumentIdentifier(uri)
    for name in TRIGGERS:
        for text in (name[:2], f"{name}.", f'{name}["', f"{name}[", f"{name}.attr."):
            type_line(text)
            await initialized.text_document_completion_async(
                lsp.CompletionParams(where, lsp.Position(last, len(text)))
            )
        type_line(f"{name}(")
        await initialized.text_document_signature_help_async(
            lsp.SignatureHelpParams(where, lsp.Position(last, len(name) + 1))
        )
        type_line(name)
        await hover_text(initialized, uri, last, 1)
    await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.variables", arguments=[{"uri": uri}])
    )
    async with agent() as session:
        listed = await tool(session, "variables", folder=str(folder))
        for name in TRIGGERS:
            await tool(session, "inspect_value", folder=str(folder), expression=name)
    assert sorted(p.name for p in marks.iterdir()) == []
    assert {v["name"] for v in listed["variables"]} >= set(TRIGGERS) - {"ns_str_key", "module_sub"}
    # the kernel is not left busy by anything asked: the user's next run is a plain run
    type_line("print('next')")
    assert (await run(initialized, uri, last))["status"] == "ok"


# -- S2 9: the helper's work is bounded per question --------------------------------------


class _Shell:
    def __init__(self, namespace: dict[str, Any]) -> None:
        self.user_ns = namespace
        self.user_ns_hidden: dict[str, Any] = {}


def test_a_walk_past_its_deadline_stops_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    big = {i: i for i in range(2_000_000)}  # int keys: every one is looked at for `str` keys
    monkeypatch.setattr(live, "DEADLINE", 0.01)
    said = live.answer(_Shell({"big": big}), {"op": "complete", "before": 'big["'})
    assert said == {"error": "stopped: the answer took over 0.01 s"}
    said = live.answer(_Shell({"small": {"a": 1}}), {"op": "complete", "before": 'small["'})
    assert [i["label"] for i in said["answer"]["items"]] == ["a"]  # the next one is answered


def test_an_answer_that_never_comes_is_abandoned_and_the_next_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    release = threading.Event()
    real = live._answer

    def stuck(shell: Any, data: dict[str, Any]) -> Any:
        if data.get("stuck"):
            release.wait(30)
        return real(shell, data)

    monkeypatch.setattr(live, "_answer", stuck)
    monkeypatch.setattr(live, "ABANDON", 0.05)
    shell = _Shell({"small": {"a": 1}})
    try:
        for _ in range(live.STUCK):
            said = live.answer(shell, {"op": "complete", "before": "sm", "stuck": True})
            assert said["abandoned"] is True and "abandoned" in said["error"]
        refused = live.answer(shell, {"op": "complete", "before": "sm"})
        assert refused == {"error": f"{live.STUCK} earlier answers are still stuck in the kernel"}
    finally:
        release.set()
    for thread in list(live._abandoned):
        thread.join(5)
    said = live.answer(shell, {"op": "complete", "before": "sm"})
    assert [i["label"] for i in said["answer"]["items"]] == ["small"]


async def test_a_value_that_never_answers_its_hooks_leaves_completion_and_runs_working(
    initialized: LanguageClient, folder: Path
) -> None:
    code = (
        "class Forever:\n"
        "    def __getattribute__(self, name):\n"
        "        while True:\n"
        "            pass\n"
        "    def __repr__(self):\n"
        "        while True:\n"
        "            pass\n"
        "forever = Forever()\n"
        "fine = {'key': 1}\n"
        "\n"
    )
    uri = open_doc(initialized, folder / "forever.py", code)
    assert (await run(initialized, uri))["status"] == "ok"
    where = lsp.TextDocumentIdentifier(uri)
    change(initialized, uri, 2, (9, 0), (9, 0), "forever.")
    await initialized.text_document_completion_async(
        lsp.CompletionParams(where, lsp.Position(9, 8))
    )
    assert "Forever" in await hover_text(initialized, uri, 7, 1)
    change(initialized, uri, 3, (9, 0), (9, 8), 'fine["')
    answer = await initialized.text_document_completion_async(
        lsp.CompletionParams(where, lsp.Position(9, 6))
    )
    assert isinstance(answer, lsp.CompletionList)
    assert [i.label for i in answer.items] == ["key"]
    async with agent() as session:
        listed = await tool(session, "variables", folder=str(folder))
    assert {v["name"] for v in listed["variables"]} == {"Forever", "forever", "fine"}
    change(initialized, uri, 4, (9, 0), (9, 6), "print(fine)")
    ran = await run(initialized, uri, 9)
    assert ran["status"] == "ok"


# -- the fix request's evidence (issue 45) -------------------------------------------------

PROBES = (
    # a failing line that names the value every way the evidence reads one
    "def probe(v):\n    return (v.attr, v['a'], v[0], v.x, len(v)) if 1 / 0 else v\n",
    # a missing attribute: what the object has is listed
    "def probe(v):\n    return v.no_such_attribute_zz + 1\n",
    # a missing key: the container's keys are listed
    "def probe(v):\n    return v['no_such_key_zz'] * 2\n",
    # an operator: both operands are described
    "def probe(v):\n    return v + object()\n",
)


@pytest.mark.parametrize("name", TRIGGERS)
def test_what_a_failing_frame_held_is_read_without_running_a_hook(
    name: str, marks: Path, tmp_path: Path
) -> None:
    """The fix request says what the frames that raised held (`evidence`): with a hostile
    value in the frame's locals and every form of it on the line that raised, no hook of the
    value runs while that is read."""
    import linecache
    import sys

    namespace = hostile_namespace(marks)
    value = namespace[name]
    for i, probe in enumerate(PROBES):
        path = tmp_path / f"probe{i}.py"
        path.write_text(probe, encoding="utf-8")
        linecache.checkcache(str(path))
        space: dict[str, Any] = {"__name__": "probe"}
        exec(compile(probe, str(path), "exec"), space)
        try:
            space["probe"](value)  # disarmed: the user's own run may run hooks
        except BaseException as exc:  # whatever the value's hooks raise
            sys.last_value, sys.last_traceback = exc, exc.__traceback__
            raised = type(exc).__name__
        else:
            continue
        namespace["arm"]()
        try:
            found = json.loads(live.evidence(raised, 0))
        finally:
            namespace["disarm"]()
        assert sorted(p.name for p in marks.iterdir()) == [], (name, i)
        if i == 0:  # (1 / 0 raised in the probe itself: its frame is read, and said)
            assert found["frames"][0]["function"] == "probe", name
