"""Notebooks in and out: a percent script and its recorded outputs → `.ipynb`
(`runfix export`, `runfix.export`), and `.ipynb` → a percent script (`runfix import`).

Jupytext does the conversion between the two formats (markdown cells, cell
metadata, the header); runfix adds each code cell's last outputs from the run
record: printed text as a stream, a value's text as an `execute_result`, a DataFrame
or HTML as `text/html`, images as `image/png`/`image/jpeg`/`image/svg+xml`, an error
as an `error` output. nbformat validates what is written.

What a record names is read only if runfix stored it (`folder_files.stored_output`):
a record can come with a repository. Notebooks and scripts are written as new
files renamed into place, never through a link.
"""

from __future__ import annotations

import base64
import json
import re
import warnings
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor.events import Display, Error, RunOutcome, Stream, Value
from executor.files import replace_file
from lsp_server.folder_files import read_regular, safe_target, stored_output
from lsp_server.record.store import RecordedOutput, RecordedRun, standing
from lsp_server.record.tracebacks import ipython_traceback
from lsp_server.text.cells import code_of, split_cells
from lsp_server.text.languages import LANGUAGES, PYTHON, Language, of_kernel

if TYPE_CHECKING:
    from lsp_server.outputs.bundles import OutputFiles

_IMAGES = {".png": "image/png", ".jpg": "image/jpeg"}
NOTEBOOK_LIMIT = 256 * 1024 * 1024
"""Bytes of a notebook runfix reads (its outputs are most of it)."""


def outputs_of(run: RecordedRun, folder: Path | None) -> list[dict[str, Any]]:
    """A recorded run's outputs as a notebook's code cell holds them (nbformat 4)."""
    from nbformat import v4

    outputs = []
    for output in run.outputs:
        if output.kind != CELL_KIND:
            outputs.append(_output(output, v4, folder))
    if run.error:
        name, _, value = run.error.partition(": ")
        error = v4.new_output("error", ename=name, evalue=value, traceback=[run.error])  # type: ignore[no-untyped-call]
        outputs.append(error)
    return outputs


def _output(output: RecordedOutput, v4: Any, folder: Path | None) -> Any:
    path = stored_output(folder, output.file)
    data: dict[str, Any] = {"text/plain": output.text}
    try:
        body = read_regular(path) if path is not None else None
    except OSError:
        body = None
    if path is not None and body is not None:
        if path.suffix in _IMAGES:
            data[_IMAGES[path.suffix]] = base64.b64encode(body).decode()
        elif path.suffix == ".svg":
            data["image/svg+xml"] = body.decode(errors="replace")
        elif path.suffix == ".html":
            data["text/html"] = body.decode(errors="replace")
        elif path.suffix == ".md":
            data["text/markdown"] = body.decode(errors="replace")
    if len(data) == 1 and output.kind == "text":
        return v4.new_output("stream", name="stdout", text=output.text)
    if len(data) == 1 and output.kind == "value":
        data["text/plain"] = output.text.removesuffix("\n")
        return v4.new_output("execute_result", data=data, execution_count=None)
    return v4.new_output("display_data", data=data)


def kernelspec(language: Language) -> dict[str, str]:
    """A notebook's kernelspec for `language`: the installed kernel runfix runs it in (its
    name, as Jupyter will look it up), else the usual one's."""
    from executor.kernelspecs import find_spec

    spec = None if language.python else find_spec(language.kernel_languages)
    if spec is not None:
        return {"name": spec.name, "display_name": spec.display_name, "language": spec.language}
    name, display, said, _ = language.notebook
    return {"name": name, "display_name": display, "language": said}


def _format(language: Language) -> str:
    """jupytext's name of the percent format in `language` (`py:percent`, `R:percent`)."""
    return f"{language.notebook[3].lstrip('.')}:percent"


