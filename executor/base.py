"""What every kind of executor shares with the language server: its states, and the error
that says it cannot start (the kinds themselves: `executor.kinds`, their run loop:
`executor.jupyter.JupyterKernel`)."""

from __future__ import annotations

import enum


class ExecutorState(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"
    DEAD = "dead"
    STOPPED = "stopped"


class ExecutorUnavailable(Exception):
    """The executor cannot start; the message says why and how to fix it."""


def short_error(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line of a message: its first line, at most `limit` characters
    (its type's name where it says nothing)."""
    text = str(exc).strip().splitlines()
    return text[0][:limit] if text else type(exc).__name__
