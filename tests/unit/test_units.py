"""Unit tests of the pure parts: cells, attribution, traceback mapping, moving results, settings."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pygls.workspace import PositionCodec

from executor.events import Error, Frame, RunOutcome, RunStatus, Span, Stream, Value
from executor.messages import MessageCollector
from executor.text import split_lines
from lsp_server.contract import BadArguments, Position, Range, RunArgs, one_argument
from lsp_server.lsp.convert import (
    diagnostics,
    inlay_hints,
    line_range,
    problem_range,
    result_diagnostics_json,
)
from lsp_server.lsp.text import Document
from lsp_server.outputs.results import (
    DocumentResults,
    Output,
    Problem,
    StatementResult,
    build,
    summarize,
)
from lsp_server.outputs.store import ResultStore, _edit_items, _move_statement, line_change
from lsp_server.runs import Piece, pieces_for
from lsp_server.settings import KNOWN_KEYS, USER_ONLY, Settings, resolve, section
from lsp_server.text.cells import split_cells
from lsp_server.text.positions import strip_eol, utf16_len

PATH = "/ws/doc.py"


def lines_of(text: str) -> list[str]:
    return text.splitlines(True)


# -- cells ------------------------------------------------------------------------------


def test_percent_cells_and_a_preamble() -> None:
    lines = lines_of("import os\n# %% one\na = 1\n// %% two\nb = 2\n")
    cells = split_cells(lines)
    assert [(c.first, c.last, c.has_marker) for c in cells] == [
        (0, 0, False),
        (1, 2, True),
        (3, 4, True),
    ]
    assert cells[1].code_first == 2


def test_a_file_without_markers_is_one_cell() -> None:
    assert [(c.first, c.last) for c in split_cells(lines_of("a\nb\nc\n"))] == [(0, 2)]


def test_pieces_skip_cells_without_code_and_ranges_cover_whole_lines() -> None:
    lines = lines_of("# just a comment\n# %%\n\n# %%\nx = 1\n")
    assert pieces_for(lines, None) == [Piece(4, 4)]
    selection = Range(Position(1, 3), Position(4, 0))
    assert pieces_for(lines, selection) == [Piece(1, 3)]
    assert pieces_for(lines, Range(Position(4, 2), Position(4, 2))) == [Piece(4, 4)]


@pytest.mark.parametrize(
    "args",
    [[], [1], [{"uri": ""}], [{"uri": "file:///a", "range": {"start": {"line": 2}}}]],
)
def test_malformed_run_arguments(args: list[object]) -> None:
    with pytest.raises(BadArguments):
        one_argument(args, RunArgs)


def test_run_arguments_reject_a_backwards_range() -> None:
    backwards = {"start": {"line": 3, "character": 0}, "end": {"line": 1, "character": 0}}
    with pytest.raises(BadArguments, match=r"end before it starts @ \$\.range"):
        one_argument([{"uri": "file:///a", "range": backwards}], RunArgs)


# -- attribution and traceback mapping --------------------------------------------------


def test_outputs_are_attributed_to_their_statements() -> None:
    lines = lines_of("for i in range(2):\n    print(i)\nx = 3\nx * 2\n")
    outcome = RunOutcome(
        RunStatus.OK,
        (
            Stream("stdout", "0\n1\n", Span(1, 2)),
            Value({"text/plain": "6"}, Span(4, 4)),
        ),
        0.01,
    )
    results = build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None)
    assert [(s.first, s.last, s.text) for s in results.statements] == [
        (0, 1, "0\n1\n"),
        (3, 3, "6\n"),
    ]
    hints = [hint for _, hint in inlay_hints(lines, results)]
    assert [(h["position"]["line"], h["position"]["character"], h["label"]) for h in hints] == [
        (1, 12, "→ 0 …"),
        (3, 5, "→ 6"),
    ]


def test_error_lands_on_the_innermost_frame_in_this_document() -> None:
    lines = lines_of("def f(d):\n    return g(d)\n\n\nf({})\n")
    error = Error(
        "KeyError",
        "'b'",
        (
            Frame(PATH, 5, "<module>"),
            Frame(PATH, 2, "f"),
            Frame("/usr/lib/python3/somewhere.py", 10, "g"),
        ),
        "Traceback ...",
        Span(5, 5),
    )
    outcome = RunOutcome(RunStatus.ERROR, (error,), 0.01)
    results = build(outcome, path=PATH, lines=lines, fallback_line=4, folder=None)
    [problem] = results.problems
    assert (problem.first, problem.message) == (1, "KeyError: 'b'")
    assert [(r.line, r.name, r.path) for r in problem.related] == [(4, "called from here", None)]
    [diagnostic] = diagnostics("file:///ws/doc.py", lines, results)
    assert diagnostic.range == lsp.Range(lsp.Position(1, 4), lsp.Position(1, 15))
    assert diagnostic.severity == lsp.DiagnosticSeverity.Error


def test_result_diagnostics_are_the_json_lsprotocol_would_send() -> None:
    """Published as JSON made directly (ten thousand of them after each edit): the same as
    lsprotocol's objects converted, fresh and stale, in UTF-16 columns, after an Enter."""
    lines = lines_of("  x = '🐍'\nx\nprint('a')\n")
    store = ResultStore()
    statements = [
        StatementResult(1, 1, (Output("'🐍'\n"),), ("x",)),
        StatementResult(2, 2, (Output("a\n"),), ("print('a')",)),
    ]
    store.add("u", 0, DocumentResults(statements=statements), lines)
    lines = ["\n", *lines]
    store.edit("u", 1, [line_change(0, 0, "\n")], lines)  # Enter: both move down, lazily
    edited = ["\n", "  x = '🐍!'\n", *lines[2:]]
    store.edit("u", 2, [line_change(1, 1, "!")], edited)  # code above both: stale
    results = store.get("u")
    made = result_diagnostics_json(edited, results)
    converter = get_converter()
    expected = [
        converter.unstructure(
            lsp.Diagnostic(
                range=line_range(edited, s.last),
                message=f"→ {s.summary} (stale: {stale.reason})",
                severity=lsp.DiagnosticSeverity.Information,
                source="runfix",
                tags=[lsp.DiagnosticTag.Unnecessary],
            )
        )
        for s in results.statements
        if (stale := results.stale(s)) is not None
    ]
    assert len(expected) == 2
    assert made == expected
    assert [d["range"]["start"]["line"] for d in made] == [2, 3]
    assert all(d["message"].endswith(")") and d["tags"] == [1] for d in made)


