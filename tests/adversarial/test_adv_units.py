"""The pieces behind the adversarial cases, without a server: framing, lines, terminal text,
cancellation and pygls's request bookkeeping."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from lsprotocol import types as lsp

from executor.cancel import CANCELLED, or_cancelled
from executor.text import split_lines
from lsp_server.lsp.app import create_server
from lsp_server.outputs.results import terminal_text
from lsp_server.text.frames import read_frame


def _reader(data: bytes) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    reader.feed_eof()
    return reader


def _frame(body: bytes, length: int | None = None) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body


async def test_frames_resync_after_a_short_and_a_long_length() -> None:
    first, second, third = b'{"a": "h\xc3\xa9llo"}', b'{"b": 2}', b'{"c": 3}'
    data = (
        _frame(first, len(first) - 2)
        + _frame(second)
        + b"garbage line\r\n"
        + _frame(b'{"x": 1}', 30)
        + _frame(third)
        + _frame(third)
    )
    reader = _reader(data)
    bodies = []
    while (body := await read_frame(reader)) is not None:
        bodies.append(body)
    assert bodies[0] == first[:-2]
    assert bodies[1] == second  # found again behind the 2 bytes left over
    assert bodies[-1] == third  # and after a frame that swallowed part of the next
    assert len(bodies) == 4


async def test_headers_in_any_case_and_extra_headers() -> None:
    body = b'{"ok": true}'
    data = b"content-length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body)
    assert await read_frame(_reader(data + body)) == body
    assert await read_frame(_reader(b"Content-Length: 99999999999\r\n\r\n{}")) is None


def test_lines_end_only_where_lsp_says() -> None:
    text = "a\x0cb\r\nc\u2028d\x85e\rf\n\ng"
    assert split_lines(text) == ["a\x0cb\r\n", "c\u2028d\x85e\r", "f\n", "\n", "g"]
    assert split_lines("") == []
    assert split_lines("x\n") == ["x\n"]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[1;31mred\x1b[0m\n", "red\n"),
        (" 10%|#  |\r 50%|## |\r100%|###|\n", "100%|###|\n"),
        ("abcdef\rXY\n", "XYcdef\n"),
        ("line\r\nnext\n", "line\nnext\n"),
        ("bell\x07 and \x1b]0;title\x07ok", "bell and ok"),
    ],
)
def test_terminal_text(raw: str, shown: str) -> None:
    assert terminal_text(raw) == shown


async def test_or_cancelled_stops_the_work_and_never_swallows_the_callers_cancel() -> None:
    cancel = asyncio.Event()
    stopped = asyncio.Event()

    async def work() -> str:
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()
        return "done"

    asyncio.get_running_loop().call_later(0.05, cancel.set)
    assert await or_cancelled(work(), cancel) is CANCELLED
    assert stopped.is_set()

    async def quick() -> str:
        return "done"

    assert await or_cancelled(quick(), asyncio.Event()) == "done"

    stopped.clear()
    caller = asyncio.ensure_future(or_cancelled(work(), asyncio.Event()))
    await asyncio.sleep(0.05)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert stopped.is_set()


async def test_finished_commands_leave_no_request_future_behind() -> None:
    server = create_server()
    sent: list[Any] = []
    server.protocol._send_data = sent.append  # type: ignore[method-assign, assignment]
    server.protocol.set_writer(object())  # type: ignore[arg-type]

    def handle(message: dict[str, Any]) -> None:
        server.protocol.handle_message(
            json.loads(json.dumps(message), object_hook=server.protocol.structure_message)
        )

    handle(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}},
        }
    )
    for number in range(1, 51):
        handle(
            {
                "jsonrpc": "2.0",
                "id": number,
                "method": lsp.WORKSPACE_EXECUTE_COMMAND,
                "params": {"command": "runfix.interrupt", "arguments": []},
            }
        )
    await asyncio.sleep(0.1)
    assert len([m for m in sent if getattr(m, "id", None) not in (None, 0)]) == 50
    assert server.protocol._request_futures == {}


# -- issue 36, S3 14: what the output limit cuts ------------------------------------------


class _Collected:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)


def test_a_colour_code_is_never_cut_in_two_by_the_output_limit() -> None:
    from executor._kernel_side import _Budget

    stream = _Collected()
    budget = _Budget(100)  # a head of 50 characters, a tail of 50
    flood = "x" * 48 + "\x1b[31mRED\x1b[0m" + "y" * 300 + "\x1b[32mGREEN\x1b[0m" + "z" * 10
    stream.write(budget.take_stream(stream, None, flood))
    head = stream.text
    budget.flush_tail()
    shown = terminal_text(stream.text)
    assert head == "x" * 48  # the code that would be cut goes with what is dropped
    assert "[3" not in shown and "1m" not in shown and "2m" not in shown, shown
    assert shown.endswith("GREEN" + "z" * 10)


def test_a_carriage_return_bomb_shows_its_last_frame() -> None:
    from executor._kernel_side import _Budget

    stream = _Collected()
    budget = _Budget(1000)
    for i in range(20_000):
        kept = budget.take_stream(stream, None, f"\r{i}")
        stream.write(kept)
    budget.flush_tail()
    first = terminal_text(stream.text).splitlines()[0]
    assert first == "19999", first  # not the frame the head stopped at
