"""A model server for tests: OpenAI chat completions over HTTP on loopback.

It answers `POST /v1/chat/completions` with scripted replies, one per request
in order, streamed as server-sent events when the request asks for a stream
and as one JSON body otherwise, and records every request it got. A reply can
also be an error status (with `Retry-After`), a hang, or a slow stream. The
real `openai` client talks to it; only the model's words are scripted.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    hang: float = 0.0
    """Seconds to wait before answering (a hanging endpoint)."""
    chunk_delay: float = 0.0
    """Seconds between streamed chunks."""
    chunks: int = 4
    headers: dict[str, str] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] | None = None
    """Only for a request this says yes to (the paste's, a sampled one); None: any. A
    request takes the first scripted reply that is for it; one with `n` takes n of them
    (`n` choices), where they come in order."""
    cut: float | None = None
    """A stream that ends early, as llama-cpp-python's does when another request interrupts
    it: only this share of the content (0: none, just the role chunk), no `finish_reason`,
    then `[DONE]`. A request without streaming gets the whole content."""


def code(text: str) -> Reply:
    """A typical reply: a sentence, then the code in a python block."""
    return Reply(f"Here you go:\n\n```python\n{text.strip()}\n```\n")


class ModelServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.aborted = 0
        """Streams the client hung up on before the end."""
        self.default: Reply | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, *replies: Reply | str) -> None:
        self.replies.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def user_text(self, index: int = -1) -> str:
        """The user message of a recorded request."""
        messages = self.requests[index]["messages"]
        return "\n".join(m["content"] for m in messages if m["role"] == "user")

    def __enter__(self) -> ModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict[str, Any] | None = None) -> Reply:
        with self._lock:
            for reply in self.replies:
                if reply.when is None or (body is not None and reply.when(body)):
                    self.replies.remove(reply)
                    return reply
        if self.default is not None:
            return self.default
        return Reply(status=500, content="the test scripted no reply for this request")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "test-model"}]})
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                server.requests.append(body)
                server.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = server._next(body)
                more = [server._next(body) for _ in range(int(body.get("n") or 1) - 1)]
                end = time.monotonic() + reply.hang
                while time.monotonic() < end and not server._stop.is_set():
                    time.sleep(0.05)
                if reply.status != 200:
                    error = {"error": {"message": reply.content or "error", "type": "test"}}
                    self._json(reply.status, error, reply.headers)
                elif body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _completion(body, reply.content, [r.content for r in more]))

            def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                try:
                    for event in _events(body, reply):
                        self.wfile.write(f"data: {event}\n\n".encode())
                        self.wfile.flush()
                        if reply.chunk_delay:
                            time.sleep(reply.chunk_delay)
                        if server._stop.is_set():
                            return
                except (BrokenPipeError, ConnectionResetError):
                    server.aborted += 1

        return Handler


def _completion(body: dict[str, Any], content: str, more: list[str]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            for i, text in enumerate([content, *more])
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _events(body: dict[str, Any], reply: Reply) -> Iterator[str]:
    text = reply.content
    size = max(1, -(-len(text) // max(reply.chunks, 1)))
    pieces = [text[i : i + size] for i in range(0, len(text), size)] or [""]

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        return json.dumps(
            {
                "id": "chatcmpl-test",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", "test-model"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    yield chunk({"role": "assistant", "content": ""}, None)
    if reply.cut is not None:
        kept = text[: int(len(text) * reply.cut)]
        if kept:
            yield chunk({"content": kept}, None)
        yield "[DONE]"
        return
    for piece in pieces:
        yield chunk({"content": piece}, None)
    yield chunk({}, "stop")
    yield "[DONE]"
