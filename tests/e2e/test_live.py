"""The live kernel where the user types (issue 26): completion, hover and signature help from
what the folder's kernel holds, over LSP against a real `runfix serve` and a real kernel."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from tests.conftest import change, hover_text, open_doc, run

SETUP = """\
cfg = {"a": {"x": 1, "y": 2}, "b": 2}
class Box:
    pass
obj = Box()
setattr(obj, "made_at_run_time", 1)
exec("only_in_kernel = 42")
"""
TABLE = """\
import pandas as pd
df = pd.DataFrame({"price": [1.5, 2.0], "qty": [2, 3], "name": ["a", "b"]})
"""


async def complete(client: LanguageClient, uri: str, line: int, character: int) -> Any:
    return await client.text_document_completion_async(
        lsp.CompletionParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, character))
    )


def labels(answer: Any) -> list[str]:
    assert isinstance(answer, lsp.CompletionList), answer
    return sorted(item.label for item in answer.items)


async def typed(client: LanguageClient, uri: str, text: str, line: int, version: int) -> Any:
    """Type `text` as line `line` (a new last line) and ask for completion at its end."""
    change(client, uri, version, (line, 0), (line, 0), text + "\n")
    return await complete(client, uri, line, len(text))


async def test_completion_offers_keys_attributes_and_names_only_the_kernel_knows(
    initialized: LanguageClient, folder: Path, executor: str
) -> None:
    uri = open_doc(initialized, folder / "live.py", SETUP)
    assert (await run(initialized, uri))["status"] == "ok"
    end = SETUP.count("\n")

    keys = await typed(initialized, uri, 'print(cfg["', end, 2)
    assert labels(keys) == ["a", "b"]
    assert not keys.is_incomplete
    item = keys.items[0]
    assert item.label_details is not None and "kernel" in (item.label_details.description or "")
    assert item.text_edit is not None and item.text_edit.range.start.character == len('print(cfg["')

    assert labels(await typed(initialized, uri, "cfg['a']['", end + 1, 3)) == ["x", "y"]
    assert labels(await typed(initialized, uri, "obj.", end + 2, 4)) == ["made_at_run_time"]
    names = await typed(initialized, uri, "only", end + 3, 5)
    assert labels(names) == ["only_in_kernel"]  # `obj`, `cfg`: bound in the file, static
    assert names.items[0].sort_text.startswith("~")  # after the static server's names
    untouched = await typed(initialized, uri, "nothing_here.", end + 4, 6)
    assert not untouched or not untouched.items


async def test_columns_of_a_live_table_and_its_hover(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "table.py", TABLE)
    assert (await run(initialized, uri))["status"] == "ok"
    columns = await typed(initialized, uri, 'df["', 2, 2)
    assert labels(columns) == ["name", "price", "qty"]
    details = {i.label: i.label_details.description for i in columns.items if i.label_details}
    assert details["price"] == "kernel · float64"

    text = await hover_text(initialized, uri, 1, 1)  # on `df`, where it was made
    assert "shape (2, 3)" in text and "| price | float64 |" in text
    assert "from line 2" in text and "(stale)" not in text
    change(initialized, uri, 3, (0, 0), (0, 0), "import math\n")  # code above it changed
    text = await hover_text(initialized, uri, 2, 1)
    assert "(stale)" in text
    assert "shape (2, 3)" in text  # still what the kernel holds


async def test_nothing_of_the_users_code_runs_to_complete_or_hover(
    initialized: LanguageClient, folder: Path
) -> None:
    sign = folder / "getter-ran"
    code = (
        "class Trap:\n"
        "    @property\n"
        "    def boom(self):\n"
        f"        open({str(sign)!r}, 'w').write('ran')\n"
        "        return {'k': 1}\n"
        "    def __repr__(self):\n"
        f"        open({str(sign)!r}, 'w').write('repr')\n"
        "        return 'Trap()'\n"
        "t = Trap()\n"
    )
    uri = open_doc(initialized, folder / "trap.py", code)
    assert (await run(initialized, uri))["status"] == "ok"
    nothing = await typed(initialized, uri, 't.boom["', 9, 2)  # `boom` is a property
    assert not nothing or not nothing.items
    await hover_text(initialized, uri, 8, 0)  # on `t`
    change(initialized, uri, 3, (10, 0), (10, 0), "t.boom\n")
    await hover_text(initialized, uri, 10, 3)  # on `boom`
    assert not sign.exists()


async def test_a_running_cell_does_not_hold_completion_back(
    initialized: LanguageClient, folder: Path
) -> None:
    uri = open_doc(initialized, folder / "busy.py", SETUP + "import time\ntime.sleep(10)\n")
    end = SETUP.count("\n")
    assert (await run(initialized, uri, 0, end - 1))["status"] == "ok"
    running = asyncio.ensure_future(run(initialized, uri, end, end + 1))
    await asyncio.sleep(1.0)
    keys = await typed(initialized, uri, "cfg['", end + 2, 2)
    assert not running.done()  # answered while the cell runs (the kernel's subshell)
    assert labels(keys) == ["a", "b"] and not keys.is_incomplete
    await initialized.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.interrupt", [{"uri": uri}])
    )
    assert (await running)["status"] in ("cancelled", "error")


@pytest.mark.remote
async def test_without_subshells_a_busy_kernel_is_answered_from_its_picture(
    client: LanguageClient, folder: Path, jupyter_server: Any
) -> None:
    from tests.conftest import init_params

    await client.initialize_session(init_params(folder, "neovim@v0.11.0", {"executor": "remote"}))
    uri = open_doc(client, folder / "busy.py", SETUP + "import time\ntime.sleep(10)\n")
    end = SETUP.count("\n")
    assert (await run(client, uri, 0, end - 1))["status"] == "ok"
    idle = await typed(client, uri, "cfg['", end + 2, 2)
    assert labels(idle) == ["a", "b"] and not idle.is_incomplete
    running = asyncio.ensure_future(run(client, uri, end, end + 1))
    await asyncio.sleep(1.0)
    busy = await complete(client, uri, end + 2, len("cfg['"))
    assert not running.done()
    assert labels(busy) == ["a", "b"] and busy.is_incomplete  # the picture; ask again later
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("runfix.interrupt", [{"uri": uri}])
    )
    await running


@pytest.mark.settings({"completion": False})
async def test_completion_off_offers_nothing(initialized: LanguageClient, folder: Path) -> None:
    uri = open_doc(initialized, folder / "off.py", SETUP)
    assert (await run(initialized, uri))["status"] == "ok"
    answer = await typed(initialized, uri, "cfg['", SETUP.count("\n"), 2)
    assert not answer


async def test_signature_help_from_the_live_callable(
    initialized: LanguageClient, folder: Path
) -> None:
    code = "def scale(x, factor=2.0):\n    '''Multiply x.'''\n    return x * factor\n"
    uri = open_doc(initialized, folder / "sig.py", code)
    assert (await run(initialized, uri))["status"] == "ok"
    change(initialized, uri, 2, (3, 0), (3, 0), "scale(1, \n")
    help_ = await initialized.text_document_signature_help_async(
        lsp.SignatureHelpParams(lsp.TextDocumentIdentifier(uri), lsp.Position(3, 9))
    )
    assert help_ is not None
    [signature] = help_.signatures
    assert signature.label == "scale(x, factor=2.0)"
    assert help_.active_parameter == 1