def write_notebook(
    text: str,
    runs: Sequence[RecordedRun],
    out: Path,
    folder: Path | None,
    language: Language = PYTHON,
) -> tuple[int, int]:
    """Write the percent script `text` (in `language`) as a notebook at `out`, each code
    cell with the outputs of its latest recorded `runs` whose code still stands (their
    stored files read from `folder`'s outputs), the kernel of its language named; (cells,
    with outputs). OSError where `out` must not be written (`folder_files.safe_target`)."""
    if (why := safe_target(out)) is not None:
        raise OSError(why)
    import jupytext
    import nbformat

    lines = text.splitlines(keepends=True)
    notebook = jupytext.reads(text, fmt=_format(language))
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    ours = [
        cell
        for cell in split_cells(lines)
        if code_of(lines, cell.code_first, cell.last).strip()
        and not lines[cell.first].rstrip().endswith(("[markdown]", "[md]"))
    ]
    with_outputs = 0
    at = 0
    for cell in code_cells:
        # The script's cell with this code (jupytext and runfix split the same markers;
        # a cell that cannot be matched is left without outputs rather than guessed).
        for i in range(at, len(ours)):
            mine = ours[i]
            if cell.source.strip() == code_of(lines, mine.code_first, mine.last).strip():
                at = i + 1
                cell_runs = standing(runs, lines, mine.code_first, mine.last)
                cell.outputs = [o for run in cell_runs for o in outputs_of(run, folder)]
                with_outputs += bool(cell.outputs)
                break
    notebook.metadata.pop("jupytext", None)
    notebook.metadata["kernelspec"] = kernelspec(language)
    notebook.metadata.setdefault("language_info", {"name": notebook.metadata.kernelspec.language})
    nbformat.validate(notebook)
    written = nbformat.writes(notebook)  # type: ignore[no-untyped-call]
    replace_file(out, written.encode())
    return len(notebook.cells), with_outputs


def kernel_language(notebook: Any) -> str | None:
    """The language a notebook's kernelspec (else its language_info) says its code is in."""
    metadata = notebook.metadata

    def of(key: str, field: str) -> Any:
        part = metadata.get(key)  # (a stranger's metadata: any shape)
        return part.get(field) if isinstance(part, dict) else None

    said = of("kernelspec", "language") or of("language_info", "name")
    return str(said) if said else None


def notebook_language(notebook: Any) -> Language:
    """The language of a notebook's code (`kernel_language`; Python for none, or one runfix
    does not run)."""
    said = kernel_language(notebook)
    return of_kernel(said) if said else PYTHON


def script_text(notebook: Any, language: Language) -> str:
    """A notebook as a percent script in `language` (`# %%`, `// %%`, …)."""
    import jupytext

    notebook.metadata.get("jupytext", {}).pop("text_representation", None)
    return str(jupytext.writes(notebook, fmt=_format(language)))


def read_notebook(source: Path) -> Any:
    """The notebook at `source` (nbformat 4); ValueError saying why it is not one (`load`)."""
    return load(source)[0]


# -- a notebook edited as a percent buffer (Neovim) -----------------------------------------

_KINDS = {"markdown": "markdown", "md": "markdown", "raw": "raw"}


def buffer_text(notebook: Any) -> str:
    """A notebook as the percent text an editor edits it as: each cell under its `# %%`
    line (`# %% [markdown]`, `# %% [raw]`, its text commented), a code cell's code as it
    is. `cells_of` reads it back to the same sources."""
    out = []
    for cell in notebook.cells:
        source = cell.source
        if cell.cell_type == "code":
            out.append("# %%\n" + source + "\n")
            continue
        said = "".join(f"# {_escaped(line)}\n" if line else "#\n" for line in source.split("\n"))
        out.append(f"# %% [{cell.cell_type}]\n" + said)
    return "".join(out)


_MARKER_LIKE = re.compile(r"\\*%%")
"""A markdown or raw line that, commented, would read as a cell marker (`%%`), or such a line
escaped already (`\\%%`): written with one backslash more, read with one less."""


