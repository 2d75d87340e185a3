"""What an output view shows for a line: the outputs of the statement there, else of every
statement of the cell holding it; and the folder's latest images to flip through.

The VS Code panel, Neovim's float (`runfix.outputs`) and the loopback page
(`page.OutputPage`) all show this. No LSP here.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from pathlib import Path

from lsp_server.contract import OutputItem, OutputsAnswer
from lsp_server.outputs.bundles import FOLDER, Output, latest_images
from lsp_server.outputs.results import DocumentResults, StatementResult
from lsp_server.text.cells import cell_at, split_cells

HISTORY = 24
"""Images of a folder a view offers, newest first."""


def statements_at(
    results: DocumentResults, lines: Sequence[str], line: int
) -> tuple[int, int, list[StatementResult]] | None:
    """The lines shown and their statements: the statement covering `line`, else those of
    the cell holding it; None when nothing there has run."""
    statements = results.statements
    at = bisect.bisect_right(statements, line, key=lambda s: s.first)
    if at and statements[at - 1].last >= line:
        found = statements[at - 1]
        return found.first, found.last, [found]
    # The empty line after a file's last newline belongs to its last cell.
    cell = cell_at(split_cells(lines), min(line, max(len(lines) - 1, 0)))
    if cell is None:
        return None
    start = bisect.bisect_left(statements, cell.first, key=lambda s: s.first)
    end = bisect.bisect_right(statements, cell.last, key=lambda s: s.first)
    inside = statements[start:end]
    return (cell.first, cell.last, inside) if inside else None


def outputs_of(statements: Sequence[StatementResult]) -> list[Output]:
    return [output for statement in statements for output in statement.outputs]


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)


def item(output: Output) -> OutputItem:
    return OutputItem(
        kind=output.kind,
        text=output.text,
        image=_path(output.image),
        file=_path(output.file),
        table=output.table,
        markdown=output.markdown,
        colored=output.colored,
        printed=output.printed,
    )


def answer(
    uri: str, folder: Path, found: tuple[int, int, list[StatementResult]] | None
) -> OutputsAnswer:
    first, last, statements = found if found is not None else (None, None, [])
    return OutputsAnswer(
        uri=uri,
        folder=str(folder),
        first=first,
        last=last,
        outputs=[item(o) for o in outputs_of(statements)],
        images=[str(p) for p in latest_images(folder, HISTORY)],
        outputs_dir=str(folder / FOLDER),
    )
