"""Issue 38: a document runs in its own language's Jupyter kernel, never in Python's; a
language with no kernel here, or one runfix does not know, says so on the line."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.conftest import (
    KERNELS,
    SERVER,
    SERVER_ENV,
    editor_like,
    end_session,
    errors,
    hints,
    init_params,
    open_doc,
    run,
)
from tests.support.kernels import write_null_kernelspec

NULL_KERNELS = Path(tempfile.mkdtemp(prefix="runfix-null-kernel-"))
write_null_kernelspec(NULL_KERNELS)
NULL_ENV = {**SERVER_ENV, "JUPYTER_PATH": f"{NULL_KERNELS}{os.pathsep}{KERNELS}"}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=NULL_ENV))
async def null_client(lsp_client: LanguageClient) -> Any:
    """A real `runfix serve` whose Jupyter path also holds the null kernel (for Lua)."""
    editor_like(lsp_client)
    yield
    await end_session(lsp_client)


async def _hint_texts(client: Any, uri: str) -> list[tuple[int, str]]:
    return [(h.position.line, str(h.label)) for h in await hints(client, uri)]


async def test_a_shell_script_runs_in_bash_not_python(
    bash_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(
        initialized,
        folder / "steps.sh",
        '# %%\nname=runfix\necho "hello $name"\n# %%\necho $((6 * 7))\n',
        language="shellscript",
    )
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer
    shown = await _hint_texts(initialized, uri)
    # What `echo` printed is on the echo's line, not the cell's first (issue 46).
    assert any(line == 2 and "hello runfix" in text for line, text in shown), shown
    assert any("42" in text and line == 4 for line, text in shown), shown
    assert not errors(initialized, uri)  # (as Python, `echo "hello $name"` is a SyntaxError)


async def test_a_failing_command_is_an_error_on_its_piece(
    bash_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "fails.sh", "# %%\necho before\nfalse\n", language="sh")
    answer = await run(initialized, uri)
    assert answer["status"] == "error", answer
    [error] = errors(initialized, uri)
    assert 1 <= error.range.start.line <= 2, error


async def test_a_shell_kernel_and_the_python_kernel_of_one_folder_keep_their_state(
    bash_kernel: None, initialized: Any, folder: Path
) -> None:
    shell = open_doc(initialized, folder / "a.sh", "X=shell\n", language="shellscript")
    python = open_doc(initialized, folder / "a.py", "X = 'python'\n")
    assert (await run(initialized, shell))["status"] == "ok"
    assert (await run(initialized, python))["status"] == "ok"
    echo = open_doc(initialized, folder / "b.sh", "echo $X\n", language="shellscript")
    show = open_doc(initialized, folder / "b.py", "X\n")
    assert (await run(initialized, echo))["status"] == "ok"
    assert (await run(initialized, show))["status"] == "ok"
    assert any("shell" in text for _, text in await _hint_texts(initialized, echo))
    assert any("python" in text for _, text in await _hint_texts(initialized, show))


@pytest.mark.parametrize(
    ("name", "language", "said"),
    [
        ("model.jl", "julia", "No Jupyter kernel for Julia is installed here"),
        ("plot.lua", "lua", "No Jupyter kernel for Lua is installed here"),
        ("notes.txt", "plaintext", "does not know this document's language"),
    ],
)
async def test_a_language_without_a_kernel_says_so_and_runs_nothing_as_python(
    initialized: Any, folder: Path, name: str, language: str, said: str
) -> None:
    """Issue 38: a Julia file with no kernel ran `x = 1 + 1` as Python and said ok."""
    uri = open_doc(initialized, folder / name, "x = 1 + 1\nopen('ran', 'w')\n", language=language)
    await asyncio.sleep(0.5)
    assert not errors(initialized, uri)  # opening it says nothing: running it does
    answer = await run(initialized, uri)
    assert answer["status"] == "error" and said in answer["message"], answer
    assert not (folder / "ran").exists()
    assert any(said in e.message for e in errors(initialized, uri))
    if language == "julia":
        assert "IJulia" in answer["message"]  # how to get one
    python = open_doc(initialized, folder / "still.py", "6 * 7\n")
    assert (await run(initialized, python))["status"] == "ok"  # Python's cost nothing


async def test_typescript_runs_in_deno_its_value_on_its_line(
    deno_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(
        initialized,
        folder / "main.ts",
        "// %%\nconst xs: number[] = [1, 2, 3];\nxs.reduce((a, b) => a + b, 0) * 7\n",
        language="typescript",
    )
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer
    shown = await _hint_texts(initialized, uri)
    assert any(line == 2 and "42" in text for line, text in shown), shown
    assert "\x1b" not in "".join(text for _, text in shown)  # Deno colours its values


async def test_a_typescript_error_lands_on_its_cell_with_its_trace(
    deno_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(
        initialized,
        folder / "throws.ts",
        "// %%\nconst ok = 1;\nfunction f(): number { throw new Error('boom'); }\nf();\n",
        language="typescript",
    )
    answer = await run(initialized, uri)
    assert answer["status"] == "error", answer
    [error] = errors(initialized, uri)
    assert error.range.start.line == 1 and error.message == "Error: boom", error
    assert "<anonymous>" not in error.message


async def test_r_runs_in_irkernel_its_value_on_its_line(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(
        initialized,
        folder / "analysis.R",
        "# %%\nx <- 4\nprint('start')\nx * 5\n",
        language="r",
    )
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer
    shown = await _hint_texts(initialized, uri)
    assert any(line == 3 and "[1] 20" in text for line, text in shown), shown
    assert any(line == 2 and "start" in text for line, text in shown), shown  # print's line
    assert not errors(initialized, uri)  # (as Python, `x <- 4` is a comparison: NameError)
    # The status line says whose state it shows: the folder has a kernel per language.
    assert {"state": "idle", "executor": "kernel · R"} in initialized.statuses


async def test_r_variables_are_listed_by_r_without_running_the_user_s_code(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    """Issue 46: `:RunfixVariables` said "(no variables)" in R. R lists them; an active
    binding is not read and a print/length method of the user's class never runs."""
    uri = open_doc(
        initialized,
        folder / "vars.R",
        "# %%\nx <- 4\nname <- 'a\tb'\ndf <- data.frame(a = 1:3, b = c('x', 'y', 'z'))\n"
        "f <- function(n) n\n"
        "makeActiveBinding('trap', function() { cat('RAN\\n', file = 'marks'); 1 }, globalenv())\n"
        "length.odd <- function(x) { cat('RAN\\n', file = 'marks'); 99L }\n"
        "o <- structure(list(1, 2), class = 'odd')\n",
        language="r",
    )
    assert (await run(initialized, uri))["status"] == "ok"
    listed = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.variables", arguments=[{"uri": uri}])
    )
    by_name = {v["name"]: v for v in listed}
    assert by_name["x"]["type"] == "numeric" and by_name["x"]["summary"] == "4"
    assert by_name["name"]["summary"] == '"a\\tb"'  # escaped as R writes it: one line
    assert by_name["df"]["type"] == "data.frame" and by_name["df"]["shape"] == [3, 2]
    assert by_name["df"]["columns"] == {"a": "integer", "b": "character"}
    assert by_name["f"]["type"] == "function"
    assert by_name["o"]["type"] == "odd" and by_name["o"]["length"] == 2  # not 99
    assert by_name["trap"]["type"] == "active binding"
    assert not (folder / "marks").exists()


