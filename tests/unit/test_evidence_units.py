"""What the live kernel knew when code raised, said for the fix request (issue 45): the
kernel helper's reads of a real traceback, made into lines a small model can act on; the
narrower request after an answer that changed nothing; the stream that ended early."""

from __future__ import annotations

import json
import linecache
import sys
from pathlib import Path
from typing import Any

import pytest

from executor import _kernel_live as live
from executor.events import Variable
from executor.text import split_lines
from lsp_server.fix.evidence import error_name, none_from, render
from lsp_server.model.client import ended_early
from lsp_server.model.context import (
    ReplyError,
    generate_messages,
    line_messages,
    reply_block,
    splice_line,
)


def raised(tmp_path: Path, source: str) -> tuple[dict[str, Any] | None, str, str]:
    """Run `source` as a file until it raises; what the helper reads of that error, its
    message, and the file's path."""
    path = tmp_path / "doc.py"
    path.write_text(source, encoding="utf-8")
    linecache.checkcache(str(path))
    try:
        exec(compile(source, str(path), "exec"), {"__name__": "__main__"})
    except Exception as exc:
        sys.last_value, sys.last_traceback = exc, exc.__traceback__
        found = json.loads(live.evidence(type(exc).__name__, 0))
        return found, f"{type(exc).__name__}: {exc}", str(path)
    raise AssertionError("it did not raise")


def said(tmp_path: Path, source: str, style: str = "facts") -> str:
    found, error, path = raised(tmp_path, source)
    return render(found, error, {path: split_lines(source)}, style=style)


@pytest.mark.parametrize(
    ("source", "fact"),
    [
        (
            "def pairs(xs):\n    return [(xs[i], xs[i + 1]) for i in range(len(xs))]\n"
            "pairs([1, 2, 3])\n",
            "`xs[i + 1]`: the index `i + 1` is 3, but `xs` has 3 items (indexes 0 to 2).",
        ),
        (
            'count = "7"\ntotal = count + 3\n',
            "`count + 3`: `count` is a str ('7'), `3` is an int (3).",
        ),
        (
            "def median(xs):\n    xs = sorted(xs)\n    return xs[len(xs) / 2]\nmedian([5, 1, 3])\n",
            "`len(xs) / 2` is a float (1.5)",
        ),
        (
            'S = {"timeout": 30}\ndef f():\n    return S["time_out"]\nf()\n',
            "`S` (a dict) has these keys: 'timeout' — not 'time_out'.",
        ),
        (
            "class Basket:\n    def __init__(self):\n        self.items = []\n"
            "    def add(self, p):\n        self.total += p\nBasket().add(3)\n",
            "`self` (a Basket) has these attributes: items, add — not total.",
        ),
        (
            "def top_two(scores):\n    ranked = scores.sort(reverse=True)\n"
            "    return ranked[:2]\ntop_two([3, 9, 4])\n",
            "`ranked` is None: it was assigned `ranked = scores.sort(reverse=True)` (line 2), "
            "and `.sort()` sorts it in place (`scores`) and returns None.",
        ),
    ],
    ids=["index", "plus", "float index", "key", "attribute", "in place"],
)
def test_the_request_says_what_the_failing_expression_held(
    tmp_path: Path, source: str, fact: str
) -> None:
    assert fact in said(tmp_path, source)


def test_a_none_from_a_function_without_return_names_it_and_where_it_is(tmp_path: Path) -> None:
    source = (
        "def normalise(xs):\n    total = sum(xs)\n    [x / total for x in xs]\n"
        "weights = normalise([1, 1, 2])\nsorted(range(3), key=lambda i: weights[i])\n"
    )
    found, error, path = raised(tmp_path, source)
    text = render(found, error, {path: split_lines(source)})
    assert "`normalise` (line 1) has no `return` of a value, so it returns None." in text
    assert none_from(found, error, {path: split_lines(source)}) == (path, 0)  # its def
    assert none_from(found, "TypeError: other", {path: split_lines(source)}) is None


