"""A debugger in the live kernel (issue 60), over DAP through `runfix dap`, against a real
`runfix serve` and a real ipykernel: breakpoints hit where the user set them — in a function
another cell defined, in a module, after the defining cell was edited and run again —, the
call stack and every stop point at the user's file and line, the Variables view runs
nothing of the user's code, and "Debug this error" stops where the error was raised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp

from tests.conftest import (
    SERVER_ENV,
    UNTRUSTED_ENV,
    change,
    hints,
    init_params,
    open_doc,
    run,
)
from tests.support.dap_client import Dap, DapError, dap, said

DOC = """\
# %% defs
def total(rows):
    s = 0
    for r in rows:
        s += r["price"] * r["qty"]
    return s
# %% data
rows = [{"price": 2.0, "qty": 3}, {"price": 1.5, "qty": 2}]
# %% call
print(total(rows))
"""


async def debugged(client: Any, folder: Path, text: str = DOC) -> tuple[str, Path]:
    """The document open and run once (its functions defined in the kernel)."""
    path = folder / "sales.py"
    uri = open_doc(client, path, text)
    assert (await run(client, uri))["status"] in ("ok", "error")
    return uri, path


async def test_a_breakpoint_in_another_cells_function_stops_there_with_its_locals(
    initialized: Any, folder: Path
) -> None:
    """vscode-jupyter#17300: a breakpoint in a function a cell defined, hit from the cell
    that calls it; the stop, the stack and the variables are the user's file and lines."""
    uri, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        await client.start(path, 10)
        placed = await client.request(
            "setBreakpoints", source={"path": str(path)}, breakpoints=[{"line": 5}]
        )
        assert placed["breakpoints"][0]["verified"], placed
        await client.request("configurationDone")
        stop = await client.stopped()
        assert stop["reason"] == "breakpoint"
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(path), 5)
        assert stop["frame"]["name"] == "total"
        assert [f["line"] for f in stop["frames"]] == [5, 10]  # no helper, no kernel frame
        local = said(await client.variables(stop["frame"]["id"]))
        assert sorted(local) == ["r", "rows", "s"], local  # the frame's own, not its globals
        assert local["s"] == "0" and "price" in local["r"], local
        await client.request("continue", threadId=stop["threadId"])
        again = await client.stopped(stop["at"])
        assert said(await client.variables(again["frame"]["id"]))["s"] == "6.0"
        await client.request("setBreakpoints", source={"path": str(path)}, breakpoints=[])
        await client.request("continue", threadId=again["threadId"])
        await client.event("terminated")
    # The run's result landed as any run's, and the kernel kept its state.
    assert any(h.label == "→ 9.0" or "9.0" in str(h.label) for h in await hints(initialized, uri))


async def test_a_line_changed_since_it_ran_says_so_instead_of_stopping_on_old_code(
    initialized: Any, folder: Path
) -> None:
    uri, path = await debugged(initialized, folder)
    change(initialized, uri, 2, (4, 0), (4, 39), '        s += r["qty"] * r["price"]')
    async with dap(SERVER_ENV) as client:
        await client.start(path, 10)
        placed = await client.request(
            "setBreakpoints", source={"path": str(path)}, breakpoints=[{"line": 5}, {"line": 3}]
        )
        changed, same = placed["breakpoints"]
        assert not changed["verified"] and "changed since it last ran" in changed["message"]
        assert same["verified"], same
        await client.request("configurationDone")
        stop = await client.stopped()
        assert stop["frame"]["line"] == 3


async def test_after_the_defining_cell_is_edited_and_run_again_the_breakpoint_hits_the_new_code(
    initialized: Any, folder: Path
) -> None:
    uri, path = await debugged(initialized, folder)
    change(initialized, uri, 2, (4, 0), (4, 39), '        s += r["qty"] * r["price"] + 1')
    assert (await run(initialized, uri, 1, 5))["status"] == "ok"
    async with dap(SERVER_ENV) as client:
        stop = await client.stop_at(path, 10, path, 5)
        assert stop["frame"]["line"] == 5
        await client.request("next", threadId=stop["threadId"])
        step = await client.stopped(stop["at"])
        local = said(await client.variables(step["frame"]["id"]))
        assert local["s"] == "7.0", local  # the new line ran: 3 * 2.0 + 1


async def test_a_breakpoint_in_a_module_the_cell_imports(initialized: Any, folder: Path) -> None:
    (folder / "pricing.py").write_text(
        "def vat(amount):\n    rate = 0.2\n    return amount * rate\n", encoding="utf-8"
    )
    text = "# %% one\nimport pricing\nprint(pricing.vat(10))\n"
    _, path = await debugged(initialized, folder, text)
    async with dap(SERVER_ENV) as client:
        await client.start(path, 3)
        module = folder / "pricing.py"
        placed = await client.request(
            "setBreakpoints", source={"path": str(module)}, breakpoints=[{"line": 3}]
        )
        assert placed["breakpoints"][0]["verified"]
        await client.request("configurationDone")
        stop = await client.stopped()
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(module), 3)
        assert said(await client.variables(stop["frame"]["id"]))["rate"] == "0.2"


