#!/usr/bin/env python3
"""A Jupyter kernel that does nothing, at once: the floor `scripts/bench_cost.py` measures
runfix's own cost against. It speaks the same transport as every kernel (ZeroMQ, signed
messages, a connection file) and answers each request as a real kernel would — busy, the
reply, idle — without running anything (an execute's reply is `ok`, its count the next).

Code that starts with `-- late` (a Lua comment) has a value, and the kernel publishes it
after its idle and its reply — 50 ms after, against the protocol, as Deno's kernel now and
then does — with `text/html` beside its text: the tests' kernel that misbehaves so.

Each execute_request's arrival and the moment its idle went out are appended to the file
`$NULL_KERNEL_TIMES` names (as `time.perf_counter()`, the machine's monotonic clock, the
same in every process): where a run's time goes before the kernel has the code and after
it answered.

Usage (a kernelspec's argv): python null_kernel.py -f {connection_file}
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import zmq

DELIMITER = b"<IDS|MSG>"
INFO = {
    "status": "ok",
    "protocol_version": "5.3",
    "implementation": "null",
    "implementation_version": "1.0",
    "language_info": {"name": "lua", "version": "5.4", "file_extension": ".lua"},
    "banner": "a kernel that answers at once",
    "help_links": [],
}
"""It says it runs Lua: a language runfix runs as any other kernel's (no Lua kernel is
installed here to take the document instead)."""
LATE = 0.05
"""Seconds after its idle that a `-- late` run's value is published."""


class Kernel:
    def __init__(self, connection: dict[str, Any]) -> None:
        self.key = connection["key"].encode()
        self.session = uuid.uuid4().hex
        self.count = 0
        self.times = os.environ.get("NULL_KERNEL_TIMES")
        context = zmq.Context()
        address = f"{connection['transport']}://{connection['ip']}:"
        self.shell = context.socket(zmq.ROUTER)
        self.control = context.socket(zmq.ROUTER)
        self.stdin = context.socket(zmq.ROUTER)
        self.iopub = context.socket(zmq.PUB)
        heartbeat = context.socket(zmq.REP)
        for socket, port in (
            (self.shell, "shell_port"),
            (self.control, "control_port"),
            (self.stdin, "stdin_port"),
            (self.iopub, "iopub_port"),
            (heartbeat, "hb_port"),
        ):
            socket.bind(f"{address}{connection[port]}")
        threading.Thread(target=zmq.proxy, args=(heartbeat, heartbeat), daemon=True).start()

    def sign(self, parts: list[bytes]) -> bytes:
        mac = hmac.new(self.key, digestmod=hashlib.sha256)
        for part in parts:
            mac.update(part)
        return mac.hexdigest().encode()

    def send(
        self,
        socket: zmq.Socket[bytes],
        kind: str,
        content: dict[str, Any],
        parent: dict[str, Any],
        ids: Sequence[bytes] = (),
    ) -> None:
        header = {
            "msg_id": uuid.uuid4().hex,
            "msg_type": kind,
            "username": "null",
            "session": self.session,
            "date": datetime.now(timezone.utc).isoformat(),
            "version": "5.3",
        }
        parts = [json.dumps(p).encode() for p in (header, parent, {}, content)]
        socket.send_multipart([*ids, DELIMITER, self.sign(parts), *parts])

    def answer(self, socket: zmq.Socket[bytes], frames: list[bytes]) -> bool:
        """Answer one request; False once asked to shut down."""
        received = time.perf_counter()
        split = frames.index(DELIMITER)
        ids, signature, parts = frames[:split], frames[split + 1], frames[split + 2 : split + 6]
        if not hmac.compare_digest(signature, self.sign(parts)):
            return True  # not signed with the connection's key: not ours to answer
        header = json.loads(parts[0])
        kind = header["msg_type"]
        self.send(self.iopub, "status", {"execution_state": "busy"}, header)
        going = True
        if kind == "execute_request":
            self.count += 1
            reply: dict[str, Any] = {
                "status": "ok",
                "execution_count": self.count,
                "user_expressions": {},
                "payload": [],
            }
        elif kind == "kernel_info_request":
            reply = INFO
        elif kind == "complete_request":
            content = json.loads(parts[3])
            cursor = content.get("cursor_pos", 0)
            reply = {"status": "ok", "matches": [], "cursor_start": cursor, "cursor_end": cursor}
            reply["metadata"] = {}
        elif kind == "inspect_request":
            reply = {"status": "ok", "found": False, "data": {}, "metadata": {}}
        elif kind == "is_complete_request":
            reply = {"status": "complete"}
        elif kind == "comm_info_request":
            reply = {"status": "ok", "comms": {}}
        elif kind == "history_request":
            reply = {"status": "ok", "history": []}
        elif kind == "shutdown_request":
            reply = {"status": "ok", "restart": json.loads(parts[3]).get("restart", False)}
            going = False
        elif kind == "interrupt_request":
            reply = {"status": "ok"}
        else:
            reply = {"status": "error", "ename": "NotHere", "evalue": kind, "traceback": []}
        self.send(socket, kind.replace("_request", "_reply"), reply, header, ids)
        self.send(self.iopub, "status", {"execution_state": "idle"}, header)
        answered = time.perf_counter()
        if kind == "execute_request" and json.loads(parts[3])["code"].startswith("-- late"):
            time.sleep(LATE)
            value = {"text/plain": "late value", "text/html": "<b>late value</b>"}
            content = {"execution_count": self.count, "data": value, "metadata": {}}
            self.send(self.iopub, "execute_result", content, header)
        if kind == "execute_request" and self.times:
            with open(self.times, "a") as out:
                out.write(f"{received!r} {answered!r}\n")
        return going

    def serve(self) -> None:
        poller = zmq.Poller()
        for socket in (self.shell, self.control, self.stdin):
            poller.register(socket, zmq.POLLIN)
        while True:
            for socket, _ in poller.poll():
                if not self.answer(socket, socket.recv_multipart()):
                    return


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt: there is nothing running
    path = sys.argv[sys.argv.index("-f") + 1]
    with open(path) as file:
        Kernel(json.load(file)).serve()


if __name__ == "__main__":
    main()
