"""`runfix serve`: stdio or one TCP connection, with the root folder's kernel launched first.

Building the server imports lsprotocol and pygls: ~0.6 s, most of it lsprotocol
defining its ~600 classes. A kernel boots in ~1 s, in its own process. So on
stdio the first message (`initialize`) is read before any of that is imported;
the kernel of its root folder is launched as the project file and the
`initializationOptions` configure it, and it boots while the server is built —
the first result of a session comes ~0.6 s sooner. A root that no document
belongs to keeps an idle kernel until the server stops.

Only where nothing is left to decide: the folder is trusted (its user said so, in
the state folder), and the client has no settings of its own to give
(`workspace/configuration`): those could say `executor: "docker"`, and for a
sandbox user the sandbox is the point. Otherwise the kernel starts when a
document opens, with every setting known.

`initialize` itself is answered then too, when this server answered the same client
before (`first_answer`): the editor goes on while the server is built.

This module imports neither pygls nor a kernel library at its top.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from executor.configs import LocalConfig
from executor.pool import KernelPool
from executor.trust import TrustStore
from lsp_server.lsp.first_answer import first_initialize
from lsp_server.settings import folder_settings
from lsp_server.text.frames import MAX_BODY, LineReader, read_frame, stdin_reader

log = logging.getLogger(__name__)

LAUNCH_WAIT = 2.0
"""Seconds to wait for the early kernel's process to exist before building the server."""


def root_folder(params: Any) -> Path | None:
    """The folder a client's `initialize` opens (its first workspace folder, else its root),
    as `LspEditor.folder_for` names folders; None for no folder or a non-file one."""
    from pygls.uris import to_fs_path  # pygls's package, without its server (no lsprotocol)

    if not isinstance(params, dict):
        return None
    folders = params.get("workspaceFolders")
    uri = params.get("rootUri")
    if isinstance(folders, list) and folders and isinstance(folders[0], dict):
        uri = folders[0].get("uri", uri)
    if not isinstance(uri, str) or not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return Path(path) if path and Path(path).is_dir() else None


async def launch_root_kernel(kernels: KernelPool, first: bytes) -> None:
    """If `first` is `initialize` with a folder whose code runs in a local kernel, make that
    kernel and start it; return once its process exists (or after `LAUNCH_WAIT`)."""
    try:
        message = json.loads(first)
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        params = message.get("params")
        folder = root_folder(params)
        if folder is None or not isinstance(params, dict) or _asks_settings(params):
            return
        decided = TrustStore().decision(folder)
        if decided is None:
            return  # nothing of an undecided folder's runs before its user says so
        settings, _ = folder_settings(folder, params.get("initializationOptions"))
        from lsp_server.executors import kernel_config
        from lsp_server.session import with_choice

        config = kernel_config(folder, with_choice(settings, decided[1]))
        if not isinstance(config, LocalConfig):
            return  # a container needs the engine; it starts when a document opens
        kernel = kernels.get(
            folder,
            config,
            grace=settings.interrupt_grace,
            startup_timeout=settings.kernel_start_timeout,
        )
    except Exception as exc:  # whatever is wrong is told when a document opens
        log.debug("no early kernel: %s", exc)
        return
    started = asyncio.ensure_future(kernel.start())
    started.add_done_callback(_quietly)
    loop = asyncio.get_running_loop()
    until = loop.time() + LAUNCH_WAIT
    # Polled: the process appears inside jupyter_client, which tells no one.
    while not kernel.booting and not started.done() and loop.time() < until:  # noqa: ASYNC110
        await asyncio.sleep(0.005)


def _asks_settings(params: dict[str, Any]) -> bool:
    """Whether the client answers `workspace/configuration` (its settings come later)."""
    workspace = (params.get("capabilities") or {}).get("workspace")
    return isinstance(workspace, dict) and bool(workspace.get("configuration"))


def _quietly(task: asyncio.Future[None]) -> None:
    """A failed early start is told again, to the user, when a document starts the kernel."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.info("the early kernel did not start: %s", exc)


async def _stdio() -> None:
    reader = await stdin_reader()
    first = await read_frame(reader)
    kernels = KernelPool()
    answered = None
    if first is not None:
        answered = first_initialize(first)
        if answered is not None and answered.known is not None:
            sys.stdout.buffer.write(answered.response())  # the client goes on meanwhile
            sys.stdout.buffer.flush()
            log.info("initialize answered as this server answered this client before")
        await launch_root_kernel(kernels, first)
    from pygls.io_ import StdoutWriter

    from lsp_server.lsp.app import create_server, log_to_client, serve_frames

    server = create_server(kernels)
    server.protocol.first = answered
    log_to_client(server, no_late_cancel)
    await serve_frames(server, reader, StdoutWriter(sys.stdout.buffer), first)


async def _tcp(host: str, port: int) -> None:
    from lsp_server.lsp.app import create_server, log_to_client, serve_frames

    server = create_server()
    log_to_client(server, no_late_cancel)
    done = asyncio.Event()

    async def connection(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            reader: LineReader = r
            await serve_frames(server, reader, w)
        finally:
            done.set()

    listener = await asyncio.start_server(connection, host, port, limit=MAX_BODY)
    log.info("listening on %s:%s", host, port)
    async with listener:
        await done.wait()


def _exit_code(main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """0 after `shutdown` then `exit` (or the end of input), 1 for `exit` without `shutdown`."""
    try:
        asyncio.run(main())
    except SystemExit as exc:  # pygls's exit handler: its code is LSP's
        return exc.code if isinstance(exc.code, int) else 1
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


def no_late_cancel(record: logging.LogRecord) -> bool:
    """pygls warns of a `$/cancelRequest` for a request already answered: the editor's
    ordinary race (it cancels what it no longer needs), not a warning for the user."""
    return not str(record.msg).startswith("Cancel notification for unknown message id")


def _log_to_stderr(level: int) -> None:
    """Logs go to stderr (the editor's log of the server) until `app.log_to_client` sends
    them as the client's `window/logMessage`: a line the client got is not written to
    stderr too (VS Code's output would show it twice, once as an error; Neovim 0.7 files
    all of stderr under ERROR)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(lambda record: not getattr(record, "sent_to_client", False))
    handler.addFilter(no_late_cancel)
    logging.basicConfig(level=level, handlers=[handler])
    for noisy in ("pygls", "httpx", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def command(args: argparse.Namespace) -> int:
    level = getattr(logging, args.log_level)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit():
            print(
                "runfix serve: error: --tcp takes HOST:PORT, e.g. 127.0.0.1:2087", file=sys.stderr
            )
            return 2
        return serve_tcp(level, host, int(port))
    return serve_stdio(level)


def serve_stdio(level: int) -> int:
    """LSP over stdin/stdout; kernels stop when the client says exit or stdin closes."""
    _log_to_stderr(level)
    return _exit_code(lambda: _stdio())


def serve_tcp(level: int, host: str, port: int) -> int:
    """LSP over one TCP connection; the server ends when that client disconnects."""
    _log_to_stderr(level)
    return _exit_code(lambda: _tcp(host, port))