ERROR_DOC = """\
# %% defs
import json

def parse(raw):
    try:
        return json.loads(raw)
    except ValueError:
        return {}

def price(item):
    return item["price"] * item["qty"]
# %% call
parse("not json")
items = [{"price": 1, "qty": 2}, {"price": 3}]
print(sum(price(i) for i in items))
"""


async def test_debug_this_error_stops_on_the_raising_line_in_another_cells_function(
    initialized: Any, folder: Path
) -> None:
    """Caught exceptions inside json (a library) are gone past; the stop is the line that
    raised, in the function another cell defined, with the item that lacked the key."""
    _, path = await debugged(initialized, folder, ERROR_DOC)
    async with dap(SERVER_ENV) as client:
        await client.start(path, 14, stopOnError=True)
        await client.request("configurationDone")
        stop = await client.stopped()
        assert stop["reason"] == "exception"
        # json's ValueError, caught in `parse`, is gone past: the cell's last run raised a
        # KeyError, and the stop is where it was raised, once (not again in each caller).
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(path), 11)
        assert stop["frame"]["name"] == "price"
        local = said(await client.variables(stop["frame"]["id"]))
        assert local["item"] == "{'price': 3}", local
        info = await client.request("exceptionInfo", threadId=stop["threadId"])
        assert "KeyError" in str(info)
        await client.request("continue", threadId=stop["threadId"])
        await client.event("terminated", stop["at"])
        assert [e for e in client.events[stop["at"] :] if e["event"] == "stopped"] == []


HOSTILE = """\
# %% defs
class Loud:
    def __repr__(self):
        open("touched", "w").write("repr ran")
        return "loud"

    @property
    def boom(self):
        open("touched", "w").write("property ran")
        return 1

def look(x):
    items = list(range(1_000_000))
    return x
# %% call
result = look(Loud())
"""


async def test_variables_run_nothing_of_the_users_code_and_page_a_million_items(
    initialized: Any, folder: Path
) -> None:
    _, path = await debugged(initialized, folder, HOSTILE)
    (folder / "touched").unlink(missing_ok=True)
    async with dap(SERVER_ENV) as client:
        stop = await client.stop_at(path, 16, path, 14)
        frame = stop["frame"]["id"]
        local = await client.variables(frame)
        by_name = {v["name"]: v for v in local}
        assert "Loud" in by_name["x"]["type"] and "loud" not in by_name["x"]["value"]
        items = by_name["items"]
        assert items["indexedVariables"] == 1_000_000
        page = await client.request(
            "variables", variablesReference=items["variablesReference"], start=999_990, count=5
        )
        assert [v["name"] for v in page["variables"]] == [f"[{n}]" for n in range(999_990, 999_995)]
        assert page["variables"][0]["value"] == "999990"
        await client.variables(frame, "Globals")
    assert not (folder / "touched").exists()


@pytest.mark.parametrize(
    ("fixture", "name", "language", "kernel"),
    [("bash_kernel", "notes.sh", "shellscript", "Bash"), ("r_kernel", "a.R", "r", "R")],
)
async def test_a_kernel_without_a_debugger_gets_one_sentence_and_keeps_running(
    initialized: Any,
    folder: Path,
    fixture: str,
    name: str,
    language: str,
    kernel: str,
    request: pytest.FixtureRequest,
) -> None:
    request.getfixturevalue(fixture)  # (skipped, or failed in CI, where it is not installed)
    uri = open_doc(initialized, folder / name, "x=1\n", language=language)
    async with dap(SERVER_ENV) as client:
        await client.request("initialize", clientID="tests", adapterID="runfix")
        with pytest.raises(DapError) as said_:
            await client.request("launch", program=str(folder / name), line=1)
    sentence = str(said_.value)
    assert sentence.lower().startswith(f"the {kernel.lower()} kernel has no debugger"), sentence
    assert sentence.count(". ") == 0 and "cannot stop in them" in sentence
    assert (await run(initialized, uri))["status"] == "ok"  # nothing else changed


async def test_an_untrusted_folder_is_not_debugged(stranger: Any, folder: Path) -> None:
    await stranger.initialize_session(init_params(folder, "neovim@v0.11.0"))
    path = folder / "sales.py"
    open_doc(stranger, path, DOC)
    async with dap(UNTRUSTED_ENV) as client:
        await client.request("initialize", clientID="tests", adapterID="runfix")
        with pytest.raises(DapError, match="not trusted to run code yet"):
            await client.request("launch", program=str(path), line=10)
    assert not stranger.statuses or all(s["state"] != "busy" for s in stranger.statuses)


