"""The contract the editors read: command names, their arguments and answers, and the
shape of `Diagnostic.data`.

`editors/vscode` and `editors/nvim` call these commands by name and read these
answers; a change here is a change to them. Arguments are checked strictly (a
number where a URI belongs is an error, not `"3"`), and a malformed one is
reported with the path of the field that is wrong (`$.range.start.line`).
Answers go out in camelCase with unset fields left out.

Nothing here imports LSP: `runfix run` builds the same answers.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, TypeVar, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

RUN = "runfix.run"
RUN_AND_FIX = "runfix.runAndFix"
GENERATE = "runfix.generate"
FIX_WITH_MODEL = "runfix.fixWithModel"
INSTALL = "runfix.install"
INTERRUPT = "runfix.interrupt"
RESTART = "runfix.restart"
VARIABLES = "runfix.variables"
CLEAR = "runfix.clear"
STATUS = "runfix.status"
SHOW_OUTPUT = "runfix.showOutput"
OUTPUTS = "runfix.outputs"
HISTORY = "runfix.history"
RUN_ABOVE = "runfix.runAbove"
RUN_BELOW = "runfix.runBelow"
RUN_DEPENDENTS = "runfix.runDependents"
RESTART_AND_RUN_TO = "runfix.restartAndRunTo"
EXPORT = "runfix.export"
TRUST = "runfix.trust"
UNTRUST = "runfix.untrust"
RUN_TESTS = "runfix.runTests"
FIX_TESTS = "runfix.fixTests"

DEBUG_CELL = "runfix.debugCell"
DEBUG_ERROR = "runfix.debugError"
"""The editor's own commands (not the server's: it cannot start the editor's debugger), named
by a lens and a code action where the client says it has them (`DEBUG_CAPABILITY`): a debug
session of `runfix dap` on the cell of `{uri, line}` (0-based), stopping at the error."""

COMMANDS: tuple[str, ...] = (RUN, RUN_AND_FIX, GENERATE, FIX_WITH_MODEL, INSTALL)
COMMANDS += (INTERRUPT, RESTART, VARIABLES, CLEAR, STATUS, SHOW_OUTPUT, OUTPUTS, HISTORY)
COMMANDS += (RUN_ABOVE, RUN_BELOW, RUN_DEPENDENTS, RESTART_AND_RUN_TO, EXPORT, TRUST, UNTRUST)
COMMANDS += (RUN_TESTS, FIX_TESTS)

STATUS_NOTIFICATION = "runfix/status"
"""Server → client: a folder's kernel state changed (`KernelStatus`)."""
INPUT_REQUEST = "runfix/input"
"""Server → client: `{"prompt", "password"}` → `{"value": str | null}` (`input()`)."""
INPUT_CAPABILITY = "runfixInput"
"""`capabilities.experimental.runfixInput: true`: the client answers `runfix/input`."""
OUTPUTS_NOTIFICATION = "runfix/outputs"
"""Server → client, to a client that declares `experimental.runfixOutputs: true`: runs
gave a document new outputs (`OutputsChanged`); an output view refreshes or opens."""
OUTPUTS_CAPABILITY = "runfixOutputs"
DEBUG_CAPABILITY = "runfixDebug"
"""`experimental.runfixDebug: true`: the client runs `DEBUG_CELL` and `DEBUG_ERROR` itself
(runfix's VS Code extension; its Neovim plugin where nvim-dap is installed)."""

SOURCE = "runfix"
"""`Diagnostic.source` of everything runfix publishes."""


