"""Issue 38: which language a document is in, and which kernelspec runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor.kernelspecs import find_spec, forget
from lsp_server.text.cells import split_cells
from lsp_server.text.languages import PYTHON, language_of


@pytest.mark.parametrize(
    ("language_id", "path", "want"),
    [
        ("python", "/w/a.py", "python"),
        ("r", "/w/analysis.R", "r"),
        ("ess-r-mode", "/w/analysis.R", "r"),  # eglot names the major mode
        ("shellscript", "/w/run.sh", "shellscript"),  # VS Code
        ("sh", "/w/run.sh", "shellscript"),  # Neovim's filetype
        ("bash-ts-mode", "/w/run", "shellscript"),
        ("typescript", "/w/main.ts", "typescript"),
        ("typescript-ts-mode", "/w/main.ts", "typescript"),
        ("julia", "/w/model.jl", "julia"),
        (None, "/w/analysis.R", "r"),  # the CLI: by extension
        (None, "/w/notes", "python"),  # no language, no extension: as before
        ("snakemake", "/w/rules.py", "python"),  # an id runfix does not know: the extension
    ],
)
def test_a_document_language_from_its_id_or_extension(
    language_id: str | None, path: str, want: str
) -> None:
    found = language_of(language_id, path)
    assert found is not None and found.id == want


def test_a_language_runfix_does_not_know_is_none_never_python() -> None:
    assert language_of("plaintext", "/w/notes.txt") is None
    assert language_of("markdown", "/w/README.md") is None
    assert PYTHON.python


def test_cells_in_each_comment_style() -> None:
    for marker in ("# %%", "// %%", "-- %%"):
        lines = ["x\n", f"{marker}\n", "y\n", f"{marker} two\n", "z\n"]
        assert [(c.first, c.last) for c in split_cells(lines)] == [(0, 0), (1, 2), (3, 4)]


@pytest.fixture(autouse=True)
def _fresh_lookups() -> None:
    forget()  # found kernelspecs are kept by what was asked: each test has its own path


def _spec(root: Path, name: str, language: str) -> None:
    folder = root / "kernels" / name
    folder.mkdir(parents=True)
    argv = ["kernel", "-f", "{connection_file}"]
    (folder / "kernel.json").write_text(json.dumps({"argv": argv, "language": language}))


def test_a_kernelspec_is_found_by_its_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    _spec(tmp_path, "zz-r", "R")
    _spec(tmp_path, "ir", "R")
    _spec(tmp_path, "broken", "R")
    (tmp_path / "kernels" / "broken" / "kernel.json").write_text("{not json")
    found = find_spec(("r",))
    assert found is not None and found.name == "ir" and found.language == "R"
    assert found.argv == ("kernel", "-f", "{connection_file}")
    assert find_spec(("lua",)) is None
    _spec(tmp_path, "lua", "lua")  # installed later: what was not found is looked for again
    assert find_spec(("lua",)) is not None
    (tmp_path / "kernels" / "ir" / "kernel.json").unlink()
    assert find_spec(("r",)) == found  # found ones are kept until `forget` (new settings)
    forget()
    assert find_spec(("r",)) != found  # (another `ir` may be this machine's IRkernel)


def test_the_folder_environment_kernelspecs_are_found_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "elsewhere"))
    _spec(tmp_path / "venv", "deno", "typescript")
    assert find_spec(("typescript",)) is None
    found = find_spec(("typescript",), [tmp_path / "venv" / "kernels"])
    assert found is not None and found.name == "deno"
