#!/usr/bin/env python3
"""`runfix serve` with a profiler switched by signals, for `bench_cost.py --profile`: SIGUSR1
starts (clearing what it had), SIGUSR2 stops and writes the stats to the file named by
the first argument — so a profile holds the runs measured, not the start or the imports.

Usage: python profiled_serve.py STATS [runfix serve's arguments…]
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).parent.parent))  # this runfix, as `python -m` finds it

profiler = cProfile.Profile()


def start(signum: int, frame: FrameType | None) -> None:
    profiler.clear()
    profiler.enable()


def stop(signum: int, frame: FrameType | None) -> None:
    profiler.disable()
    profiler.dump_stats(STATS)


STATS = sys.argv[1]
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
sys.argv = ["runfix", *sys.argv[2:]]
runpy.run_module("lsp_server", run_name="__main__", alter_sys=True)
