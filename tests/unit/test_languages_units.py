"""Issue 38: which language a document is in, and which kernelspec runs it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from executor.base import ExecutorUnavailable
from executor.configs import LocalConfig, RemoteConfig
from executor.kernelspecs import find_spec, forget
from executor.safety import scan
from lsp_server.executors import kernel_config
from lsp_server.model.context import ReplyError, extract_code, fix_messages, generate_messages
from lsp_server.settings import Settings, resolve
from lsp_server.text.cells import split_cells
from lsp_server.text.languages import PYTHON, by_id, language_of


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


def test_the_model_is_asked_in_the_document_s_language() -> None:
    lines = ["// %%\n", "const xs = [1, 2];\n", "// ai: the sum\n"]
    [system, user] = generate_messages("the sum", lines, 2, (3, 2), [], 4000, by_id("typescript"))
    assert "You write TypeScript code" in system["content"]
    assert "```typescript\n" in user["content"] and "Variables in the kernel" not in user["content"]
    [system, user] = fix_messages(
        "x <- y\n", "Error: object 'y' not found", ["x <- y\n"], (0, 0), [], [], 4000,
        by_id("r"),
    )  # fmt: skip
    assert "You fix R code" in system["content"] and "```r\nx <- y\n```" in user["content"]


def test_a_reply_in_another_language_is_taken_from_its_block_unparsed() -> None:
    r = by_id("r")
    assert extract_code("Sure:\n```r\nx <- mean(c(1, 2))\nx\n```\n", language=r) == (
        "x <- mean(c(1, 2))\nx\n"
    )
    assert extract_code("```\nx <- 1\n```", language=r) == "x <- 1\n"  # untagged: taken
    with pytest.raises(ReplyError, match="is python, not R"):
        extract_code("```python\nx = 1\n```", language=r)
    with pytest.raises(ReplyError, match="no ```r code block"):
        extract_code("x <- 1", language=r)
    ts = extract_code(
        "```ts\n// %%\nconst a = 1;\n// %%\na + 1\n```", asked="a + 2", language=by_id("typescript")
    )
    assert ts == "a + 1\n"  # the cell asked for, its `// %%` marker dropped


def test_model_written_code_runfix_cannot_read_is_one_finding_over_all_of_it() -> None:
    [finding] = scan("x <- 1\nsystem('rm -rf ~')\n", 4, language="R")
    assert (finding.line, finding.end_line) == (4, 5)
    assert "R code, which runfix cannot check" in finding.message
    assert scan("x = 1\n", 4) == []  # Python is read


def test_the_sandbox_says_it_runs_python_only_and_remote_asks_the_server(tmp_path: Path) -> None:
    with pytest.raises(ExecutorUnavailable, match="The sandbox runs Python only for now"):
        kernel_config(tmp_path, Settings(executor="docker"), by_id("r"))
    remote = kernel_config(tmp_path, Settings(executor="remote"), by_id("shellscript"))
    assert isinstance(remote, RemoteConfig) and remote.languages == ("bash", "sh", "shell")
    assert kernel_config(tmp_path, Settings(executor="remote"), PYTHON) == RemoteConfig()


def test_the_kernels_setting_names_a_language_s_kernelspec(tmp_path: Path) -> None:
    folder = tmp_path / "kernels"
    for name, language in (("bash", "bash"), ("bash-login", "bash")):
        (folder / "kernels" / name).mkdir(parents=True)
        kernel = {"argv": ["bash", "{connection_file}"], "display_name": name, "language": language}
        (folder / "kernels" / name / "kernel.json").write_text(json.dumps(kernel))
    shell = by_id("shellscript")
    settings = Settings()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(folder))
        forget()
        config = kernel_config(tmp_path, settings, shell)
        assert isinstance(config, LocalConfig) and config.spec is not None
        assert config.spec.name == "bash"  # named as the language first
        chosen = replace(settings, kernels=(("shellscript", "bash-login"),))
        config = kernel_config(tmp_path, chosen, shell)
        assert isinstance(config, LocalConfig) and config.spec is not None
        assert config.spec.name == "bash-login"
        missing = replace(settings, kernels=(("shellscript", "zsh"),))
        with pytest.raises(ExecutorUnavailable, match=r"No Jupyter kernel named 'zsh'.*bash-login"):
            kernel_config(tmp_path, missing, shell)
        # Issue 47, S3 8: a shell document never runs in a Python kernel, named or not
        (folder / "kernels" / "py").mkdir(parents=True)
        kernel = {"argv": ["python", "-m", "ipykernel_launcher"], "language": "python"}
        (folder / "kernels" / "py" / "kernel.json").write_text(json.dumps(kernel))
        forget()
        as_python = replace(settings, kernels=(("shellscript", "py"),))
        with pytest.raises(ExecutorUnavailable, match=r"names 'py' for shell.*runs python"):
            kernel_config(tmp_path, as_python, shell)
        forget()
    read = resolve(("test", {"kernels": {"sh": "bash-login"}}))
    assert read.kernels == (("shellscript", "bash-login"),) and not read.problems
    for wrong, said in (({"python": "x"}, "the folder's interpreter"), ({"cobol": "y"}, "cobol")):
        read = resolve(("test", {"kernels": wrong}))
        assert read.kernels == () and said in read.problems[0], read.problems
