"""`runfix test --fix` against a real small model on the tasks of `test_fix_tasks.py` (a
seeded bug in a module, one failing test, three or more passing tests of the same module),
beside the same model given the module, the test file and pytest's output once per attempt
("paste it into a chat", the reply's code written over the module), and beside aider
(`aider --test-cmd … --auto-test --edit-format whole`, the same endpoint and model) where
it is installed.

    .venv/bin/python scripts/bench_test_fix.py [--url URL --model NAME] [--only NAME…]
        [--attempts N] [--skip-paste] [--skip-aider] [--aider PATH] [--verbose]

Without `--url` it starts Qwen2.5-Coder-0.5B-Instruct on loopback (`scripts/model` sets it
up). All sides get the same attempts (runfix's `fix.maxAttempts`, 3) and answer bound, at
temperature 0 (runfix's retries sample warmer, as its loop does). A task counts as fixed when
pytest, run afresh on the folder afterwards, passes every test; "broke" counts the tasks left
with a test failing that passed before; "test edits" the tasks whose test file changed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from test_fix_tasks import TASKS, TestTask  # noqa: E402

from tests.support.real_model import Proxy, chat  # noqa: E402
from tests.support.real_model import start as start_model  # noqa: E402

SEED = 0
ATTEMPTS = 3
_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[^\n]*\n(.*?)(?:```|\Z)", re.S)


@dataclass
class Outcome:
    fixed: bool
    broke: bool
    test_edited: bool
    seconds: float
    note: str = ""


def make_folder(base: Path, task: TestTask, model: str, attempts: int) -> Path:
    folder = base / task.name
    (folder / "app").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "app" / "__init__.py").write_text("")
    (folder / "app" / f"{task.name}.py").write_text(task.module)
    (folder / "tests" / f"test_{task.name}.py").write_text(task.tests)
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "app"\n[tool.runfix]\npython = "{sys.executable}"\n'
        f'model = {{ name = "{model}" }}\nfix = {{ maxAttempts = {attempts} }}\n'
    )
    return folder


def pytest_outcomes(folder: Path) -> dict[str, str]:
    """Each test's outcome, pytest run afresh on the folder (`-rA`)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "tests"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    found = {}
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            found[rest.split(" - ")[0].strip()] = word
    return found


def pytest_text(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "tests"],
        cwd=folder, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout[-6000:]


def judge(folder: Path, task: TestTask, before: dict[str, str], began: float, note: str) -> Outcome:
    after = pytest_outcomes(folder)
    passed_before = [t for t, o in before.items() if o == "PASSED"]
    fixed = bool(after) and all(o == "PASSED" for o in after.values()) and len(after) == len(before)
    broke = any(after.get(t) != "PASSED" for t in passed_before)
    tests_now = (folder / "tests" / f"test_{task.name}.py").read_text()
    return Outcome(fixed, broke, tests_now != task.tests, time.monotonic() - began, note)


def run_runfix(folder: Path, task: TestTask, env: dict[str, str], verbose: bool) -> Outcome:
    before = pytest_outcomes(folder)
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lsp_server", "test", "--fix"],
        cwd=folder, capture_output=True, text=True, timeout=900, env=env,
    )  # fmt: skip
    said = [line for line in done.stdout.splitlines() if ": note: " in line and "fix" in line]
    if verbose:
        print(done.stdout + done.stderr[-2000:])
    return judge(folder, task, before, began, said[-1].split(": note: ", 1)[-1] if said else "")


def run_paste(
    folder: Path, task: TestTask, url: str, model: str, max_tokens: int, attempts: int
) -> Outcome:
    """Per attempt: the module, the test file and pytest's output pasted into a chat; the
    reply's code written over the module; pytest again."""
    before = pytest_outcomes(folder)
    began = time.monotonic()
    module = folder / "app" / f"{task.name}.py"
    for number in range(1, attempts + 1):
        output = pytest_text(folder)
        user = (
            f"My module app/{task.name}.py:\n```python\n{module.read_text()}```\n\n"
            f"Its tests, tests/test_{task.name}.py:\n```python\n{task.tests}```\n\n"
            f"Running pytest says:\n```\n{output}\n```\nFix the bug in the module. Reply with "
            "the complete corrected module in one ```python block."
        )
        messages = [
            {"role": "system", "content": "You are a helpful Python programming assistant."},
            {"role": "user", "content": user},
        ]
        blocks = _BLOCK.findall(chat(url, model, messages, max_tokens))
        if blocks:
            module.write_text(blocks[0])
        outcome = judge(folder, task, before, began, f"attempt {number}")
        if outcome.fixed:
            return outcome
    return judge(folder, task, before, began, f"{attempts} attempts")