def test_syntax_error_points_at_its_column_in_utf16() -> None:
    lines = lines_of('x = "🐍" + )\n')
    problem = Problem(0, 0, "SyntaxError: unmatched ')'", "error", column=10, source=("",))
    assert problem_range(lines, problem) == lsp.Range(lsp.Position(0, 11), lsp.Position(0, 12))


def test_a_timeout_is_a_warning_on_the_running_statement() -> None:
    lines = lines_of("a = 1\nwhile True: pass\n")
    outcome = RunOutcome(RunStatus.TIMEOUT, (), 1.0, note="Timed out after 1s", span=Span(2, 2))
    [problem] = build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None).problems
    assert (problem.first, problem.severity, problem.message) == (
        1,
        "warning",
        "Timed out after 1s",
    )


def test_png_outputs_are_saved_under_runfix_outputs(tmp_path: Path) -> None:
    import base64

    png = (
        b"\x89PNG\r\n\x1a\n"
        + b"\x00\x00\x00\rIHDR"
        + (640).to_bytes(4, "big")
        + (480).to_bytes(4, "big")
    )
    outcome = RunOutcome(
        RunStatus.OK, (Value({"image/png": base64.b64encode(png).decode()}, Span(1, 1)),), 0.0
    )
    results = build(outcome, path=PATH, lines=["plot()\n"], fallback_line=0, folder=tmp_path)
    [statement] = results.statements
    [output] = statement.outputs
    assert output.image is not None and output.image.parent == tmp_path / ".runfix" / "outputs"
    assert output.image.read_bytes() == png
    assert statement.summary == "<image 640×480>"


def test_summaries_are_one_short_line() -> None:
    assert summarize("18.84955592153876\n") == "18.8495…"
    assert summarize("a\nb\n") == "a …"
    assert summarize("x" * 100).endswith("…") and len(summarize("x" * 100)) == 60


