"""What the debugger shows is the user's code (issue 70, 7): the exception view's traceback
and the threads without runfix's machinery."""

from __future__ import annotations

from lsp_server.debug.session import _MACHINE_THREAD, DebugSession

TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/tmp/ipykernel_1/123.py", line 1, in <module>\n'
    "    __import__('_runfix_kernel').run('...')\n"
    '  File "<string>", line 562, in _steps\n'
    "    exec(code, namespace)\n"
    '  File "/work/project/sales.py", line 7, in <module>\n'
    "    total = mean(values)\n"
    '  File "/work/project/stats.py", line 2, in mean\n'
    "    return sum(xs) / len(xs)\n"
    "ZeroDivisionError: division by zero\n"
)


def test_the_exception_views_traceback_holds_only_the_users_frames() -> None:
    session = object.__new__(DebugSession)
    session._cells_prefix = "/tmp/ipykernel_1/"
    shown = session._users_trace(TRACE)
    assert shown == (
        "Traceback (most recent call last):\n"
        '  File "/work/project/sales.py", line 7, in <module>\n'
        "    total = mean(values)\n"
        '  File "/work/project/stats.py", line 2, in mean\n'
        "    return sum(xs) / len(xs)\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert "_runfix_kernel" not in shown and "<string>" not in shown


def test_runfixs_own_threads_are_not_listed() -> None:
    assert _MACHINE_THREAD.search("runfix-live")
    assert _MACHINE_THREAD.search("IPythonHistorySavingThread")
    assert not _MACHINE_THREAD.search("MainThread") and not _MACHINE_THREAD.search("worker")