class Status(enum.Enum):
    """How a command ended."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    FIXED = "fixed"
    """Run and fix: a failing piece was fixed (the passing version applied)."""
    FAILED = "failed"
    """Run and fix: it failed, and no fix ran clean."""


def _document(_: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not value:
        raise ValueError(f"{attribute.name} must be a document URI")


def _not_negative(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative")


# -- arguments ------------------------------------------------------------------------


@attrs.frozen
class Position:
    line: int = attrs.field(validator=_not_negative)
    character: int = attrs.field(default=0, validator=_not_negative)


@attrs.frozen
class Range:
    start: Position
    end: Position

    def __attrs_post_init__(self) -> None:
        if (self.end.line, self.end.character) < (self.start.line, self.start.character):
            raise ValueError("the range must not end before it starts")

    @classmethod
    def lines(cls, first: int, last: int) -> Range:
        """Whole lines first..last: from column 0 of `first` to column 0 after `last`."""
        return cls(Position(first, 0), Position(last + 1, 0))


@attrs.frozen
class DocumentArgs:
    """`{"uri"}`: the document (interrupt, restart, variables, clear take it or nothing)."""

    uri: str = attrs.field(validator=_document)


TRUST_CHOICES = ("trust", "sandbox", "own")


@attrs.frozen
class TrustArgs:
    """`runfix.trust`: how the folder of `uri` (a document or a folder; none: every
    workspace folder) may run its code — `trust` (its own interpreter and settings),
    `sandbox` (the Docker executor) or `own` (runfix's own Python). Kept in the user's
    state folder, unless `session` (this server's life only: what VS Code's Workspace
    Trust says). `runfix.untrust` takes `{"uri"}` (or nothing): the decision is forgotten
    and the folder's kernel stops. Both answer `TrustState` per folder."""

    uri: str | None = None
    choice: str = attrs.field(default="trust", validator=attrs.validators.in_(TRUST_CHOICES))
    session: bool = False


@attrs.frozen
class TrustState:
    folder: str
    """The folder's URI."""
    choice: str | None
    """trust | sandbox | own; None: undecided (nothing of the folder's runs here)."""


@attrs.frozen
class HistoryArgs:
    """`runfix.history`: the latest runs of a document (`uri`), else of every folder,
    newest first. Each is an object (`RecordedRun.to_json`, with the document's `uri`):
    id, path, first/last (0-based lines), code, origin (user | model), status, started
    (Unix time), durationMs, cpuMs, peakBytes, memoryGrowthBytes, memoryChangeBytes,
    outputs (line, last, text, kind, file), error, fixOf; `figures` and `said` put them in
    words (`0.26 s · CPU 0.24 s · peak +58.1 MB · kept +0.0 MB`, `→ DataFrame 2×2`)."""

    uri: str | None = None
    limit: int = attrs.field(
        default=50,
        validator=attrs.validators.and_(attrs.validators.ge(1), attrs.validators.le(10_000)),
    )


@attrs.frozen
class ExportArgs:
    """`runfix.export`: the document as it stands in the editor, as a notebook next to its
    file (`<name>.ipynb`), each code cell with its last recorded outputs. Answers
    `ExportAnswer`."""

    uri: str = attrs.field(validator=_document)


@attrs.frozen
class ExportAnswer:
    path: str
    cells: int
    with_outputs: int


@attrs.frozen
class RunArgs:
    """`runfix.run`, `runfix.runAndFix`: the range's lines, the cell holding `position`,
    or (neither) every cell of the document. `runfix.runAbove` (the cells before the one
    holding `position`), `runfix.runBelow` (that cell and the cells after it),
    `runfix.runDependents` (the cells below that read what that cell defines, directly or
    through others, in file order), `runfix.restartAndRunTo` (restart the kernel, then
    every cell up to and including it) take `position` (or the range's start)."""

    uri: str = attrs.field(validator=_document)
    range: Range | None = None
    position: Position | None = None


@attrs.frozen
class TestsArgs:
    """`runfix.runTests`: the project's tests (pytest) — in a test file, the test at
    `position` (none: the file's tests); in another file, all of its folder's. Answers a
    `RunAnswer` whose message is pytest's tally (`3 passed, 1 failed in 0.52 s`); each
    failure shows on the line of the test that failed and on the module's line that
    raised. `runfix.fixTests` takes the same: it runs those tests, then fixes each
    failure's module function with the model (applied as an edit of the module, only once
    the failing tests pass and every test that passed still does; a test file is never
    edited) and answers a `FixAnswer`."""

    uri: str = attrs.field(validator=_document)
    position: Position | None = None


@attrs.frozen
class GenerateArgs:
    """`runfix.generate`: write (or rewrite) the body of the prompt at `position`."""

    uri: str = attrs.field(validator=_document)
    position: Position
    run: bool = False


def _piece(_: Any, attribute: attrs.Attribute[Any], value: tuple[int, int]) -> None:
    first, last = value
    if first < 0 or last < first:
        raise ValueError(f"{attribute.name} must be [first line, last line], first <= last")


@attrs.frozen
class FixArgs:
    """`runfix.fixWithModel`, and the `data` of a "Fix with model" code action: lines
    `piece` raised `message`."""

    uri: str = attrs.field(validator=_document)
    piece: tuple[int, int] = attrs.field(validator=_piece)
    message: str


@attrs.frozen
class InstallArgs:
    """`runfix.install`: install distributions into the folder's kernel, then re-run `range`.
    With `ask` (a name no data vouches for: `pip install websocket` installs someone
    else's package), the user is asked first, whatever else allows installs."""

    uri: str = attrs.field(validator=_document)
    packages: list[str]
    range: Range | None = None
    ask: str | None = None
    """Why the user is asked (`no known package provides import x`); None: not asked."""

    def __attrs_post_init__(self) -> None:
        if not self.packages:
            raise ValueError("packages must name at least one distribution")


@attrs.frozen
class ProblemData:
    """`Diagnostic.data` of runfix's diagnostics: what a code action needs to rebuild a fix."""

    kind: str
    """`run` (an error a run raised), `safety` (a scan finding on model-written code) or
    `trust` (nothing ran: the folder is not trusted; its quick fixes decide)."""
    message: str
    piece: tuple[int, int] | None = None
    """The lines that ran (for a `run` error)."""


# -- answers --------------------------------------------------------------------------


@attrs.frozen
class RunAnswer:
    status: Status
    duration_ms: float = 0.0
    message: str | None = None


@attrs.frozen
class FixAnswer:
    status: Status
    attempts: int = 0
    message: str | None = None
    checked: str | None = None
    """What the fix was checked against: `verified: 3 dependent cells still pass`, `breaks
    …`, `not checked against dependents: …` (and a deletion-style fix says so)."""
    says: str | None = None
    """What the fixed code printed or returned when it ran (one line): a person judges the
    result, not the word "fixed"."""


@attrs.frozen
class GenerateAnswer:
    status: Status
    range: Range | None = None
    """Where the generated code stands."""
    run: RunAnswer | None = None
    message: str | None = None


@attrs.frozen
class InstallAnswer:
    status: Status
    message: str | None = None
    output: str | None = None
    run: RunAnswer | None = None


@attrs.frozen
class KernelStatus:
    """A folder's kernel (`runfix.status`, `runfix/status`)."""

    folder: str
    state: str
    executor: str
    """What runs the code, for the status line: "kernel", "docker", "remote · host"."""


VARIABLE_FIELDS = ("name", "type", "summary", "shape", "length", "columns")
"""`runfix.variables` answers a list of objects with these fields (the kernel's
`executor.events.Variable`s: shape, length and columns where they apply)."""


@attrs.frozen
class ShowOutputAnswer:
    """`runfix.showOutput` (`RunArgs`: the statement at `position`, or at the range's start):
    the output page's address, and whether the client was asked to open it
    (`window/showDocument`, external) and said it did."""

    url: str
    shown: bool


@attrs.frozen
class OutputItem:
    """One thing a statement showed. `kind`: text, image, figure, svg, table (a DataFrame),
    html, markdown, latex or json."""

    kind: str
    text: str
    """The plain text (a rich output's one-line summary)."""
    image: str | None = None
    """A stored image's path (PNG, JPEG, SVG)."""
    file: str | None = None
    """The richest form's path (under the folder's `.runfix/outputs/`): for HTML, the
    kernel's HTML, to be shown only sandboxed."""
    table: str | None = None
    """A DataFrame's first rows as a markdown table."""
    markdown: str | None = None
    colored: str | None = None
    """Text with terminal colours, as HTML (escaped text in `<span class="ansi-…">`)."""
    printed: bool = False
    """Text the code printed (a stream), not a value it showed."""


@attrs.frozen
class OutputsAnswer:
    """`runfix.outputs` (`RunArgs`: `position`'s line): the outputs of the statement there,
    else of every statement of the cell holding it; and the folder's latest images, newest
    first, to flip through and compare."""

    uri: str
    folder: str
    first: int | None
    """The lines shown (0-based, inclusive); None: nothing ran there."""
    last: int | None
    outputs: list[OutputItem]
    images: list[str]
    outputs_dir: str
    """Where the stored outputs are (what a view may read, nothing else)."""
    cell: str | None = None
    """For a notebook's cell: the stored JSON of what Jupyter saves in it for its latest run
    (`{"execution_count": n, "outputs": [...]}`: the kernel's own mime bundles), under
    `outputs_dir` — what VS Code writes into the cell, and so into the file."""


@attrs.frozen
class OutputsChanged:
    """`runfix/outputs`: a document (a notebook's cell) got new results; `rich`, the first
    lines of those statements that showed more than text (a plot, a table…)."""

    uri: str
    rich: list[int]


@attrs.frozen
class Interrupted:
    interrupted: int


@attrs.frozen
class Restarted:
    restarted: int


WIRE_TYPES: tuple[type, ...] = (
    DocumentArgs,
    HistoryArgs,
    ExportArgs,
    ExportAnswer,
    RunArgs,
    GenerateArgs,
    FixArgs,
    InstallArgs,
    RunAnswer,
    FixAnswer,
    GenerateAnswer,
    InstallAnswer,
    KernelStatus,
    ShowOutputAnswer,
    OutputItem,
    OutputsAnswer,
    OutputsChanged,
    Interrupted,
    Restarted,
    Range,
    Position,
    ProblemData,
    TrustArgs,
    TrustState,
)


# -- conversion -----------------------------------------------------------------------

T = TypeVar("T")


class BadArguments(ValueError):
    """Arguments that do not fit their type; the message names each field that is wrong."""


def _strict(kind: type) -> Any:
    def structure(value: Any, _: Any) -> Any:
        fits = type(value) is kind or (kind is float and type(value) is int)
        if not fits:
            raise TypeError(f"expected {_json_name(kind)}, not {_json_name(type(value))}")
        return value

    return structure


def _json_name(kind: type) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "true or false"}
    names.update({dict: "an object", list: "an array", type(None): "null"})
    return names.get(kind, kind.__name__)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _make_converter() -> cattrs.Converter:
    """cattrs (what lsprotocol converts with), strict about JSON's types.

    lsprotocol's own converter turns `3` into `"3"` and `true` into `1`: right for a
    client's quirks in LSP's types, wrong for commands that act on what they are told."""
    converter = cattrs.Converter()
    for kind in (str, int, float, bool):
        converter.register_structure_hook(kind, _strict(kind))

    plain = converter.copy()  # cattrs's own sequences, with the strict types inside

    def is_sequence(kind: Any) -> bool:
        return get_origin(kind) in (list, tuple)

    def sequence(kind: Any) -> Any:
        inner = plain.get_structure_hook(kind)

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, (list, tuple)):  # not a string: not its characters
                raise TypeError(f"expected an array, not {_json_name(type(value))}")
            return inner(value, kind)

        return structure

    def record(kind: type) -> Any:
        inner: Any = make_dict_structure_fn(kind, converter)

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, dict):
                raise TypeError(f"expected an object, not {_json_name(type(value))}")
            return inner(value, kind)

        return structure

    converter.register_structure_hook_factory(is_sequence, sequence)
    converter.register_structure_hook_factory(attrs.has, record)

    def answer(kind: type) -> Any:
        """camelCase names; a field left unset (None by default) is left out."""
        fields = {
            a.name: override(rename=_camel(a.name), omit_if_default=a.default is None)
            for a in attrs.fields(kind)
        }
        return make_dict_unstructure_fn(kind, converter, **fields)  # type: ignore[arg-type]

    converter.register_unstructure_hook_factory(lambda kind: kind in WIRE_TYPES, answer)
    return converter


