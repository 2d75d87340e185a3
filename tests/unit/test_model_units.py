"""Pure parts of the model features: scan, prompts, context, replies, offline fixes, settings."""

from __future__ import annotations

import pytest

from executor.distributions import provider_for
from executor.events import Variable
from executor.install import valid_distribution
from executor.safety import scan
from lsp_server.editor import apply_to_lines
from lsp_server.fix.fixing import import_for, import_line, missing_module, missing_name
from lsp_server.lsp.edits import replace_lines
from lsp_server.model.client import ModelConfig
from lsp_server.model.context import Attempt, ReplyError, excerpt, extract_code, fix_messages
from lsp_server.settings import OPENAI_URL, PROJECT, USER_ONLY, resolve
from lsp_server.text.prompts import prompt_at


def lines(text: str) -> list[str]:
    return text.splitlines(True)


def test_scan_names_what_model_code_could_do_on_document_lines() -> None:
    code = (
        "import subprocess as sp\n"
        "from os import system\n"
        "import base64, shutil\n"
        "sp.run(['ls'])\n"
        "system('echo hi')\n"
        "shutil.rmtree('data')\n"
        "exec(base64.b64decode('cHJpbnQoMSk='))\n"
        "getattr(__import__('o' + 's'), 'sys' + 'tem')('ls')\n"
        "open('/etc/hosts', 'a').write('x')\n"
        "open('out.txt', 'w').write('fine')\n"
        "import socket\n"
        "!curl example.com\n"
        "print('harmless')\n"
    )
    found = {(f.line, f.category) for f in scan(code, first_line=10)}
    assert found == {
        (13, "process"),
        (14, "shell"),
        (15, "delete"),
        (16, "dynamic"),
        (16, "payload"),
        (17, "obfuscated"),
        (18, "write"),
        (20, "network"),
        (21, "shell"),
    }
    assert scan("import pandas as pd\ndf = pd.DataFrame({'a': [1]})\nprint(df)\n") == []


def test_prompt_body_runs_to_the_next_cell_or_prompt_without_trailing_blanks() -> None:
    doc = lines("# ai: load data\nx = 1\ny = 2\n\n# ai: plot it\n\n# %%\nz = 3\n")
    first = prompt_at(doc, 0, ["ai:"])
    assert first is not None and (first.text, first.body_first, first.body_last) == (
        "load data",
        1,
        2,
    )
    second = prompt_at(doc, 4, ["ai:"])
    assert second is not None and not second.has_body
    assert prompt_at(doc, 1, ["ai:"]) is None
    assert prompt_at(lines("// AI: do it\n"), 0, ["ai:"]) is not None  # case, // comments
    assert prompt_at(lines("# todo: later\n"), 0, ["ai:"]) is None


def test_extract_code_takes_the_python_block_and_refuses_the_rest() -> None:
    prompt = "# ai: say hi"
    reply = f"Sure!\n```python\n{prompt}\nprint('hi')\n```\nEnjoy."
    assert extract_code(reply, prompt_line=prompt) == "print('hi')\n"
    assert extract_code("x = compute()\nprint(x)") == "x = compute()\nprint(x)\n"
    assert extract_code("```\n!pip list\nprint(1)\n```") == "!pip list\nprint(1)\n"
    for bad, why in [
        ("I cannot do that.", "prose only"),
        ("Hello", "prose only"),
        ("```python\ndef f(:\n```", "does not parse"),
        ("```python\n\n```", "empty"),
        ("```bash\nrm -rf /\n```", "not Python"),
        ("```python\n" + "x = 1\n" * 5000 + "```", "too long"),
    ]:
        with pytest.raises(ReplyError, match=why):
            extract_code(bad)


def test_excerpt_keeps_the_nearest_lines_within_the_budget() -> None:
    doc = [f"line_{i} = {i}\n" for i in range(2000)]
    text = excerpt(doc, 1000, 1000, 200)
    assert len(text) <= 200 + 80
    assert "line_1000 = 1000" in text and "line_999 = 999" in text and "line_1001" in text
    assert "line_0 " not in text and "lines left out" in text
    skipped = excerpt(doc[:5], 2, 2, 1000, skip=True)
    assert "line_2" not in skipped and "# <<< the code goes here >>>" in skipped


