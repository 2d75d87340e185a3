"""Kernels of other languages, found as Jupyter finds them: the kernelspecs on the Jupyter
path (`JUPYTER_PATH`, the user's and the system's data folders, runfix's environment) and
in the folder's own environment, matched by the `language` each says it runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from executor.configs import Spec


def _specs(extra: Sequence[Path]) -> dict[str, Spec]:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    manager = KernelSpecManager()
    manager.kernel_dirs = [*manager.kernel_dirs, *(str(d) for d in extra if d.is_dir())]
    found: dict[str, Spec] = {}
    for name in sorted(manager.find_kernel_specs()):
        try:
            spec = manager.get_kernel_spec(name)
        except (NoSuchKernel, OSError, ValueError):
            continue  # a broken kernel.json is not a kernel
        found[name] = Spec(
            name,
            str(spec.language),
            tuple(str(a) for a in spec.argv),
            tuple(sorted((str(k), str(v)) for k, v in (spec.env or {}).items())),
            str(spec.interrupt_mode or "signal"),
            str(spec.display_name or name),
        )
    return found


_FOUND: dict[tuple[tuple[str, ...], tuple[Path, ...], str | None], Spec] = {}
"""Kernelspecs found, by what was asked: a run asks at every run (reading the Jupyter path
took a few milliseconds each time). What was not found is looked for again."""


def find_spec(
    languages: Sequence[str], extra: Sequence[Path] = (), named: str | None = None
) -> Spec | None:
    """A kernelspec for one of `languages` (lower-case `language` values), or None. Where
    several match, the one named as the language comes first, then by name. `named`: the
    kernelspec of that name, whatever language it says (the user chose it), or None."""
    key = (tuple(languages), tuple(extra), named)
    if (found := _FOUND.get(key)) is not None:
        return found
    specs = _specs(extra)
    if named is not None:
        chosen = specs.get(named)
        if chosen is not None:
            _FOUND[key] = chosen
        return chosen
    wanted = {language.lower() for language in languages}
    matching = [s for s in specs.values() if s.language.lower() in wanted]
    matching.sort(key=lambda s: (s.name.lower() not in wanted, s.name))
    if not matching:
        return None
    _FOUND[key] = matching[0]
    return matching[0]


def spec_names(extra: Sequence[Path] = ()) -> list[str]:
    """The names of the kernelspecs installed (for a message saying which there are)."""
    return sorted(_specs(extra))


def forget() -> None:
    """Look the kernelspecs up again (the settings changed: a kernel may have come or gone)."""
    _FOUND.clear()


def environment_kernels(python: str) -> Path:
    """Where the environment of the interpreter `python` keeps its kernelspecs."""
    return Path(python).parent.parent / "share" / "jupyter" / "kernels"