def test_collector_caps_output_and_tracks_statements() -> None:
    collector = MessageCollector(output_limit=5)

    def msg(kind: str, content: dict[str, object]) -> dict[str, object]:
        return {"header": {"msg_type": kind}, "content": content}

    marker = "application/x-runfix+json"
    collector.feed(msg("display_data", {"data": {marker: {"stmt": [3, 4]}}}))
    collector.feed(msg("stream", {"name": "stdout", "text": "abc"}))
    collector.feed(msg("stream", {"name": "stdout", "text": "defgh"}))
    collector.feed(msg("display_data", {"data": {marker: {"truncated": 10}}}))
    assert collector.events == [Stream("stdout", "abcde", Span(3, 4))]
    assert collector.truncated == 13


# -- results follow edits ----------------------------------------------------------------


def _store_with(lines: list[str]) -> ResultStore:
    store = ResultStore()
    outcome = RunOutcome(
        RunStatus.ERROR,
        (
            Stream("stdout", "one\n", Span(1, 1)),
            Stream("stdout", "two\n", Span(2, 3)),
            Error("ValueError", "no", ((Frame(PATH, 4, "<module>")),), "", Span(4, 4)),
        ),
        0.0,
    )
    results = build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None)
    store.add("u", 1, results, lines)
    return store


def test_lines_inserted_above_move_results() -> None:
    lines = lines_of("print('one')\nprint(\n 'two')\nraise ValueError('no')\n")
    store = _store_with(lines)
    new = lines_of("# a\n# b\n") + lines
    assert store.edit("u", 2, [line_change(0, 0, "# a\n# b\n")], new)
    results = store.get("u")
    assert [(s.first, s.last) for s in results.statements] == [(2, 2), (3, 4)]
    assert [p.first for p in results.problems] == [5]


def test_editing_a_statement_drops_only_its_result() -> None:
    lines = lines_of("print('one')\nprint(\n 'two')\nraise ValueError('no')\n")
    store = _store_with(lines)
    new = lines.copy()
    new[2] = " 'TWO')\n"
    store.edit("u", 2, [line_change(2, 2, "")], new)
    assert [s.text for s in store.get("u").statements] == ["one\n"]
    assert len(store.get("u").problems) == 1


def test_enter_at_the_end_of_a_statement_keeps_it() -> None:
    lines = lines_of("print('one')\nprint(\n 'two')\nraise ValueError('no')\n")
    store = _store_with(lines)
    new = [lines[0], "\n", *lines[1:]]
    store.edit("u", 2, [line_change(0, 0, "\n")], new)
    assert [(s.first, s.text) for s in store.get("u").statements] == [(0, "one\n"), (2, "two\n")]


def test_results_of_a_run_that_ends_after_edits_are_moved_through_them() -> None:
    lines = lines_of("x = 1\nprint(x)\n")
    store = ResultStore()
    store.edit("u", 2, [line_change(0, 0, "\n\n")], ["\n", "\n", *lines])  # while it ran
    outcome = RunOutcome(RunStatus.OK, (Stream("stdout", "1\n", Span(2, 2)),), 0.0)
    results = build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None)
    store.add("u", 1, results, ["\n", "\n", *lines])
    assert [s.first for s in store.get("u").statements] == [3]


def test_a_whole_text_replacement_drops_results_of_runs_in_flight() -> None:
    lines = lines_of("print(1)\n")
    store = ResultStore()
    store.reset("u", 5)
    outcome = RunOutcome(RunStatus.OK, (Stream("stdout", "1\n", Span(1, 1)),), 0.0)
    store.add("u", 4, build(outcome, path=PATH, lines=lines, fallback_line=0, folder=None), lines)
    assert not store.has("u")


# -- settings ---------------------------------------------------------------------------


def test_settings_layers_later_wins_and_bad_values_fall_back() -> None:
    settings = resolve(
        ("pyproject", {"timeout": 5, "outputLimit": 500}),
        ("initializationOptions", {"timeout": 10, "results": "both"}),
        ("workspace/configuration", {"timeout": "soon", "results": "diagnostics", "x": 1}),
    )
    assert settings.timeout == 10  # "soon" is refused; the layer below stands
    assert settings.output_limit == 500
    assert settings.results == "diagnostics"
    assert any("timeout = 'soon'" in p for p in settings.problems)
    assert any("unknown setting 'x'" in p for p in settings.problems)