def _escaped(line: str) -> str:
    return "\\" + line if _MARKER_LIKE.match(line) else line


def cells_of(text: str) -> list[tuple[str, str]]:
    """The cells (type, source) of a buffer's percent text (`buffer_text`); lines before the
    first `# %%` line are a code cell of their own."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("# %%"):
            said = line[4:].strip()
            kind = "code"
            if said.startswith("[") and said.endswith("]"):
                kind = _KINDS.get(said[1:-1].strip().lower(), "code")
            cells.append((kind, []))
            continue
        if not cells:
            cells.append(("code", []))
        cells[-1][1].append(line)
    out = []
    for kind, lines in cells:
        if kind != "code":
            lines = [_uncommented(line) for line in lines]
        body = "".join(lines)
        out.append((kind, body[:-1] if body.endswith("\n") else body))
    return out


def _uncommented(line: str) -> str:
    text = line.rstrip("\n")
    if text == "#":
        text = ""
    elif text.startswith("# "):
        text = text[2:]
        if text.startswith("\\") and _MARKER_LIKE.match(text[1:]):
            text = text[1:]
    return text + ("\n" if line.endswith("\n") else "")


def merged(notebook: Any, text: str, runs: Sequence[RecordedRun], folder: Path | None) -> Any:
    """The notebook the buffer's `text` makes of `notebook`: a cell whose type and source
    are unchanged keeps its id, metadata, attachments, outputs and count; an edited cell
    keeps its id and metadata; a code cell whose code ran (the latest of `runs`, newest
    first, of exactly its code) gets what that run showed — as Jupyter saves it, where the
    run kept that (`with_cell`); a new cell is a new cell. The notebook's own metadata is
    kept."""
    import copy

    from nbformat import v4

    result = copy.deepcopy(notebook)
    result.cells = []
    at = 0
    parts = cells_of(text)
    for n, (kind, source) in enumerate(parts):
        match = next(
            (
                i
                for i in range(at, len(notebook.cells))
                if notebook.cells[i].cell_type == kind and notebook.cells[i].source == source
            ),
            None,
        )
        if match is not None:
            cell, at = copy.deepcopy(notebook.cells[match]), match + 1
        elif _edited(notebook.cells, at, kind, parts[n + 1 : n + 2]):
            # the cell that stood here, edited: its id and metadata kept (as Jupyter and VS
            # Code keep them), its outputs gone with the code that made them
            cell, at = copy.deepcopy(notebook.cells[at]), at + 1
            cell.source = source
            if kind == "code":
                cell.outputs, cell.execution_count = [], None
        elif kind == "markdown":
            cell = v4.new_markdown_cell(source)  # type: ignore[no-untyped-call]
        elif kind == "raw":
            cell = v4.new_raw_cell(source)  # type: ignore[no-untyped-call]
        else:
            cell = v4.new_code_cell(source)  # type: ignore[no-untyped-call]
        if kind == "code":
            # its latest run of this code, wherever the cell stood then (lines above it may
            # have been added since)
            ran = next((r for r in runs if ran_as_cell(r.code, source)), None)
            if ran is not None:
                cell.outputs, cell.execution_count = saved_cell(ran, folder)
        result.cells.append(cell)
    return result


COMMENTS = tuple(dict.fromkeys(language.comment for language in LANGUAGES))
"""How a line opens as a comment in the languages runfix runs notebooks of."""


def ran_as_cell(code: str, source: str) -> bool:
    """Whether a run of `code` ran the cell whose text is `source`: its code, or the code
    below its opening comments — a prompt cell's generated body runs without its `# ai:`
    line, and its outputs are the cell's (Neovim's `:w` dropped them)."""
    code, source = code.rstrip("\n"), source.rstrip("\n")
    if code == source:
        return True
    lines = source.split("\n")
    opening = 0
    while opening < len(lines) and (
        not lines[opening].strip() or lines[opening].lstrip().startswith(COMMENTS)
    ):
        opening += 1
    return 0 < opening < len(lines) and "\n".join(lines[opening:]) == code


def _edited(cells: Sequence[Any], at: int, kind: str, after: Sequence[tuple[str, str]]) -> bool:
    """Whether a buffer's cell of `kind` with no match is the notebook's cell `at`, edited:
    one of its kind stands there, and it is not the buffer's next cell (this one was
    inserted before it)."""
    if at >= len(cells) or cells[at].cell_type != kind:
        return False
    return not (after and after[0] == (cells[at].cell_type, cells[at].source))


def load(path: Path) -> tuple[Any, bytes]:
    """The notebook at `path` as nbformat reads it (version 4), and its bytes; ValueError
    saying why it is not one: unreadable, empty, not JSON, older than nbformat 4, invalid."""
    import nbformat

    try:
        raw = read_regular(path, NOTEBOOK_LIMIT)
    except OSError as exc:
        raise ValueError(str(exc)) from None
    if not raw.strip():
        raise ValueError("the file is empty")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict) or ("cells" not in data and "worksheets" not in data):
        raise ValueError("JSON, but not a notebook (no cells)")
    if not isinstance(data.get("nbformat"), int) or data["nbformat"] < 4:
        raise ValueError(
            f"nbformat {data.get('nbformat')}: open and save it in Jupyter first "
            "(runfix reads nbformat 4)"
        )
    try:
        with warnings.catch_warnings():  # cells without ids (nbformat < 4.5): all the same
            warnings.simplefilter("ignore")
            notebook = nbformat.reads(raw.decode("utf-8"), as_version=4)  # type: ignore[no-untyped-call]
            validate(notebook)
    except Exception as exc:  # nbformat's own errors, whatever their class
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"not a valid notebook: {said}") from None
    return notebook, raw


def validate(notebook: Any) -> None:
    """nbformat's ValidationError for the first thing wrong with `notebook` that Jupyter
    would not run or save it with; the notebook's own metadata is Jupyter's to read
    leniently (a kernelspec without a `name`, as some tools write it, runs there)."""
    from nbformat.validator import iter_validate

    for error in iter_validate(notebook):  # type: ignore[no-untyped-call]
        path = list(getattr(error, "absolute_path", ()) or ())
        if path[:1] != ["metadata"]:
            raise error


def written(notebook: Any) -> bytes:
    """A notebook's file, as Jupyter writes it (validated first: nbformat's ValidationError)."""
    import nbformat

    validate(notebook)
    with warnings.catch_warnings():  # (what `validate` let pass, nbformat warns of again)
        warnings.simplefilter("ignore")
        text: str = nbformat.writes(notebook)  # type: ignore[no-untyped-call]
    return (text if text.endswith("\n") else text + "\n").encode()


def last_statement(source: str) -> int | None:
    """The line (from 0) a Python cell's last statement starts on: the one whose value
    Jupyter keeps (IPython's `last_expr`); None when the cell does not parse as Python."""
    import ast

    try:
        body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return None
    return body[-1].lineno - 1 if body else None


def cell_outputs(outcome: RunOutcome, value_at: int | None = None) -> list[Any]:
    """What a run produced, as a notebook's code cell keeps it (nbformat 4): what it
    printed (one output per stream and run of it), its values (`execute_result`), what it
    displayed (plots, tables), the error it raised with its traceback. `value_at`: the
    document's line (from 1) of the cell's last statement, the only one whose value
    Jupyter keeps (runfix shows every expression statement's on its line)."""
    from nbformat import v4

    out: list[Any] = []
    for event in outcome.events:
        span = event.span if isinstance(event, Value) else None
        if value_at is not None and span is not None and span.first != value_at:
            continue  # an expression statement's value mid-cell
        if isinstance(event, Stream):
            last = out[-1] if out else None
            if last is not None and last.output_type == "stream" and last.name == event.name:
                last.text += event.text
            else:
                out.append(v4.new_output("stream", name=event.name, text=event.text))  # type: ignore[no-untyped-call]
        elif isinstance(event, Value):
            out.append(v4.new_output("execute_result", data=dict(event.data)))  # type: ignore[no-untyped-call]
        elif isinstance(event, Display):
            out.append(v4.new_output("display_data", data=dict(event.data)))  # type: ignore[no-untyped-call]
        elif isinstance(event, Error):
            traceback = (
                ipython_traceback(event)
                or event.text.splitlines()
                or [f"{event.ename}: {event.evalue}"]
            )
            out.append(
                v4.new_output("error", ename=event.ename, evalue=event.evalue, traceback=traceback)  # type: ignore[no-untyped-call]
            )
    return out


CELL_KIND = "notebook"
"""A recorded output that is a notebook cell's outputs as Jupyter keeps them (a stored
JSON file: `{"execution_count": n, "outputs": [...]}`), not a statement's."""


def with_cell(run: RecordedRun, outcome: RunOutcome, files: OutputFiles | None) -> RecordedRun:
    """A notebook's run, recorded with what Jupyter would save in its cell (the kernel's own
    mime bundles, the last statement's value only, its execution count), stored beside
    the run's other outputs: `runfix notebook write` (Neovim's `:w`) saves it."""
    last = last_statement(run.code)
    value_at = run.first + 1 + last if last is not None else None  # (spans count from 1)
    outputs = cell_outputs(outcome, value_at)
    for output in outputs:
        if output.output_type == "execute_result":
            output["execution_count"] = outcome.execution_count
    kept = {"execution_count": outcome.execution_count, "outputs": outputs}
    stored = files.save(json.dumps(kept).encode(), ".json") if files is not None else None
    if stored is None:
        return run
    cell = RecordedOutput(run.first, "", CELL_KIND, str(stored))
    return replace(run, outputs=(*run.outputs, cell))


def cell_of(run: RecordedRun, folder: Path | None) -> tuple[list[Any], int | None] | None:
    """The outputs and execution count Jupyter would save for the run's cell (`with_cell`);
    None where the run kept none (an older record, or not a notebook's run)."""
    from nbformat import from_dict

    for output in run.outputs:
        if output.kind != CELL_KIND:
            continue
        path = stored_output(folder, output.file)
        try:
            kept = json.loads(read_regular(path)) if path is not None else None
        except (OSError, ValueError):
            return None
        if not isinstance(kept, dict) or not isinstance(kept.get("outputs"), list):
            return None
        count = kept.get("execution_count")
        outputs = [from_dict(o) for o in kept["outputs"]]  # type: ignore[no-untyped-call]
        return outputs, count if isinstance(count, int) else None
    return None


def saved_cell(run: RecordedRun, folder: Path | None) -> tuple[list[Any], int | None]:
    """The outputs and count a notebook's cell saves for `run`: as Jupyter saves them
    where the run kept that (`with_cell`: the kernel's mime bundles), else the outputs of
    its statements, with no count."""
    kept = cell_of(run, folder)
    return kept if kept is not None else (outputs_of(run, folder), None)


def latest_cell(folder: Path, path: str, code: str) -> str | None:
    """The stored file of what Jupyter would save for the latest run of a notebook cell
    whose code is `code` (`with_cell`), from the folder's record; None: none kept."""
    import sqlite3

    from lsp_server.record.store import RESTORE_RUNS, NotARecord, open_for_reading, recent

    try:  # (read only: a folder without a record gets none made)
        db = open_for_reading(folder)
        if db is None:
            return None
        try:
            runs = recent(db, path, RESTORE_RUNS)
        finally:
            db.close()
    except (OSError, NotARecord, sqlite3.DatabaseError):
        return None
    for run in runs:
        if ran_as_cell(run.code, code):
            kept = next((o.file for o in run.outputs if o.kind == CELL_KIND), None)
            return str(stored_output(folder, kept) or "") or None
    return None
