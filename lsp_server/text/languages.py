"""The languages a document may be in, in one table: how an editor names each (its LSP
`languageId`, a file's extension), its line comment (cells are that comment plus `%%`, as
jupytext writes them: `# %%`, `// %%`, `-- %%`), the `language` a Jupyter kernelspec
gives for it, and how to get a kernel where none is installed.

Python is the language runfix reads as well as runs (the dataflow map, the offline
fixes, completion from the kernel); the others run in their own Jupyter kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Language:
    """One row of `LANGUAGES`."""

    id: str
    """runfix's name for it: the LSP `languageId` VS Code sends."""
    name: str
    """As a person names it."""
    extensions: tuple[str, ...]
    aliases: tuple[str, ...]
    """Other `languageId`s editors send for it (Neovim sends its filetype, eglot its mode's)."""
    comment: str
    """Its line comment."""
    kernel_languages: tuple[str, ...]
    """The `language` of kernelspecs that run it, lower-cased (IRkernel says `R`)."""
    get_kernel: str
    """How to get a kernel for it."""
    fences: tuple[str, ...]
    """The tags of a Markdown code block of it, lower-cased; the first is the one runfix
    writes in a request to the model."""
    notebook: tuple[str, str, str, str]
    """A notebook of it, where no kernel for it is installed to name: its kernelspec's
    name, display name and language, and the suffix of its script (`runfix import`)."""

    @property
    def python(self) -> bool:
        return self.id == PYTHON.id

    @property
    def fence(self) -> str:
        return self.fences[0]

    @property
    def unread(self) -> str | None:
        """Its name where runfix cannot read it (what `safety.scan` takes); None for Python."""
        return None if self.python else self.name


def is_python(language: Language | None) -> bool:
    """Whether `language` is Python (None, a language runfix does not know, is not)."""
    return language is not None and language.python


PYTHON = Language(
    "python",
    "Python",
    (".py", ".pyw", ".ipy"),
    ("py", "python3"),
    "#",
    ("python",),
    "pip install ipykernel (in the folder's environment)",
    ("python", "py", "python3", "ipython", "jupyter"),
    ("python3", "Python 3", "python", ".py"),
)
LANGUAGES: tuple[Language, ...] = (
    PYTHON,
    Language(
        "r",
        "R",
        (".r",),
        ("rlang", "ess-r"),
        "#",
        ("r",),
        "install IRkernel: R -e 'install.packages(\"IRkernel\"); IRkernel::installspec()' "
        "(Debian: apt install r-cran-irkernel)",
        ("r",),
        ("ir", "R", "R", ".R"),
    ),
    Language(
        "shellscript",
        "shell",
        (".sh", ".bash"),
        ("sh", "bash", "shell", "zsh"),
        "#",
        ("bash", "sh", "shell"),
        "pip install bash_kernel && python -m bash_kernel.install",
        ("bash", "sh", "shell", "zsh", "console"),
        ("bash", "Bash", "bash", ".sh"),
    ),
    Language(
        "typescript",
        "TypeScript",
        (".ts", ".mts", ".cts"),
        ("ts",),
        "//",
        ("typescript",),
        "install Deno, then: deno jupyter --install",
        ("typescript", "ts", "javascript", "js"),
        ("deno", "Deno", "typescript", ".ts"),
    ),
    Language(
        "javascript",
        "JavaScript",
        (".js", ".mjs", ".cjs"),
        ("js",),
        "//",
        ("javascript", "typescript"),  # Deno's kernel says typescript, and runs both
        "install Deno, then: deno jupyter --install",
        ("javascript", "js"),
        ("deno", "Deno", "typescript", ".js"),
    ),
    Language(
        "julia",
        "Julia",
        (".jl",),
        (),
        "#",
        ("julia",),
        "install IJulia: julia -e 'using Pkg; Pkg.add(\"IJulia\")'",
        ("julia", "jl"),
        ("julia", "Julia", "julia", ".jl"),
    ),
    Language(
        "lua",
        "Lua",
        (".lua",),
        (),
        "--",
        ("lua",),
        "install a Lua kernel (xeus-lua: conda install -c conda-forge xeus-lua)",
        ("lua",),
        ("xlua", "Lua", "lua", ".lua"),
    ),
)
BY_ID = {name: lang for lang in LANGUAGES for name in (lang.id, *lang.aliases)}
BY_EXTENSION = {ext: lang for lang in LANGUAGES for ext in lang.extensions}


def language_of(language_id: str | None, path: str) -> Language | None:
    """The document's language: the editor's `languageId` where runfix knows it, else the
    file's extension; None for a language runfix does not know (it is not run)."""
    known = BY_ID.get((language_id or "").lower().removesuffix("-mode").removesuffix("-ts"))
    if known is not None:
        return known
    suffix = PurePath(path).suffix.lower()
    if not suffix and not language_id:
        return PYTHON  # an untitled buffer or a file without an extension: as before
    return BY_EXTENSION.get(suffix)


def by_id(language: str) -> Language:
    """The row of a language runfix knows (`Language.id`)."""
    return BY_ID[language]


def of_kernel(language: str) -> Language:
    """The language a notebook's kernel says it runs (its kernelspec's or language_info's
    `language`, any case); Python for one runfix does not run."""
    wanted = language.lower()
    return next((lang for lang in LANGUAGES if wanted in lang.kernel_languages), PYTHON)