def test_settings_defaults_and_a_null_configuration() -> None:
    assert resolve(("workspace/configuration", None)) == Settings()
    assert section({"runfix": {"timeout": 3}}) == {"timeout": 3}
    assert section(None) == {}
    assert "expected an object" in resolve(("x", [1])).problems[0]


def test_the_vscode_settings_are_the_servers_and_their_defaults_are_valid() -> None:
    """package.json declares every server setting, and VS Code's answer for the "runfix"
    section (every default, unset ones null, minus the extension's own `path`,
    `openOutput` and `languages`) is clean."""
    package = json.loads((Path(__file__).parents[2] / "editors/vscode/package.json").read_text())
    properties = package["contributes"]["configuration"]["properties"]
    own = {"path", "openOutput", "languages"}
    declared = {key.removeprefix("runfix.") for key in properties} - own
    assert declared == set(KNOWN_KEYS)
    section: dict[str, Any] = {}
    for key in declared:
        group, _, name = key.rpartition(".")
        target = section.setdefault(group, {}) if group else section
        target[name or key] = properties[f"runfix.{key}"]["default"]
    settings = resolve(("workspace/configuration", section))
    assert settings.problems == ()
    assert settings == replace(Settings(), problems=())
    # What a project file may not set, a workspace's .vscode/settings.json may not either:
    # VS Code takes "machine" and "application" settings from the user's own settings only
    # ("application" also in a remote window), and the extension forwards no other value.
    scopes = ("machine", "application")
    machine = {key for key in declared if properties[f"runfix.{key}"].get("scope") in scopes}
    assert machine == set(USER_ONLY)


def test_typing_above_many_results_checks_only_what_it_touched() -> None:
    count = 10_000
    lines = lines_of("".join(f"print({i})\n" for i in range(count)))
    store = ResultStore()
    statements = [
        StatementResult(i, i, (Output(f"{i}\n"),), (f"print({i})",)) for i in range(count)
    ]
    store.add("u", 1, DocumentResults(statements=list(statements)), lines)
    kept = store.get("u").statements

    typed = ["#" + lines[0], *lines[1:]]  # typing on line 0 changes only line 0
    assert store.edit("u", 2, [line_change(0, 0, "#")], typed)
    assert [s.first for s in store.get("u").statements[:2]] == [1, 2]  # line 0's result went
    assert all(a is b for a, b in zip(store.get("u").statements, kept[1:], strict=True))

    entered = ["\n", *typed]  # Enter at the top: everything below moves down by one
    assert store.edit("u", 3, [line_change(0, 0, "\n")], entered)
    moved = store.get("u").statements
    assert [(s.first, s.source) for s in moved[:2]] == [(2, ("print(1)",)), (3, ("print(2)",))]
    assert moved[-1].first == count and len(moved) == count - 1


def test_edits_move_results_as_moving_each_one_would() -> None:
    """Random single edits (lines added, removed, typed in) over statements, reading between
    them or not: where the store's statements are, and what `statement_at` finds, is what
    moving every statement through every edit, one by one, gives."""
    rng = random.Random(5)
    for _ in range(200):
        rows = [f"s{i}" if rng.random() < 0.7 else "" for i in range(rng.randrange(1, 30))]
        statements = [
            StatementResult(i, i, (Output(f"{i}\n"),), (row,)) for i, row in enumerate(rows) if row
        ]
        store = ResultStore()
        store.add("u", 0, DocumentResults(statements=list(statements)), [r + "\n" for r in rows])
        expected = list(statements)
        for version in range(1, 12):
            # Replace (l1, c1)..(l2, c2) with `text`, as a client's change says it.
            l1 = rng.randrange(len(rows))
            l2 = min(len(rows) - 1, l1 + rng.choice([0, 0, 0, 1, 2]))
            c1 = rng.randrange(len(rows[l1]) + 1)
            c2 = (
                rng.randrange(len(rows[l2]) + 1)
                if l2 > l1
                else rng.randrange(c1, len(rows[l1]) + 1)
            )
            text = rng.choice(["\n", "\n\n", "x", "", "y\nz", "\nq"])
            joined = rows[l1][:c1] + text + rows[l2][c2:]
            rows[l1 : l2 + 1] = joined.split("\n")
            lines = [r + "\n" for r in rows]
            change = line_change(l1, l2, text, deleted=(l1, c1) != (l2, c2))
            store.edit("u", version, [change], lines)
            expected, _ = _edit_items(expected, [change], lines, _move_statement)
            if rng.random() < 0.5:
                assert store.get("u").statements == expected
            for line in range(len(rows) + 1):
                found = store.get("u").statement_at(line)
                want = next((s for s in expected if s.first <= line <= s.last), None)
                assert found == want, (line, found, want)
        assert store.get("u").statements == expected


