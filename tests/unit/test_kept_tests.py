"""Tests are a fix's check, never its target (issue 58): the folder's test files as they were
before a candidate ran are put back whatever wrote them (`fix.kept_tests`), and the guard's
"always" allowances are the user's, kept outside the repository (`executor.guard`)."""

from __future__ import annotations

from pathlib import Path

from executor.guard import Allowances
from lsp_server.fix.kept_tests import KeptTests, is_kept


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / "tests" / "data").mkdir(parents=True)
    (folder / "pkg").mkdir()
    (folder / "tests" / "test_a.py").write_text("def test_a():\n    assert 2 == 2\n")
    (folder / "tests" / "data" / "rows.csv").write_text("a,b\n1,2\n")
    (folder / "conftest.py").write_text("import pytest\n")
    (folder / "pkg" / "stats.py").write_text("def mean(xs):\n    return 0\n")
    return folder


def test_test_files_changed_removed_or_added_are_put_back_and_said(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    kept = KeptTests.read(folder)
    (folder / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (folder / "conftest.py").unlink()
    (folder / "tests" / "conftest.py").write_text("collect_ignore = ['test_a.py']\n")
    (folder / "pkg" / "stats.py").write_text("def mean(xs):\n    return 1\n")  # (the module's)
    said = kept.changed()
    assert sorted(said) == [
        "conftest.py removed (put back)",
        "tests/conftest.py added (removed again)",
        "tests/test_a.py changed (put back)",
    ]
    assert (folder / "tests" / "test_a.py").read_text() == "def test_a():\n    assert 2 == 2\n"
    assert (folder / "conftest.py").read_text() == "import pytest\n"
    assert not (folder / "tests" / "conftest.py").exists()
    assert kept.changed() == []  # as they were


def test_a_test_file_swapped_for_a_link_is_put_back_as_a_file(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    kept = KeptTests.read(folder)
    outside = tmp_path / "outside.py"
    outside.write_text("def test_a():\n    pass\n")
    (folder / "tests" / "test_a.py").unlink()
    (folder / "tests" / "test_a.py").symlink_to(outside)
    assert kept.changed() == ["tests/test_a.py removed (put back)"]
    assert not (folder / "tests" / "test_a.py").is_symlink()
    assert outside.read_text() == "def test_a():\n    pass\n"


def test_what_is_kept_is_tests_their_folders_and_conftests() -> None:
    assert is_kept(Path("tests/data/rows.csv")) and is_kept(Path("test_x.py"))
    assert is_kept(Path("pkg/x_test.py")) and is_kept(Path("pkg/conftest.py"))
    assert not is_kept(Path("pkg/stats.py")) and not is_kept(Path("testing_notes.md"))


def test_always_allowed_patterns_are_kept_per_folder_outside_it(tmp_path: Path) -> None:
    store = Allowances(tmp_path / "state" / "guard.json")
    folder = tmp_path / "project"
    (folder / "sub").mkdir(parents=True)
    assert store.of(folder) == ()
    store.allow(folder, ("network:api.example.com:443",))
    store.allow(folder, ("process:git", "network:api.example.com:443"))
    assert store.of(folder) == ("network:api.example.com:443", "process:git")
    assert store.of(folder / "sub") == store.of(folder)  # a parent's hold below it
    assert store.of(tmp_path / "elsewhere") == ()
    assert (store.path.stat().st_mode & 0o777) == 0o600