CONVERTER = _make_converter()


def _reason(exc: BaseException, _: Any = None) -> str:
    if isinstance(exc, KeyError):
        return "required"
    return str(exc)


def structure(value: Any, kind: type[T]) -> T:
    """`value` (JSON) as `kind`; BadArguments naming each field that is wrong."""
    if not isinstance(value, dict):
        raise BadArguments(f"expected an object, not {_json_name(type(value))}")
    try:
        return CONVERTER.structure(value, kind)
    except cattrs.BaseValidationError as exc:
        reasons = cattrs.transform_error(exc, path="$", format_exception=_reason)
        raise BadArguments("; ".join(reasons)) from None
    except (TypeError, ValueError) as exc:
        raise BadArguments(str(exc)) from None


def one_argument(arguments: Sequence[Any] | None, kind: type[T]) -> T:
    """A command's single argument as `kind` (commands take one object)."""
    if not arguments or len(arguments) != 1:
        count = len(arguments or ())
        raise BadArguments(f"expected one argument (an object), got {count}")
    return structure(arguments[0], kind)


def optional_argument(arguments: Sequence[Any] | None, kind: type[T]) -> T | None:
    """Nothing, or one argument as `kind`."""
    return one_argument(arguments, kind) if arguments else None


def to_json(answer: Any) -> Any:
    """An answer as it goes over the wire."""
    return CONVERTER.unstructure(answer)
