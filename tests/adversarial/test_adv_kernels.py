"""Issue 47, S1 2: another language's kernel starts with nothing of the folder's own code,
in a trusted folder too ("even in a trusted folder nothing shadows the kernel"): a folder's
`bash_kernel/` package is not imported instead of the installed one, R reads no `.Rprofile`
of the folder, and a project file cannot choose the kernel that runs a language."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from executor.interpreter import guarded
from lsp_server.settings import PROJECT, resolve
from tests.conftest import hints, open_doc, run

MARKER = "shadowed-kernel-ran"


def test_a_kernelspec_starts_without_the_folder_on_its_path_or_in_its_profile() -> None:
    python = sys.executable
    started = guarded([python, "-m", "bash_kernel", "-f", "{connection_file}"])
    assert started[:2] == [python, "-c"] and "del sys.path[0]" in started[2]
    assert started[3:] == ["bash_kernel", "-f", "{connection_file}"]
    flagged = guarded(["python3.11", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "x"])
    assert flagged[:3] == ["python3.11", "-Xfrozen_modules=off", "-c"]
    r = guarded(["R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"])
    assert r == ["R", "--no-init-file", "--no-environ", "--slave", "-e", "IRkernel::main()",
                 "--args", "{connection_file}"]  # fmt: skip
    deno = ["deno", "jupyter", "--kernel", "--conn", "{connection_file}"]
    assert guarded(deno) == deno


def test_a_project_file_cannot_choose_the_kernel_of_a_language() -> None:
    settings = resolve((PROJECT, {"kernels": {"r": "python3"}}))
    assert settings.kernels == ()
    assert any("kernels is ignored" in p for p in settings.problems)


async def test_a_folders_own_bash_kernel_package_is_never_imported(
    bash_kernel: None, initialized: Any, folder: Path
) -> None:
    shadow = folder / "bash_kernel"
    shadow.mkdir()
    payload = f"open({str(folder / MARKER)!r}, 'w').write('ran')\n"
    (shadow / "__init__.py").write_text(payload)
    (shadow / "__main__.py").write_text(payload)
    uri = open_doc(initialized, folder / "s.sh", "echo $((6 * 7))\n", language="shellscript")
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer
    assert not (folder / MARKER).exists()
    assert any("42" in str(h.label) for h in await hints(initialized, uri))


async def test_r_reads_no_profile_of_the_folder(
    r_kernel: None, initialized: Any, folder: Path
) -> None:
    (folder / ".Rprofile").write_text(f'writeLines("ran", "{folder / MARKER}")\nprofiled <- 1\n')
    uri = open_doc(initialized, folder / "a.R", "exists('profiled')\n", language="r")
    answer = await run(initialized, uri)
    assert answer["status"] == "ok", answer
    assert not (folder / MARKER).exists()
    assert any("FALSE" in str(h.label) for h in await hints(initialized, uri))
