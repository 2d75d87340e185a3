"""A real Jupyter Server on loopback, for the `executor: "remote"` tests.

Started from this environment's `jupyter_server` (token auth, loopback only,
a root folder of its own); its kernels run on this environment's Python.
It can be killed and started again on the same port, as a server that crashes
and comes back does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

TOKEN_ENV = "RUNFIX_TEST_REMOTE_TOKEN"
"""The variable the runfix servers under test read the token from (`remote.tokenEnv`)."""
TOKEN = os.environ.setdefault(TOKEN_ENV, secrets.token_hex(16))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class JupyterServer:
    def __init__(
        self,
        *args: str,
        token: str = TOKEN,
        port: int | None = None,
        tls: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args, self.token = list(args), token
        self.env = env or {}
        """More environment for the server and so its kernels."""
        self.port = port or free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.root = Path(tempfile.mkdtemp(prefix="runfix-jupyter-root-"))
        self.verify: ssl.SSLContext | bool = True
        if tls:  # a certificate for 127.0.0.1 from a CA of the test's own, which no one trusts
            import trustme

            authority = trustme.CA()
            certificate = authority.issue_cert("127.0.0.1")
            key = self.root.parent / f"{self.root.name}.key"
            cert = self.root.parent / f"{self.root.name}.pem"
            certificate.private_key_pem.write_to_path(str(key))
            certificate.cert_chain_pems[0].write_to_path(str(cert))
            self.ca = self.root.parent / f"{self.root.name}-ca.pem"
            authority.cert_pem.write_to_path(str(self.ca))
            self.args += [f"--ServerApp.certfile={cert}", f"--ServerApp.keyfile={key}"]
            self.verify = ssl.create_default_context(cafile=str(self.ca))
        self.log = self.root.parent / f"{self.root.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> JupyterServer:
        # Its kernels must not see what the runfix server under test holds.
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNFIX_TEST_")}
        env.update(self.env)
        command = self.command()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter server exited: {self.log.read_text()[-2000:]}")
            try:
                status = httpx.get(
                    f"{self.url}/api/kernelspecs",
                    headers=self.headers,
                    timeout=2,
                    verify=self.verify,
                )
                if status.is_success:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"jupyter server did not start: {self.log.read_text()[-2000:]}")

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            *self.args,
        ]
        return [*command, "--allow-root"] if os.geteuid() == 0 else command

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def kernels(self) -> list[dict[str, Any]]:
        answer = httpx.get(
            f"{self.url}/api/kernels", headers=self.headers, timeout=10, verify=self.verify
        )
        answer.raise_for_status()
        kernels: list[dict[str, Any]] = answer.json()
        return kernels

    def create(self) -> str:
        """Start a kernel as someone else would (not runfix); its id."""
        answer = httpx.post(
            f"{self.url}/api/kernels", json={"name": "python3"}, headers=self.headers, timeout=60
        )
        answer.raise_for_status()
        return str(answer.json()["id"])

    def delete(self, kernel_id: str) -> None:
        httpx.delete(f"{self.url}/api/kernels/{kernel_id}", headers=self.headers, timeout=30)

    def kill(self) -> None:
        """SIGKILL the server and the kernels it started (its process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(15)
        self.kill()

    def options(self, **more: Any) -> dict[str, Any]:
        """Initialization options that point runfix at this server."""
        return {"executor": "remote", "remote": {"url": self.url, "tokenEnv": TOKEN_ENV, **more}}


GATEWAY = Path(__file__).parents[1] / ".gateway" / "venv" / "bin" / "jupyter-enterprisegateway"
"""Where `scripts/gateway` installs Enterprise Gateway (a venv of its own: it pins an old
jupyter-server, jupyter-client and pyzmq)."""


class EnterpriseGateway(JupyterServer):
    """A real Jupyter Enterprise Gateway on loopback, launching local kernels (its
    `LocalProcessProxy`, as a Kubernetes one would launch pods), listing kernels on."""

    def __init__(self, executable: Path, *args: str) -> None:
        super().__init__(*args)
        self.executable = executable

    def command(self) -> list[str]:
        return [
            str(self.executable),
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port_retries=0",
            f"--EnterpriseGatewayApp.auth_token={self.token}",
            "--EnterpriseGatewayApp.list_kernels=True",
            *self.args,
        ]

    def start(self) -> EnterpriseGateway:
        super().start()
        return self


class Proxy:
    """A loopback TCP proxy in front of a server: it can cut every connection through it
    (a network that drops) and delay what it carries each way (a slow network)."""

    def __init__(self, target_port: int, delay: float = 0.0) -> None:
        self.target_port, self.delay = target_port, delay
        self.down = False
        """While set, every connection is dropped as it comes (a network that is gone)."""
        self._loop = asyncio.new_event_loop()
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self._server = server
        self.port = int(server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Copy one way, each chunk `delay` seconds after it came, in order."""
        chunks: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await chunks.get()
                if not chunk:
                    break
                wait = due - self._loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()

        delivering = asyncio.ensure_future(deliver())
        try:
            while chunk := await reader.read(65536):
                chunks.put_nowait((self._loop.time() + self.delay, chunk))
        finally:
            chunks.put_nowait((0.0, b""))
            with contextlib.suppress(Exception):
                await delivering
            writer.close()
            self._writers.discard(writer)

    def cut(self) -> int:
        """Drop every connection through the proxy at once; how many there were."""

        def abort() -> int:
            count = len(self._writers)
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()
            return count

        return int(asyncio.run_coroutine_threadsafe(_call(abort), self._loop).result(10))

    def close(self) -> None:
        self.cut()

        async def end() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(end(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


async def _call(function: Any) -> Any:
    return function()
