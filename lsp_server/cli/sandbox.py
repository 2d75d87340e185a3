"""`runfix sandbox build`: the Docker sandbox's default image (`executor.sandbox`)."""

from __future__ import annotations

import argparse
import sys

from executor import sandbox
from executor.base import ExecutorUnavailable
from executor.configs import DEFAULT_IMAGE
from executor.docker import describe_image


def command(args: argparse.Namespace) -> int:
    return build_sandbox(args.tag or DEFAULT_IMAGE, args.method, args.mirror, args.if_missing)


def build_sandbox(tag: str, method: str, mirror: str | None, if_missing: bool) -> int:
    if if_missing:
        try:
            if describe_image(tag) is not None:
                print(f"runfix sandbox: {tag} is there")
                return 0
        except ExecutorUnavailable as exc:
            print(f"runfix sandbox: {exc}", file=sys.stderr)
            return 1
    try:
        sandbox.build(
            tag, method, mirror=mirror or sandbox.MIRROR, say=lambda line: print(line, flush=True)
        )
    except sandbox.BuildError as exc:
        print(f"runfix sandbox: error: {exc}", file=sys.stderr)
        return 1
    return 0