def _client(lines: list[str], p: tuple[int, int, int]) -> lsp.Position:
    """A (line, code-point column) position as an LSP client sends it (UTF-16)."""
    content = strip_eol(lines[p[0]]) if p[0] < len(lines) else ""
    return lsp.Position(p[0], utf16_len(content[: p[1]]))


def test_incremental_changes_give_the_lines_a_whole_split_gives() -> None:
    """Random edits over text with every kind of line break and wide characters."""
    pieces = ["a", "é", "𝄞", "\n", "\r", "\r\n", "\x0c", "\u2028", " "]
    rng = random.Random(7)

    def text_of(n: int) -> str:
        return "".join(rng.choice(pieces) for _ in range(n))

    def position(lines: list[str]) -> tuple[int, int, int]:
        """A random valid position: (line, code-point column, offset in the text)."""
        if not lines:
            return 0, 0, 0
        line = rng.randrange(len(lines) + (1 if lines[-1].endswith(("\n", "\r")) else 0))
        content = strip_eol(lines[line]) if line < len(lines) else ""
        col = rng.randrange(len(content) + 1)
        return line, col, sum(len(x) for x in lines[:line]) + col

    for _ in range(400):
        text = text_of(rng.randrange(0, 40))
        doc = Document("file:///t.py", source=text, position_codec=PositionCodec())
        for _ in range(5):
            lines = split_lines(text)
            a, b = sorted([position(lines), position(lines)], key=lambda p: p[2])
            insert = text_of(rng.randrange(0, 6))

            change = lsp.TextDocumentContentChangePartial(
                range=lsp.Range(_client(lines, a), _client(lines, b)), text=insert
            )
            doc.apply_change(change)
            text = text[: a[2]] + insert + text[b[2] :]
            assert doc.source == text
            assert list(doc.lines) == split_lines(text)


def test_clearing_lines_drops_exactly_the_results_that_touch_them() -> None:
    rng = random.Random(11)
    for _ in range(300):
        statements, line = [], 0
        for _ in range(rng.randrange(0, 12)):
            line += rng.randrange(0, 4)
            end = line + rng.randrange(0, 3)
            source = ("x",) * (end - line + 1)
            statements.append(StatementResult(line, end, (Output(f"{line}\n"),), source))
            line = end + 1
        first = rng.randrange(0, line + 2)
        last = first + rng.randrange(-1, 5)
        store = ResultStore()
        store.add("u", 0, DocumentResults(list(statements)), ["x\n"] * (line + 5))
        store.clear("u", first, last)
        kept = [s for s in statements if s.last < first or s.first > last]
        assert store.get("u").statements == kept, (statements, first, last)


def test_results_below_code_that_changed_are_stale_until_they_run_again() -> None:
    lines = lines_of("print('one')\nprint(\n 'two')\nraise ValueError('no')\n")
    store = _store_with(lines)
    # A comment typed above, or blank lines added: no state changed.
    commented = ["# note\n", *lines]
    store.edit("u", 2, [line_change(0, 0, "# note\n")], commented)
    assert [store.get("u").stale(s) for s in store.get("u").statements] == [None, None]
    # Code edited on the first line: the second statement's result is from before.
    edited = ["# note\n", "print('one!')\n", *lines[1:]]
    store.edit("u", 3, [line_change(1, 1, "!", deleted=False)], edited)
    results = store.get("u")
    [two_now] = results.statements  # the edited statement's own result went
    front = results.stale(two_now)
    assert front is not None and front.reason.startswith("line 2 was edited at ")
    [raised] = results.problems  # the error below is from before too
    assert results.stale(raised) == front
    # Run again: a fresh result is not stale.
    outcome = RunOutcome(RunStatus.OK, (Stream("stdout", "two\n", Span(3, 4)),), 0.0)
    again = build(outcome, path=PATH, lines=edited, fallback_line=2, folder=None)
    store.clear_made_at("u", 3, 2, 3)
    store.add("u", 3, again, edited)
    assert [results.stale(s) for s in store.get("u").statements] == [None]


