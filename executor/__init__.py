"""The execution side of runfix: where code runs. Knows nothing of LSP."""

from executor.base import Executor, ExecutorState, ExecutorUnavailable
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
from executor.kernel import LocalKernel

__all__ = [
    "Display",
    "Error",
    "Event",
    "Executor",
    "ExecutorState",
    "ExecutorUnavailable",
    "Frame",
    "LocalKernel",
    "RunOutcome",
    "RunRequest",
    "RunStatus",
    "Span",
    "Stream",
    "Value",
    "Variable",
]
