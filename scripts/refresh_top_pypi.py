"""Refresh `executor/data/top-pypi-packages.csv`: the 15,000 most-downloaded distributions
on PyPI over the last 30 days, with their download counts, from Hugo van Kemenade's monthly
dump (https://github.com/hugovk/top-pypi-packages, from PyPI's public BigQuery dataset).

runfix reads it to choose among the distributions that provide an import name: the one
people install most (`executor/distributions.py`). Run it when the snapshot is old:

    python scripts/refresh_top_pypi.py            # fetch the current month's dump
    python scripts/refresh_top_pypi.py --from F   # or convert a downloaded JSON file
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

URL = "https://hugovk.dev/top-pypi-packages/top-pypi-packages.min.json"
OUT = Path(__file__).resolve().parent.parent / "executor" / "data" / "top-pypi-packages.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", type=Path, help="a dump already downloaded")
    args = parser.parse_args()
    if args.source is not None:
        raw = args.source.read_text(encoding="utf-8")
    else:
        with urllib.request.urlopen(URL, timeout=60) as answer:
            raw = answer.read().decode("utf-8")
    dump = json.loads(raw)
    rows = sorted(dump["rows"], key=lambda r: -int(r["download_count"]))
    lines = [f"# {dump['last_update']} ({len(rows)} projects, 30 days)", "project,downloads"]
    lines += [f"{r['project']},{int(r['download_count'])}" for r in rows]
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(rows)} projects, {dump['last_update']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