async def test_an_r_error_in_a_function_lands_on_its_source_line(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(
        initialized,
        folder / "fails.R",
        "# %%\nf <- function(n) stop('no ', n)\ny <- 1\nf(y)\n",
        language="r",
    )
    answer = await run(initialized, uri)
    assert answer["status"] == "error", answer
    [error] = errors(initialized, uri)
    assert error.range.start.line == 1 and error.message == "Error in f(y): no 1", error


async def test_an_r_plot_is_a_rich_output_of_its_cell(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "plot.R", "plot(1:3)\n", language="r")
    assert (await run(initialized, uri))["status"] == "ok"
    outputs = list((folder / ".runfix" / "outputs").rglob("*.png"))
    assert outputs, "the plot was not stored"


async def test_an_r_error_in_a_function_a_cell_above_defined_lands_there(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    """R's source lines count the code it was sent, which runfix sends on the document's
    lines: an error raised in a function of another cell lands on that function's line, as
    Python's does, with the call that reached it as related information."""
    source = "# %%\nhalf <- function(n) {\n  stop('not yet: ', n)\n}\n# %%\ny <- 8\nhalf(y)\n"
    uri = open_doc(initialized, folder / "cells.R", source, language="r")
    assert (await run(initialized, uri, 0, 3))["status"] == "ok"
    answer = await run(initialized, uri, 4, 6)
    assert answer["status"] == "error", answer
    [error] = errors(initialized, uri)
    assert error.range.start.line == 2 and error.message == "Error in half(y): not yet: 8"
    assert [r.location.range.start.line for r in error.related_information or []] == [6]


@pytest.mark.parametrize(
    ("kernel", "name", "language", "define", "ask", "gone"),
    [
        ("bash_kernel", "s.sh", "shellscript", "X=kept", "echo ${X:-gone}", "gone"),
        ("deno_kernel", "m.ts", "typescript", "var kept = 1;", "typeof kept", "undefined"),
        ("r_kernel", "a.R", "r", "kept <- 1", "exists('kept')", "FALSE"),
    ],
)
async def test_restart_clears_that_language_s_kernel_and_only_it(
    request: pytest.FixtureRequest,
    initialized: Any,
    folder: Path,
    kernel: str,
    name: str,
    language: str,
    define: str,
    ask: str,
    gone: str,
) -> None:
    request.getfixturevalue(kernel)
    uri = open_doc(initialized, folder / name, f"{define}\n{ask}\n", language=language)
    python = open_doc(initialized, folder / "keep.py", "kept = 'python'\nkept\n")
    assert (await run(initialized, uri))["status"] == "ok"
    assert (await run(initialized, python))["status"] == "ok"
    assert gone not in "".join(t for _, t in await _hint_texts(initialized, uri))
    restarted = await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="runfix.restart", arguments=[{"uri": uri}])
    )
    assert restarted == {"restarted": 1}, restarted
    assert (await run(initialized, uri, 1, 1))["status"] == "ok"
    assert any(gone in text for _, text in await _hint_texts(initialized, uri))
    assert (await run(initialized, python, 1, 1))["status"] == "ok"  # Python's kernel kept its
    assert any("python" in text for _, text in await _hint_texts(initialized, python))


