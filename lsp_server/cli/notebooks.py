"""`runfix export` (a percent script and its last outputs → `.ipynb`) and `runfix import`
(`.ipynb` → a percent script); the conversions are `record.notebooks`'."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from executor.files import replace_file
from lsp_server.folder_files import safe_target
from lsp_server.record.notebooks import (
    notebook_language,
    read_notebook,
    script_text,
    write_notebook,
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