def test_secrets_are_never_shown_and_the_evidence_is_bounded(tmp_path: Path) -> None:
    source = (
        "def call(host, api_token, config):\n    return host + len(config) + 1\n"
        "call('h', 'tok-999', {'password': 'pw-999', 'x': 1})\n"
        "\n" * 1
    )
    text = said(tmp_path, source, "full")  # (the frame's values too)
    assert "tok-999" not in text and "pw-999" not in text
    assert "`api_token` = <hidden" in text
    # a secret-named key's value is hidden, the mapping's other keys still shown (issue 58)
    assert "`config` = {'password': '<hidden: password's value>', 'x': 1}" in text
    text = said(tmp_path, "def call(api_token):\n    return api_token + 443\ncall('tok-999')\n")
    assert "`api_token` is a str (<hidden" in text and "tok-999" not in text
    many = "def f(" + ", ".join(f"a{i}" for i in range(40)) + "):\n    return a0 + 'x'\n"
    many += "f(" + ", ".join(str(i) * 150 for i in range(40)) + ")\n"
    assert len(said(tmp_path, many, "full")) <= 1500


def test_another_error_than_the_one_asked_about_is_not_described(tmp_path: Path) -> None:
    raised(tmp_path, "1 / 0\n")
    assert live.evidence("KeyError", 0) == "null"
    assert live.evidence("ZeroDivisionError", 7) == "null"  # not that line
    assert json.loads(live.evidence("ZeroDivisionError", 1)) is not None


def test_the_exception_name_is_read_from_an_error_text() -> None:
    assert error_name("Traceback ...\n  File x\nKeyError: 'a'\n") == "KeyError"
    assert error_name("pandas.errors.ParserError: bad") == "ParserError"
    assert error_name("it timed out") is None


def test_the_narrower_request_marks_the_line_and_its_answer_takes_that_lines_place() -> None:
    code = "def half(n):\n    return n / zero\n"
    [_, user] = line_messages(code, 1, "NameError: name 'zero' is not defined", "", "Said.")
    assert "    return n / zero  # <- this line raised" in user["content"]
    assert "Rewrite the line `return n / zero`" in user["content"]
    assert splice_line(code, 1, "return n / 2\n") == "def half(n):\n    return n / 2\n"
    two = splice_line(code, 1, "if n:\n    return n / 2\nreturn 0\n")
    assert two == "def half(n):\n    if n:\n        return n / 2\n    return 0\n"
    whole = "def half(n):\n    return n / 2\n"
    assert splice_line(code, 1, whole) == whole  # the whole code again is taken whole
    assert splice_line(code, 1, "return n / zero  # <- this line raised") == code
    assert reply_block("Here:\n```python\nx = 1\n```\n") == "x = 1\n"
    with pytest.raises(ReplyError, match="empty"):
        reply_block("  ")
    with pytest.raises(ReplyError, match="prose"):
        reply_block("I cannot see the problem.")


def test_a_stream_that_ended_early_is_told_from_a_whole_answer() -> None:
    assert ended_early("", None) == "no content"
    assert ended_early("```python\nx = ", None) == "no finish_reason"
    assert ended_early("```python\nx = 1\n", "stop") == "cut inside a code block"
    assert ended_early("```python\nx = 1\n", "length") is None  # its bound: what was asked
    assert ended_early("```python\nx = 1\n```", "stop") is None


def test_generate_says_what_the_names_the_prompt_mentions_hold() -> None:
    df = Variable("df", "DataFrame", shape=(3, 2), columns={"city": "object", "sales": "int64"})
    other = Variable("unrelated", "int", "5")
    lines = ["# ai: the total sales for Paris in df\n"]
    [_, user] = generate_messages(
        "the total sales for Paris in df", lines, 0, (1, 0), [df, other], 4000
    )
    assert user["content"].endswith(
        "\n(df: DataFrame shape=(3, 2) columns [city:object, sales:int64])"
    )


def test_a_fix_that_writes_out_a_neighbouring_cell_again_is_trimmed_to_the_code_asked() -> None:
    """A candidate runs in the user's kernel: lines at its end (or start) that repeat another
    cell of the file, and are no part of the code asked for, would run that cell again."""
    from lsp_server.model.context import extract_code

    context = ["rows = []\n", 'print(table["tea"])\n', "seen = seen + 1\n", "seen\n"]
    asked = 'table = {r["name"]: 1 for r in rows}\n'
    reply = (
        '```python\ntable = {r["item"]: 1 for r in rows}\nprint(table["tea"])\n'
        "seen = seen + 1\nseen\n```"
    )
    assert (
        extract_code(reply, asked=asked, context=context)
        == 'table = {r["item"]: 1 for r in rows}\n'
    )
    # a line of the code asked for stays, wherever else the file has it
    kept = "```python\nprint(table['x'])\nprint(table[\"tea\"])\n```"
    asked_two = "print(table['y'])\nprint(table[\"tea\"])\n"
    assert extract_code(kept, asked=asked_two, context=context).endswith('print(table["tea"])\n')
