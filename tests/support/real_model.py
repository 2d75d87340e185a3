"""A real small model on loopback: llama-cpp-python's OpenAI-compatible server with
Qwen2.5-Coder-0.5B-Instruct, both set up by `scripts/model` (cached outside the clone).

Why that model: it is the smallest instruct model on the package index that writes code
(SmolLM2-135M, the other one there, answers prose or nothing useful to a fix request),
it reads a prompt at 60–150 tokens/s and writes ~30 tokens/s on two cores, and the
issue's targets are measured with it. `RUNFIX_TEST_MODEL_URL`/`RUNFIX_TEST_MODEL` point
the same tests at another endpoint instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "qwen2.5-coder-0.5b"


class ModelUnavailable(Exception):
    """No real model can be had here; the message says why."""


def model_files() -> tuple[str, str]:
    """(the server's python, the GGUF file), from `scripts/model` (set up once)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "model")], capture_output=True, text=True, timeout=1800
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) < 2:
        raise ModelUnavailable(f"scripts/model failed: {done.stderr.strip()[-500:]}")
    return lines[-2], lines[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` on a free loopback port; `url` is its OpenAI base."""

    def __init__(self, python: str, model: str, log: Path, context: int = 8192) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.name = NAME
        self._log = open(log, "ab")  # noqa: SIM115 (closed in stop)
        command = [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--model_alias",
            NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(context),
            "--n_threads",
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
