"""`runfix trust`: decide, revoke or list which folders may run their own code.

The decisions live in the user's state folder (`executor.trust`), where an
editor's server reads them at its next run: `runfix trust` in a terminal is how
a user of an editor that cannot show runfix's question decides.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from executor.trust import Choice, TrustFileError, TrustStore

MEANING = {
    Choice.TRUST: "with its own interpreter and settings",
    Choice.SANDBOX: "in the Docker sandbox",
    Choice.OWN: "on runfix's own Python",
}


def command(args: argparse.Namespace) -> int:
    return trust_command(args.folder, args.choice, args.revoke, args.list)


def trust_command(folder: Path | None, choice: str, revoke: bool, listing: bool) -> int:
    store = TrustStore()
    try:
        return _trust(store, folder, choice, revoke, listing)
    except TrustFileError as exc:
        print(f"runfix: error: {exc}", file=sys.stderr)
        return 2


def _trust(store: TrustStore, folder: Path | None, choice: str, revoke: bool, listing: bool) -> int:
    if listing:
        entries = list(store.entries())
        if store.problem is not None:
            raise TrustFileError(store.problem)
        for path, decided in entries:
            print(f"{path}\t{decided.value}\t({MEANING[decided]})")
        if not entries:
            print("runfix: no folder is trusted", file=sys.stderr)
        return 0
    target = (folder or Path.cwd()).expanduser()
    if not target.is_dir():
        print(f"runfix: error: {target} is not a folder", file=sys.stderr)
        return 2
    if revoke:
        gone = store.revoke(target)
        covering = store.decision(target)
        if not gone and covering is not None:
            parent = covering[0]
            print(
                f"runfix: error: {target} is trusted through {parent}; nothing was revoked "
                f"(to revoke that folder and those inside it: runfix trust --revoke {parent})",
                file=sys.stderr,
            )
            return 2
        if not gone:
            print(f"runfix: {target} was not trusted")
        for path in gone:
            print(
                f"runfix: {path} is no longer trusted (a running editor's kernel for it stops "
                "when it is next asked to run)"
            )
        return 0
    decided = Choice(choice)
    key = store.decide(target, decided)
    print(f"runfix: {key} runs its code {MEANING[decided]} (and so do the folders inside it)")
    return 0
