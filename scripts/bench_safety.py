#!/usr/bin/env python3
"""What the safety scan's allow-list costs and what it buys, on the same code both ways.

    scripts/bench_safety.py [ACCEPTED.json …]

- The catalogue of 32 ways model-written Python reached the machine past the old scan
  (`tests/adversarial/test_adv_allowlist.py`): how many ask, with the allow-list and
  without it (the old scan: only what it names).
- Fixes and code a model wrote that runfix accepted (`scripts/bench_fix_live.py --keep
  FILE` writes them: the live bench's fixes and Generate's code, with the document they
  went into): how many would now ask — each one a question where none was asked before.
  Without a file, only the catalogue and the everyday fixes are counted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import executor.safety as safety  # noqa: E402
from executor.vouched import document_names  # noqa: E402
from tests.adversarial.test_adv_allowlist import DOCUMENT, EVASIONS, EVERYDAY  # noqa: E402


def asks(code: str, document: str, modules: Sequence[str] = (), vouch: bool = True) -> list[str]:
    """What the scan names in `code` (empty: it runs unasked); `vouch` False: the old scan."""
    kept = getattr(safety, "unvouched")  # noqa: B009 (what scan calls, swapped below)
    if not vouch:
        setattr(safety, "unvouched", lambda *_, **__: [])  # noqa: B010
    try:
        found = safety.scan(code, context=document_names(document), modules=set(modules))
    finally:
        setattr(safety, "unvouched", kept)  # noqa: B010
    return [f.message for f in found]


def main(argv: Sequence[str]) -> int:
    old = sum(bool(asks(code, DOCUMENT, vouch=False)) for code in EVASIONS.values())
    new = sum(bool(asks(code, DOCUMENT)) for code in EVASIONS.values())
    print(
        f"catalogue: {len(EVASIONS)} evasions; the old scan asked for {old}, "
        f"the allow-list for {new}"
    )
    everyday = [name for name, code in EVERYDAY.items() if asks(code, DOCUMENT)]
    print(f"everyday fixes (tests): {len(everyday)} of {len(EVERYDAY)} ask {everyday or ''}")
    for name in argv:
        kept: list[dict[str, Any]] = json.loads(Path(name).read_text())
        asked = [
            (k["task"], said)
            for k in kept
            if (said := asks(k["code"], k["document"], k["modules"]))
        ]
        before = sum(bool(asks(k["code"], k["document"], k["modules"], False)) for k in kept)
        share = 100 * len(asked) / max(len(kept), 1)
        print(
            f"{name}: {len(kept)} accepted; {len(asked)} would ask now ({share:.0f} %), "
            f"{before} asked before"
        )
        for task, said in asked:
            print(f"  {task}: {said[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
