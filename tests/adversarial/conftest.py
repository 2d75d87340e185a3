"""A raw LSP peer for what pytest-lsp cannot stage: bytes a broken client would send,
and a read of every byte the server writes (anything between frames is a failure)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SERVER, SERVER_ENV


class WireError(AssertionError):
    """The server wrote something that is not an LSP frame."""


class Wire:
    """`runfix serve` on pipes, read frame by frame with a strict parser.

    Every byte on stdout must belong to a frame: output of the kernel leaking
    onto the channel fails the read at once, as it would fail a real client."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (read by log(), closed with the peer)
        self.proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env or SERVER_ENV,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out = self.proc.stdout.fileno()
        self._buffer = b""
        self._ids = 0
        self.received: list[dict[str, Any]] = []

    def log(self) -> str:
        """What the server logged so far: on stderr, and to the client (`window/logMessage`:
        a line sent there is not written to stderr too)."""
        self._log.seek(0)
        said = [m["params"]["message"] for m in self.notifications("window/logMessage")]
        return self._log.read().decode(errors="replace") + "\n".join(said)

    # -- writing ----------------------------------------------------------------------

    def raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def frame(self, body: bytes, length: int | None = None) -> None:
        """One frame; `length` other than the body's to play a client that miscounts."""
        self.raw(b"Content-Length: %d\r\n\r\n" % (len(body) if length is None else length) + body)

    def send(self, message: dict[str, Any]) -> None:
        self.frame(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def request(self, method: str, params: Any) -> int:
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        return self._ids

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    # -- reading ----------------------------------------------------------------------

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the server did not answer in time")
        ready, _, _ = select.select([self._out], [], [], left)
        if ready:
            chunk = os.read(self._out, 65536)
            if not chunk:
                raise EOFError("the server closed its output")
            self._buffer += chunk

    def next_message(self, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self._buffer:
            self._fill(deadline)
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not sep or not name or not name.replace(b"-", b"").isalpha():
                raise WireError(f"not an LSP header: {line!r} (in {head[:200]!r})")
            if name.lower() == b"content-length":
                length = int(value)
        if length is None:
            raise WireError(f"a frame without Content-Length: {head!r}")
        while len(rest) < length:
            self._buffer = head + b"\r\n\r\n" + rest
            self._fill(deadline)
            head, _, rest = self._buffer.partition(b"\r\n\r\n")
        body, self._buffer = rest[:length], rest[length:]
        message: dict[str, Any] = json.loads(body)
        self.received.append(message)
        return message

    def response(self, msg_id: Any, timeout: float = 60) -> dict[str, Any]:
        """The response to request `msg_id`; server requests are answered with null."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(max(deadline - time.monotonic(), 0.01))
            if "method" in message and "id" in message:  # a request of the server's
                self.send({"id": message["id"], "result": None})
                continue
            if "method" not in message and message.get("id") == msg_id:
                return message

    def next_error(self, timeout: float = 30) -> dict[str, Any]:
        """The next error response (notifications and answers to requests skipped)."""
        deadline = time.monotonic() + timeout
        while "error" not in (message := self.next_message(deadline - time.monotonic())):
            if "method" in message and "id" in message:
                self.send({"id": message["id"], "result": None})
        return message

    def call(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received if m.get("method") == method and "id" not in m]

    # -- a session ----------------------------------------------------------------------

    def initialize(self, folder: Path, options: dict[str, Any] | None = None) -> None:
        params = {
            "processId": os.getpid(),
            "rootUri": folder.as_uri(),
            "capabilities": {"textDocument": {"inlayHint": {}}},
            "initializationOptions": {"python": sys.executable, **(options or {})},
        }
        answer = self.call("initialize", params)
        assert "result" in answer, answer
        self.notify("initialized", {})

    def open(self, path: Path, text: str) -> str:
        path.write_text(text, encoding="utf-8")
        uri = path.as_uri()
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": document})
        return uri

    def run(self, uri: str, timeout: float = 60) -> dict[str, Any]:
        params = {"command": "runfix.run", "arguments": [{"uri": uri}]}
        return self.call("workspace/executeCommand", params, timeout)

    def close(self) -> int:
        """Shut down and exit if it still runs; the exit code. The log is gone after this."""
        if self.proc.poll() is None:
            try:
                self.call("shutdown", None, timeout=20)
                self.notify("exit", None)
            except (OSError, TimeoutError, EOFError, WireError):
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        code = self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._log.close()
        return code


@pytest.fixture
def wire() -> Iterator[Wire]:
    peer = Wire()
    try:
        yield peer
    finally:
        peer.close()
