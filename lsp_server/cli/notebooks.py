"""`runfix export` (a percent script and its last outputs → `.ipynb`) and `runfix import`
(`.ipynb` → a percent script); the conversions are `record.notebooks`'."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from executor.files import replace_file
from lsp_server.folder_files import safe_target
from lsp_server.record.notebooks import (
    buffer_text,
    kernelspec,
    load,
    merged,
    notebook_language,
    read_notebook,
    script_text,
    write_notebook,
    written,
)
from lsp_server.record.store import RESTORE_RUNS, RecordedRun, RunRecord, record_folder
from lsp_server.text.languages import PYTHON, language_of


def export_command(args: argparse.Namespace) -> int:
    return export(args.file, args.output, args.force)


def import_command(args: argparse.Namespace) -> int:
    return import_notebook(args.notebook, args.output, args.force)


def _target(source: Path, out: Path, force: bool) -> Path | int:
    """Where to write what is made of `source`, or the exit status saying why not (2, a
    mistake in what was asked): `source` is missing, `out` is no place runfix writes, or
    exists without --force."""
    if not source.is_file():
        what = (
            "is a folder: name a file"
            if source.is_dir()
            else "is not a regular file"
            if source.exists()
            else "does not exist"
        )
        print(f"runfix: error: {source} {what}", file=sys.stderr)
        return 2
    if (why := safe_target(out)) is not None:
        print(f"runfix: error: {why}", file=sys.stderr)
        return 2
    if out.exists() and not force:
        print(
            f"runfix: error: {out} exists; pass -o elsewhere, or --force to replace it",
            file=sys.stderr,
        )
        return 2
    return out


def export(source: Path, target: Path | None, force: bool = False) -> int:
    """`runfix export`: write `source`'s notebook, each code cell with its last outputs; never
    over a file without --force (as `import`); a missing folder of `-o` is made."""
    out = _target(source, target or source.with_suffix(".ipynb"), force)
    if isinstance(out, int):
        return out
    folder = record_folder(source.resolve())
    runs: list[RecordedRun] = []
    if folder is not None:
        record = RunRecord(folder)
        runs = record.recent(str(source.resolve()), RESTORE_RUNS)
        record.close()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        language = language_of(None, str(source)) or PYTHON
        cells, with_outputs = write_notebook(source.read_text(), runs, out, folder, language)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"runfix: error: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"runfix: wrote {out} ({cells} cells, {with_outputs} with outputs)")
    return 0


def import_notebook(source: Path, target: Path | None, force: bool) -> int:
    """Write `source` (a notebook) as a percent script in its kernel's language (`.py`,
    `.R`, `.ts`, …); never over a file without --force."""
    try:
        notebook = read_notebook(source) if source.is_file() else None
    except ValueError as exc:
        print(f"runfix: error: {source} is not a notebook runfix can read: {exc}", file=sys.stderr)
        return 2
    language = notebook_language(notebook) if notebook is not None else PYTHON
    out = _target(source, target or source.with_suffix(language.notebook[3]), force)
    if isinstance(out, int):
        return out
    assert notebook is not None  # (_target said why when `source` is no file)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_file(out, script_text(notebook, language).encode())
    except OSError as exc:
        print(f"runfix: error: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    print(f"runfix: wrote {out} ({len(notebook.cells)} cells)")
    return 0


def notebook_command(args: argparse.Namespace) -> int:
    if args.action == "read":
        return read_buffer(args.notebook)
    return write_buffer(args.notebook, sys.stdin.read())


def read_buffer(path: Path) -> int:
    """`runfix notebook read NB.ipynb`: the notebook as the percent text an editor edits
    (`record.notebooks.buffer_text`), on stdout."""
    try:
        notebook, _ = load(path)
    except ValueError as exc:
        print(f"runfix: error: cannot open {path} as a notebook: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(buffer_text(notebook))
    return 0


def write_buffer(path: Path, text: str) -> int:
    """`runfix notebook write NB.ipynb` (the buffer's text on stdin): the notebook the text
    makes of the one on disk (`record.notebooks.merged`: what did not change kept, the
    latest runs' outputs for the cells that ran), validated and renamed into place; a new
    notebook if there is none; nothing written when nothing changed."""
    if (why := safe_target(path)) is not None:
        print(f"runfix: error: {why}", file=sys.stderr)
        return 2
    if path.exists():
        try:
            notebook, raw = load(path)
        except ValueError as exc:
            print(f"runfix: error: {path} was not written over: {exc}", file=sys.stderr)
            return 2
    else:
        from nbformat import v4

        notebook, raw = v4.new_notebook(), b""  # type: ignore[no-untyped-call]
        notebook.metadata["kernelspec"] = kernelspec(PYTHON)
    folder = record_folder(path.resolve())
    runs: list[RecordedRun] = []
    if folder is not None:
        record = RunRecord(folder)
        runs = record.recent(str(path.resolve()), RESTORE_RUNS)
        record.close()
    made = merged(notebook, text, runs, folder)
    if raw and made == notebook:
        print(f"runfix: {path} is unchanged", file=sys.stderr)
        return 0
    try:
        replace_file(path, written(made))
    except Exception as exc:  # nbformat's ValidationError, an OSError: nothing was written
        print(f"runfix: error: {path} was not written: {exc}", file=sys.stderr)
        return 2
    print(f"runfix: wrote {path} ({len(made.cells)} cells)", file=sys.stderr)
    return 0
