"""The pages made from the code (`scripts/docs_hooks.py`) are committed whole and kept in
step with their sources: a reader on GitHub or in a clone sees every setting and every
command line option without building the site (issue 61, 7)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts/docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_page_lists_every_setting_of_package_json_as_made() -> None:
    page = (DOCS / "settings.md").read_text()
    package = json.loads((ROOT / "editors/vscode/package.json").read_text())
    declared = package["contributes"]["configuration"]["properties"]
    names = [key.removeprefix("runfix.") for key in declared]
    rows = re.findall(r"^\| `([^`]+)` \|", page, re.MULTILINE)
    assert sorted(rows) == sorted(names)
    assert _hooks().refreshed(page) == page, "run: python scripts/docs_hooks.py"


def test_the_cli_page_has_every_command_and_option_of_the_parser() -> None:
    from lsp_server.cli.main import COMMANDS, parser

    page = (DOCS / "cli.md").read_text()
    top = parser()
    [commands] = [a for a in top._actions if a.dest == "command"]
    choices = commands.choices or {}
    sections = re.split(r"^### ", page, flags=re.MULTILINE)
    for name in COMMANDS:
        [section] = [s for s in sections if s.startswith(f"`runfix {name}`")]
        for action in choices[name]._actions:
            for option in action.option_strings:
                assert option in section, (name, option)
    if sys.version_info[:2] == (3, 11):  # argparse's layout changes between versions
        assert _hooks().refreshed(page) == page, "run: python scripts/docs_hooks.py"
