"""The execution side of runfix: where code runs. Knows nothing of LSP.

The kernels live in `executor.local` (local) and `executor.docker` (the sandbox),
imported where they are used: importing this package loads neither jupyter_client
nor docker-py."""

from executor.base import ExecutorState, ExecutorUnavailable
from executor.events import (
    Display,
    Error,
    Event,
    Frame,
    RunOutcome,
    RunRequest,
    RunStatus,
    Span,
    Stream,
    Value,
    Variable,
)

__all__ = [
    "Display",
    "Error",
    "Event",
    "ExecutorState",
    "ExecutorUnavailable",
    "Frame",
    "RunOutcome",
    "RunRequest",
    "RunStatus",
    "Span",
    "Stream",
    "Value",
    "Variable",
]