async def test_a_typescript_html_display_is_a_rich_output(
    deno_kernel: None, initialized: Any, folder: Path
) -> None:
    """Deno's `Deno.jupyter.html` sends `text/html`: kept as a rich output of its cell."""
    uri = open_doc(
        initialized,
        folder / "table.ts",
        "// %%\nconst rows = [1, 2];\n"
        "Deno.jupyter.html`<table><tr><td>${rows.length}</td></tr></table>`\n",
        language="typescript",
    )
    assert (await run(initialized, uri))["status"] == "ok"
    for _ in range(40):  # (Deno may publish the value after its answer: it comes a moment later)
        stored = list((folder / ".runfix" / "outputs").rglob("*.html"))
        if stored:
            break
        await asyncio.sleep(0.05)
    assert stored and "<td>2</td>" in stored[0].read_text(), stored


async def test_a_value_published_after_the_kernels_answer_shows_on_its_line(
    null_client: Any, folder: Path
) -> None:
    """Deno's kernel now and then publishes a cell's value after its idle and its reply (the
    null kernel does, 50 ms after, for code that starts `-- late`): the run is answered, and
    the value shows on its line a moment later, its HTML stored and its record amended. The
    next run is the kernel's own again."""
    initialized = null_client
    await initialized.initialize_session(init_params(folder, "neovim@v0.11.0", {}))
    uri = open_doc(initialized, folder / "late.lua", "-- late\nx\n", language="lua")
    assert (await run(initialized, uri))["status"] == "ok"
    for _ in range(100):
        shown = await _hint_texts(initialized, uri)
        if shown:
            break
        await asyncio.sleep(0.05)
    assert shown == [(1, "→ <html>")], shown  # (its text is the hover's)
    stored = list((folder / ".runfix" / "outputs").rglob("*.html"))
    assert stored and "<b>late value</b>" in stored[0].read_text(), stored
    with sqlite3.connect(folder / ".runfix" / "runs.db") as db:
        [outputs] = [row[0] for row in db.execute("SELECT outputs FROM runs")]
    assert '"kind": "html"' in outputs, outputs  # (the record names the stored file)
    again = open_doc(initialized, folder / "again.lua", "-- late\ny\n-- %%\nz\n", language="lua")
    assert (await run(initialized, again))["status"] == "ok"  # the first cell's late value
    await asyncio.sleep(0.3)  # came while the second ran: taken as no one's, never as its
    assert await _hint_texts(initialized, again) == [], "a late value shown on the wrong cell"
