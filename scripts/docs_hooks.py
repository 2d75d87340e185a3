"""What the docs hold that is made from the code, never kept by hand a second time — the
settings table (from the settings' declarations in the VS Code extension's package.json,
which a unit test holds equal to the server's) and the command line reference (from
`runfix`'s argument parser) — written into `docs/settings.md` and `docs/cli.md` between
their markers, so the pages read whole on GitHub and in a clone (`python
scripts/docs_hooks.py`, which `scripts/docs` runs; `tests/unit/test_docs_pages.py` keeps
them in step); and, as MkDocs hooks (`mkdocs.yml`), the same made afresh as the site is
built, and the security policy (SECURITY.md, where GitHub looks for it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = "<!-- runfix: settings table (made from editors/vscode/package.json) -->"
CLI = "<!-- runfix: cli reference -->"
END = "<!-- runfix: end of what scripts/docs_hooks.py made -->"
SECURITY = "<!-- runfix: include SECURITY.md -->"
EXTENSION_ONLY = {"path", "openOutput", "languages"}
"""The VS Code extension's own settings (the server never reads them)."""
PAGES = {"settings.md": SETTINGS, "cli.md": CLI}
"""The pages with a made part, and the marker it stands under (until `END`)."""


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    markdown = refreshed(markdown)
    if SECURITY in markdown:
        markdown = markdown.replace(SECURITY, (ROOT / "SECURITY.md").read_text(encoding="utf-8"))
    return markdown


def refreshed(markdown: str) -> str:
    """`markdown` with what stands under each marker (up to `END`) made afresh."""
    for marker, made in ((SETTINGS, settings_tables), (CLI, cli_reference)):
        if marker not in markdown:
            continue
        before, _, rest = markdown.partition(marker)
        _, ended, after = rest.partition(END)
        if not ended:
            after = rest  # a marker without its end (the page as first written)
        markdown = f"{before}{marker}\n\n{made().strip()}\n\n{END}{after}"
    return markdown


def write_pages(docs: Path = ROOT / "docs") -> list[str]:
    """Write the made parts into the pages that hold them; the pages that changed."""
    changed = []
    for name in PAGES:
        page = docs / name
        text = page.read_text(encoding="utf-8")
        if (new := refreshed(text)) != text:
            page.write_text(new, encoding="utf-8")
            changed.append(name)
    return changed


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(value: Any) -> str:
    return "unset" if value is None else f"`{json.dumps(value, ensure_ascii=False)}`"


def settings_tables() -> str:
    """The server's settings, then the VS Code extension's own, in the order declared."""
    package = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    properties: dict[str, Any] = package["contributes"]["configuration"]["properties"]
    server: list[str] = []
    extension: list[str] = []
    for key, about in properties.items():
        name = key.removeprefix("runfix.")
        said = _cell(about.get("markdownDescription") or about.get("description") or "")
        if about.get("scope") == "machine":
            said += " *Yours only: a project file cannot set it.*"
        row = f"| `{name}` | {_default(about.get('default'))} | {said} |"
        (extension if name in EXTENSION_ONLY else server).append(row)
    head = "| setting | default | what it does |\n|---|---|---|\n"
    return (
        head
        + "\n".join(server)
        + "\n\nThe VS Code extension's own (the server never reads them):\n\n"
        + head
        + "\n".join(extension)
        + "\n"
    )


def cli_reference() -> str:
    """`runfix --help` and each command's `--help`, as the terminal shows them."""
    sys.path.insert(0, str(ROOT))
    from lsp_server.cli.main import COMMANDS, parser

    os.environ["COLUMNS"] = "92"  # (argparse reads it for its width)
    top = parser()
    out = ["### `runfix`", "", "```text", top.format_help().rstrip(), "```", ""]
    actions = [a for a in top._actions if a.dest == "command"]
    choices: dict[str, Any] = actions[0].choices if actions else {}  # type: ignore[assignment]
    for name in COMMANDS:
        out += [f"### `runfix {name}`", "", "```text", choices[name].format_help().rstrip()]
        out += ["```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    for name in write_pages():
        print(f"docs: {name} made afresh")