async def test_a_second_session_on_the_folder_is_refused_and_the_first_goes_on(
    initialized: Any, folder: Path
) -> None:
    _, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as first:
        await first.start(path, 10)
        async with dap(SERVER_ENV) as second:
            await second.request("initialize", clientID="tests", adapterID="runfix")
            await second.send("launch", program=str(path), line=10)
            said_ = await second.event("output")
            assert "being debugged already" in said_["body"]["output"]
            await second.event("terminated")
        await first.request("setBreakpoints", source={"path": str(path)}, breakpoints=[{"line": 3}])
        await first.request("configurationDone")
        assert (await first.stopped())["frame"]["line"] == 3


async def test_no_editor_holds_the_folder_and_nothing_starts(tmp_path: Path) -> None:
    path = tmp_path / "alone.py"
    path.write_text("x = 1\n", encoding="utf-8")
    async with dap(SERVER_ENV) as client:
        await client.request("initialize", clientID="tests", adapterID="runfix")
        with pytest.raises(DapError, match="no editor's runfix holds"):
            await client.request("launch", program=str(path), line=1)


async def test_disconnecting_mid_stop_lets_the_run_finish_and_keeps_the_state(
    initialized: Any, folder: Path
) -> None:
    _, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        await client.stop_at(path, 10, path, 5)
        await client.request("disconnect")
    probe = open_doc(initialized, folder / "probe.py", "total(rows)\n")
    assert (await run(initialized, probe))["status"] == "ok"
    assert "9.0" in str((await hints(initialized, probe))[0].label)


__all__ = ["Dap"]


async def test_a_breakpoint_in_a_notebook_cell_hits_from_another_cell(
    initialized: Any, folder: Path
) -> None:
    """VS Code's notebook: each cell a document named by its URI (no file on disk), a
    breakpoint in the cell that defined a function, Debug Cell on the cell that calls it."""
    from tests.e2e.test_e2e_notebooks import open_notebook

    defs = "def area(w, h):\n    size = w * h\n    return size\n"
    _, cells = open_notebook(initialized, folder / "shapes.ipynb", [defs, "print(area(3, 4))"])
    for cell in cells:
        assert (await run(initialized, cell))["status"] == "ok"
    async with dap(SERVER_ENV) as client:
        await client.start(Path(cells[1]), 1)
        placed = await client.request(
            "setBreakpoints", source={"path": cells[0]}, breakpoints=[{"line": 3}]
        )
        assert placed["breakpoints"][0]["verified"], placed
        await client.request("configurationDone")
        stop = await client.stopped()
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (cells[0], 3)
        assert said(await client.variables(stop["frame"]["id"]))["size"] == "12"
        # each frame says its cell (issue 70, 6: both read `shapes.ipynb 2:1`)
        shown = [(f["source"]["name"], f["line"]) for f in stop["frames"]]
        assert shown == [("shapes.ipynb, cell 1", 3), ("shapes.ipynb, cell 2", 1)], shown
        # only the user's thread is listed (issue 70, 7: "Thread-1" and "runfix-live" were)
        threads = (await client.request("threads"))["threads"]
        assert [t["name"] for t in threads] == ["MainThread"], threads


async def test_a_breakpoint_in_a_function_another_document_redefined_says_whose_it_is(
    initialized: Any, folder: Path
) -> None:
    """Issue 70, 8: one kernel per folder — a notebook's `def area` replaced the file's, and
    the file's breakpoint in `area` was then not hit, silently."""
    from tests.e2e.test_e2e_notebooks import open_notebook

    text = "# %%\ndef area(w, h):\n    size = w * h\n    return size\n# %%\nprint(area(3, 4))\n"
    uri = open_doc(initialized, folder / "sales.py", text)
    assert (await run(initialized, uri))["status"] == "ok"
    _, cells = open_notebook(
        initialized, folder / "shapes.ipynb", ["x = 1", "def area(w, h):\n    return w + h"]
    )
    for cell in cells:
        assert (await run(initialized, cell))["status"] == "ok"
    async with dap(SERVER_ENV) as client:
        await client.start(folder / "sales.py", 6)
        placed = await client.request(
            "setBreakpoints", source={"path": str(folder / "sales.py")}, breakpoints=[{"line": 3}]
        )
    [point] = placed["breakpoints"]
    assert not point["verified"], point
    assert point["message"].startswith(
        "`area` was last defined by shapes.ipynb, cell 2: the kernel's `area` is that one"
    ), point


