"""Settings → the folder's kernel config, by the kind the `executor` setting names
(`executor.kinds`): a local kernel, a locked-down container, a remote one; for a document
of another language, the local kernel its kernelspec starts (`executor.kernelspecs`) or
the remote server's kernel for it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import cast

from executor.base import ExecutorUnavailable
from executor.configs import KernelConfig, LocalConfig, RemoteConfig, default_transport
from executor.interpreter import find_interpreter
from executor.kernelspecs import environment_kernels, find_spec, spec_names
from executor.kinds import KINDS, LOCAL, Kind
from lsp_server.settings import Settings
from lsp_server.text.languages import PYTHON, Language


def kind(settings: Settings) -> Kind:
    return KINDS[settings.executor]


def kernel_config(folder: Path, settings: Settings, language: Language = PYTHON) -> KernelConfig:
    """What runs the folder's code of `language`. The container never gets a host variable,
    so it needs no list of secrets, nor does a remote one (it runs in its server's
    environment); the local kernel gets the server's environment minus the secrets
    (`Settings.secret_names`). Another language runs in a kernel of a kernelspec that
    says it runs it: a local one (on the Jupyter path or in the folder's environment), or
    one the remote server lists; `ExecutorUnavailable` says how to get one where there is
    none, and that the sandbox runs Python only."""
    section = kind(settings).section
    named = dict(settings.kernels).get(language.id)  # (the `kernels` setting's choice)
    if section is not None:
        config = cast(KernelConfig, getattr(settings, section))
        if language.python:
            return config
        if isinstance(config, RemoteConfig):  # a kernel the server lists for the language
            return replace(
                config, languages=language.kernel_languages, language=language.name, named=named
            )
        raise ExecutorUnavailable(
            f"The sandbox runs Python only for now (its image holds ipykernel and no other "
            f"kernel), so this {language.name} document was not run. Set `executor` to "
            f"`{LOCAL.name}` to run it in a local kernel, or `remote` for a Jupyter Server's."
        )
    python = find_interpreter(folder, settings.python).path
    transport = default_transport() if settings.transport == "auto" else settings.transport
    spec = None
    if not language.python:
        folder_kernels = [environment_kernels(python)]
        spec = find_spec(language.kernel_languages, folder_kernels, named)
        if spec is None and named is not None:
            raise ExecutorUnavailable(
                f"No Jupyter kernel named {named!r} is installed here (the `kernels` setting "
                f"for {language.name}); there are: {', '.join(spec_names(folder_kernels))}."
            )
        if spec is not None and spec.language.lower() not in language.kernel_languages:
            raise ExecutorUnavailable(  # (languages.md: another language never runs as Python)
                f"The `kernels` setting names {spec.name!r} for {language.name}, but that "
                f"kernel runs {spec.language}: a {language.name} document is never run in "
                f"another language's kernel. Name a kernel that runs {language.name}."
            )
        if spec is None:
            raise ExecutorUnavailable(
                f"No Jupyter kernel for {language.name} is installed here, so this "
                f"{language.name} document was not run (never as Python). To get one, "
                f"{language.get_kernel}."
            )
        transport = "tcp"  # (on loopback, keyed) other kernels speak TCP only: Deno does
    return LocalConfig(python, tuple(sorted(settings.secret_names())), transport, spec)


def sandboxed(settings: Settings) -> bool:
    """Whether code runs in the container (then flagged code needs no confirmation)."""
    return kind(settings).sandboxed


def install_blocked(settings: Settings) -> str | None:
    """Why "Install <dist>" cannot work with these settings (and how to allow it), else None."""
    return settings.docker.install_blocked() if sandboxed(settings) else None