def test_running_code_again_makes_results_below_it_stale() -> None:
    lines = lines_of("print('one')\nprint(\n 'two')\nraise ValueError('no')\n")
    store = _store_with(lines)
    store.clear_made_at("u", 1, 0, 0)  # the first statement runs again
    results = store.get("u")
    [two] = results.statements
    front = results.stale(two)
    assert front is not None and front.reason.startswith("the code at line 1 ran again at ")


def test_remote_settings_check_their_values_and_a_project_cannot_point_them_elsewhere() -> None:
    from executor.configs import LocalConfig, RemoteConfig
    from lsp_server.executors import kernel_config

    user = {
        "executor": "remote",
        "remote": {
            "url": "https://gpu.example.org:8888/",
            "tokenEnv": "GPU_TOKEN",
            "kernelEnv": {"KERNEL_USERNAME": "ada"},
        },
    }
    settings = resolve(("workspace/configuration", user))
    assert settings.problems == ()
    config = kernel_config(Path("/tmp"), settings)
    assert config == RemoteConfig(
        "https://gpu.example.org:8888", "GPU_TOKEN", kernel_env=(("KERNEL_USERNAME", "ada"),)
    )
    assert config.host == "gpu.example.org:8888"
    # Back on the local kernel, the server's token stays out of it like the model's key.
    local = kernel_config(Path(sys.executable).parent, replace(settings, executor="kernel"))
    assert isinstance(local, LocalConfig) and "GPU_TOKEN" in local.hidden_env
    # A token pasted where its variable's name belongs is refused and never repeated.
    pasted = resolve(("workspace/configuration", {"remote": {"tokenEnv": "abc 123-secret"}}))
    assert pasted.remote.token_env is None
    assert "abc 123-secret" not in pasted.problems[0] and "<hidden>" in pasted.problems[0]
    assert "expected an http(s) URL" in resolve(("x", {"remote.url": "gpu:8888"})).problems[0]
    project = resolve(("pyproject.toml [tool.runfix]", user))
    assert project.remote.url is None and project.remote.token_env is None
    # Nor choose who the kernel runs as on the user's gateway (KERNEL_UID=0, a namespace).
    assert project.remote.kernel_env == ()
    assert any("remote.kernelEnv is ignored" in p for p in project.problems)
    assert any("remote.url is ignored" in p for p in project.problems)


def test_a_trust_decision_is_derived_again_when_what_it_read_changed(tmp_path: Path) -> None:
    """Issue 71, 7: a run's trust decision is kept (one `stat` a run instead of a `realpath`
    and a walk up) while its inputs are as they were; each input changed between two looks
    gives the new decision: the decisions' file rewritten in the same clock tick with the
    same size (git's racy case), the folder a link names swapped for another."""
    import json
    import os

    from executor.trust import Choice, TrustStore

    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    link = tmp_path / "project"
    link.symlink_to(one)
    store = TrustStore(tmp_path / "trust.json")
    store.decide(one, Choice.TRUST)
    assert store.decision(link) == (one, Choice.TRUST)
    assert store.decision(link) == (one, Choice.TRUST)  # (kept)
    # the file rewritten with the same size and times: `own` for `trust`, padded alike
    before = os.stat(store.path)
    body = json.dumps({"version": 1, "folders": {str(one): "own"}})
    store.path.write_text(body.ljust(before.st_size))
    os.utime(store.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(store.path).st_size == before.st_size
    assert store.decision(link) == (one, Choice.OWN)
    # the link now names another folder, which nothing covers
    link.unlink()
    link.symlink_to(two)
    assert store.decision(link) is None
    store.decide(two, Choice.TRUST)
    assert store.decision(link) == (two, Choice.TRUST)