async def test_a_client_that_debugs_gets_debug_cell_lenses_and_debug_this_error(
    client: Any, folder: Path
) -> None:
    """A client declaring `experimental.runfixDebug` (runfix's VS Code extension, its Neovim
    plugin with nvim-dap): "Debug cell" over each cell, "Debug this error" on an error; the
    commands are the editor's (runfix serve cannot start its debugger), with `{uri, line}`."""
    params = init_params(folder, "visual_studio_code")
    params.capabilities.experimental = {"runfixDebug": True}
    await client.initialize_session(params)
    uri = open_doc(client, folder / "sales.py", ERROR_DOC)
    assert (await run(client, uri))["status"] == "error"
    doc = lsp.TextDocumentIdentifier(uri)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    debug = [(lens.range.start.line, lens.command) for lens in lenses or [] if lens.command]
    assert [(line, c.title) for line, c in debug if c.command == "runfix.debugCell"] == [
        (0, "Debug cell"),
        (11, "Debug cell"),
    ]
    [error] = [d for d in client.diagnostics[uri] if d.severity == lsp.DiagnosticSeverity.Error]
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(doc, error.range, lsp.CodeActionContext([error]))
    )
    [action] = [a for a in actions or [] if a.title == "Debug this error"]
    assert action.command is not None and action.command.command == "runfix.debugError"
    assert list(action.command.arguments or []) == [{"uri": uri, "line": 12}]


async def test_a_client_that_does_not_debug_gets_neither(initialized: Any, folder: Path) -> None:
    uri = open_doc(initialized, folder / "sales.py", ERROR_DOC)
    assert (await run(initialized, uri))["status"] == "error"
    doc = lsp.TextDocumentIdentifier(uri)
    lenses = await initialized.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert all(lens.command and "debug" not in lens.command.command for lens in lenses or [])
    [error] = [
        d for d in initialized.diagnostics[uri] if d.severity == lsp.DiagnosticSeverity.Error
    ]
    actions = await initialized.text_document_code_action_async(
        lsp.CodeActionParams(doc, error.range, lsp.CodeActionContext([error]))
    )
    assert "Debug this error" not in [a.title for a in actions or []]


@pytest.mark.parametrize("executor", ["docker", "remote"], indirect=True)
async def test_the_docker_sandbox_and_a_jupyter_server_stop_at_a_breakpoint(
    initialized: Any, folder: Path, executor: str
) -> None:
    """The sandbox's kernel has its debugger (debugpy comes with ipykernel), reached over
    the container's IPC sockets as its runs are: nothing opens the container's network. A
    Jupyter Server's kernel is reached on the control channel of its WebSocket."""
    _, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        stop = await client.stop_at(path, 10, path, 5)
        assert (stop["frame"]["source"]["path"], stop["frame"]["line"]) == (str(path), 5)
        assert said(await client.variables(stop["frame"]["id"]))["s"] == "0"


async def test_a_post_mortem_view_of_the_last_error_runs_nothing_again(
    initialized: Any, folder: Path
) -> None:
    """`postMortem`: the kernel's last error as a stopped thread — its frames in the user's
    code (the function another cell defined on top), their values, nothing run again (the
    cell's side effect happens once), and no step."""
    text = ERROR_DOC.replace("print(sum(", 'open("ran", "a").write("x")\nprint(sum(')
    path = folder / "sales.py"
    uri = open_doc(initialized, path, text)
    assert (await run(initialized, uri))["status"] == "error"
    assert (folder / "ran").read_text() == "x"
    async with dap(SERVER_ENV) as client:
        await client.start(path, 14, postMortem=True)
        await client.request("configurationDone")
        stop = await client.stopped()
        assert stop["reason"] == "exception" and stop["text"] == "KeyError"
        assert stop["description"] == "KeyError: 'qty'"
        assert [(f["name"], f["line"]) for f in stop["frames"]] == [
            ("price", 11),
            ("<genexpr>", 16),
            ("<module>", 16),
        ]
        assert said(await client.variables(stop["frame"]["id"]))["item"] == "{'price': 3}"
        with pytest.raises(DapError, match="post-mortem: the code has ended"):
            await client.request("next", threadId=stop["threadId"])
        await client.request("continue", threadId=stop["threadId"])
        await client.event("terminated")
    assert (folder / "ran").read_text() == "x"  # the cell did not run again


async def test_a_post_mortem_with_no_error_held_says_so(initialized: Any, folder: Path) -> None:
    _, path = await debugged(initialized, folder)
    async with dap(SERVER_ENV) as client:
        await client.request("initialize", clientID="tests", adapterID="runfix")
        with pytest.raises(DapError, match="the kernel holds no error now"):
            await client.request("launch", program=str(path), line=10, postMortem=True)