def run_aider(folder: Path, task: TestTask, aider: str, url: str, model: str) -> Outcome:
    """aider as its users run it for this: the module and the test file in the chat, the
    test command run after each edit and its failures sent back (aider's own three
    reflections)."""
    before = pytest_outcomes(folder)
    began = time.monotonic()
    command = [
        aider, "--model", f"openai/{model}", "--openai-api-base", url,
        "--openai-api-key", "bench", "--edit-format", "whole",
        "--test-cmd", f"{sys.executable} -m pytest -q -p no:cacheprovider tests",
        "--auto-test", "--yes-always", "--no-git", "--no-check-update",
        "--no-show-model-warnings", "--no-analytics", "--no-pretty", "--map-tokens", "0",
        "--message", f"Fix the bug in app/{task.name}.py so that the tests pass.",
        f"app/{task.name}.py", f"tests/test_{task.name}.py",
    ]  # fmt: skip
    note = ""
    try:
        done = subprocess.run(
            command, cwd=folder, capture_output=True, text=True, timeout=300,
            env={**os.environ, "OPENAI_API_KEY": "bench", "AIDER_ANALYTICS": "false"},
        )  # fmt: skip
        note = "; ".join(line for line in done.stdout.splitlines()[-3:] if line.strip())[:120]
    except subprocess.TimeoutExpired:
        note = "timed out after 300 s"
    return judge(folder, task, before, began, note)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", help="an OpenAI-compatible endpoint (default: start Qwen)")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--only", nargs="*", help="task names")
    parser.add_argument("--attempts", type=int, default=ATTEMPTS)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--skip-paste", action="store_true")
    parser.add_argument("--skip-aider", action="store_true")
    parser.add_argument("--aider", default=shutil.which("aider"), help="aider's executable")
    parser.add_argument(
        "--aider-tasks", type=int, help="aider on the first N tasks only (it takes minutes each)"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    tasks = [t for t in TASKS if not args.only or t.name in args.only]
    with tempfile.TemporaryDirectory(prefix="bench-test-fix-") as tmp:
        base = Path(tmp)
        server = None
        url = args.url
        if url is None:
            print("starting Qwen2.5-Coder-0.5B-Instruct on loopback (scripts/model)", flush=True)
            server = start_model(base / "model.log")
            url, args.model = server.url, server.name
        proxy = Proxy(url)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "OPENAI_API_KEY": "bench",
            "OPENAI_BASE_URL": proxy.url,
            "RUNFIX_MODEL_TEMPERATURE": "0",
            "RUNFIX_MODEL_SEED": str(SEED),
            "RUNFIX_MODEL_MAX_TOKENS": str(args.max_tokens),
        }
        sides: dict[str, list[Outcome]] = {"runfix": []}
        if not args.skip_paste:
            sides["paste"] = []
        if not args.skip_aider and args.aider:
            sides["aider"] = []
        elif not args.skip_aider:
            print("aider: not installed (pip install aider-chat, or --aider PATH): no row")
        try:
            for task in tasks:
                row = []
                for side, outcomes in sides.items():
                    limit = args.aider_tasks
                    if side == "aider" and limit is not None and tasks.index(task) >= limit:
                        continue
                    folder = make_folder(base / side, task, args.model, args.attempts)
                    if side == "runfix":
                        outcome = run_runfix(folder, task, env, args.verbose)
                    elif side == "paste":
                        outcome = run_paste(
                            folder, task, proxy.url, args.model, args.max_tokens, args.attempts
                        )
                    else:
                        outcome = run_aider(folder, task, args.aider, proxy.url, args.model)
                    outcomes.append(outcome)
                    mark = "fixed" if outcome.fixed else "-"
                    mark += " BROKE" if outcome.broke else ""
                    mark += " TEST-EDIT" if outcome.test_edited else ""
                    row.append(f"{side} {mark} {outcome.seconds:.0f}s")
                    if args.verbose and outcome.note:
                        row.append(f"({outcome.note})")
                print(f"{task.name:12} " + " | ".join(row), flush=True)
        finally:
            proxy.close()
            if server is not None:
                server.stop()
    print()
    print(f"{len(tasks)} tasks, {args.attempts} attempts each, model {args.model}")
    counts = {side: sum(o.fixed for o in outcomes) for side, outcomes in sides.items()}
    for side, outcomes in sides.items():
        seconds = statistics.median(o.seconds for o in outcomes) if outcomes else 0.0
        print(
            f"{side:7} fixed {counts[side]:2}/{len(outcomes)} "
            f"({100 * counts[side] / max(len(outcomes), 1):.0f} %), "
            f"broke a passing test {sum(o.broke for o in outcomes)}, "
            f"test files edited {sum(o.test_edited for o in outcomes)}, "
            f"median {seconds:.1f} s"
        )
    if "paste" in counts:
        ratio = counts["runfix"] / counts["paste"] if counts["paste"] else float("inf")
        print(f"runfix / paste: {ratio:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