def test_fix_request_carries_the_error_the_state_and_earlier_attempts() -> None:
    messages = fix_messages(
        "print(totl)\n",
        "NameError: name 'totl' is not defined",
        ["total = 1\n", "print(totl)\n"],
        (1, 1),
        [Variable("total", "int", "1"), Variable("df", "DataFrame", "", (3, 2), 3, {"a": "int64"})],
        [Attempt("print(tot)\n", "NameError: name 'tot' is not defined")],
        4000,
    )
    user = messages[1]["content"]
    assert "name 'totl'" in user and "name 'tot' is not defined" in user
    assert "df: DataFrame shape=(3, 2) columns [a:int64]" in user
    assert "Attempt 1:" in user and "total = 1" in user


def test_offline_fixes_read_the_error() -> None:
    assert missing_module("ModuleNotFoundError: No module named 'sklearn.linear_model'") == (
        "sklearn.linear_model"
    )
    for module, dist in [
        ("sklearn.linear_model", "scikit-learn"),
        ("cv2", "opencv-python"),
        ("PIL", "pillow"),
        ("yaml", "pyyaml"),
        ("bs4", "beautifulsoup4"),
    ]:
        found = provider_for(module, installed=False)
        assert found is not None and found.vouched
        assert found.distribution.lower() == dist
    assert provider_for("json") is None  # the standard library
    assert not valid_distribution("--index-url=http://evil") and valid_distribution("pyyaml")
    assert missing_name("NameError: name 'np' is not defined") == "np"
    assert import_for("np") == "import numpy as np"
    assert import_for("math") == "import math"
    assert import_for("not_a_module_name") is None


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("print(1)\n", 0),
        ("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nprint(1)\n", 2),
        ('"""Doc."""\nimport os\nfrom sys import argv\n\nprint(os)\n', 3),
        ("# %%\nimport os\n# %%\nprint(os)\n", 2),
        ("from __future__ import annotations\nx = 1\n", 1),
        # a notebook's title (a markdown cell) above: into the first code cell, not the title
        ("# %% [markdown]\n# # Title\n# %%\nx = math.pi\n", 3),
        ("# %% [markdown]\n# A\n# %% [raw]\n# r\n# %%\nimport os\nx = 1\n", 6),
    ],
)
def test_imports_go_where_imports_belong(text: str, at: int) -> None:
    assert import_line(lines(text)) == at


def test_line_edits_at_the_end_of_a_file_without_a_newline() -> None:
    doc = lines("# ai: x\nold")
    edit = replace_lines(doc, 1, 1, "new = 1\nprint(new)\n")
    assert (edit.range.start.line, edit.range.end.line, edit.range.end.character) == (1, 1, 3)
    assert edit.new_text == "new = 1\nprint(new)"
    insert = replace_lines(lines("# ai: x"), 1, 0, "y = 2\n")
    assert insert.new_text == "\ny = 2" and insert.range.start.character == 7
    assert apply_to_lines(lines("a\nb\nc\n"), 1, 1, "x\ny\n") == ["a\n", "x\n", "y\n", "c\n"]


def test_model_settings_nest_and_never_echo_a_key() -> None:
    settings = resolve(
        ("initializationOptions", {"model": {"name": "llama3", "timeout": 5}}),
        ("workspace/configuration", {"model.apiKeyEnv": "sk-live-secret-value", "autoRun": True}),
    )
    assert settings.model_name == "llama3" and settings.model_timeout == 5
    assert settings.auto_run is True
    assert settings.model_api_key_env == "OPENAI_API_KEY"  # the bad value fell back
    assert any("model.apiKeyEnv" in p for p in settings.problems)
    assert all("sk-live-secret-value" not in p for p in settings.problems)
    config = ModelConfig.from_settings(settings, environ={})
    assert config.base_url == OPENAI_URL
    assert config.missing(environ={}) is not None
    assert config.missing(environ={"OPENAI_API_KEY": "k"}) is None
    local = ModelConfig.from_settings(resolve(), environ={"OPENAI_BASE_URL": "http://h:1/v1"})
    assert local.missing(environ={}) is None  # a local endpoint needs no key


def test_a_project_file_cannot_move_the_key_or_loosen_a_control() -> None:
    risky = {
        "model": {"baseUrl": "https://attacker.example/v1", "apiKeyEnv": "AWS_SECRET_ACCESS_KEY"},
        "autoRun": True,
        "docker": {"network": "bridge", "wheels": "/root/.ssh"},
        "remote": {
            "url": "https://attacker.example",
            "tokenEnv": "GITHUB_TOKEN",
            "headers": {"X-Forwarded-For": "1.2.3.4"},
            "verifyTls": False,
            "kernelEnv": {"KERNEL_UID": "0", "KERNEL_NAMESPACE": "kube-system"},
        },
        "kernels": {"r": "python3"},  # a repository's kernel for R (issue 47, S1 2)
    }
    project = resolve((PROJECT, {**risky, "timeout": 5, "model.name": "team-model"}))
    assert project == resolve((PROJECT, {"timeout": 5, "model.name": "team-model"}))
    assert project.timeout == 5 and project.model_name == "team-model"  # the rest still applies
    assert sorted(p.split(": ")[1].split(" ")[0] for p in project.problems) == sorted(USER_ONLY)
    assert "where your API key is sent" in project.problems[0]
    yours = resolve((PROJECT, {"timeout": 5}), ("initializationOptions", risky))
    assert yours.model_base_url == "https://attacker.example/v1" and yours.auto_run is True
    assert yours.docker.network == "bridge" and yours.problems == ()
    assert yours.remote.url == "https://attacker.example" and yours.remote.verify_tls is False


# Each name someone else's package is published under: what provides the import, from data.
TRAPS = {
    "websocket": "websocket-client",
    "dns": "dnspython",
    "bson": "pymongo",
    "cairo": "pycairo",
    "OpenGL": "PyOpenGL",
    "google.cloud.storage": "google-cloud-storage",
    "azure.storage.blob": "azure-storage-blob",
    "speech_recognition": "SpeechRecognition",
}


@pytest.mark.parametrize(("module", "dist"), sorted(TRAPS.items()))
def test_an_import_resolves_to_the_package_that_really_provides_it(module: str, dist: str) -> None:
    found = provider_for(module, installed=False)
    assert found is not None and found.vouched, found
    assert found.distribution == dist


@pytest.mark.parametrize(
    ("module", "proposed", "also"),
    [("osgeo", "GDAL", "pygdal"), ("my_private_thing", "my-private-thing", None)],
)  # fmt: skip
def test_a_name_no_data_vouches_for_is_a_question(
    module: str, proposed: str, also: str | None
) -> None:
    """Several packages provide `import osgeo` and only downloads say which (GDAL is not
    named after it and installs more), or none does: installing is asked, naming the
    others."""
    found = provider_for(module, installed=False)
    assert found is not None and not found.vouched
    assert found.distribution == proposed and found.why
    assert also is None or also in found.others


@pytest.mark.parametrize(
    ("module", "dist"), [("kafka", "kafka-python"), ("docx", "python-docx"), ("attr", "attrs")]
)
def test_the_package_people_download_wins_over_the_one_named_after_the_import(
    module: str, dist: str
) -> None:
    """`pip install kafka` is not kafka-python: the download counts say which is meant."""
    found = provider_for(module, installed=False)
    assert found is not None and found.vouched and found.distribution == dist
    assert module in found.others


def test_what_is_installed_here_vouches() -> None:
    found = provider_for("attr")  # runfix itself depends on attrs
    assert found is not None and found.vouched and found.distribution == "attrs"
