"""The output view as a local web page: what any client can open (eglot, Helix, Zed…).

A small HTTP server on 127.0.0.1 (a random port, started on first use, in a
thread of its own) serves, under a per-session random token:

- `/<token>/view?uri=…&line=…`: the outputs of the statement at that line (text,
  images, DataFrame tables, kernel HTML) and the folder's latest images to flip
  through and compare;
- `/<token>/file?path=…`: a file runfix stored under a folder's
  `.runfix/outputs/` (names it made: 16 hex digits and a known suffix), nothing else.

What it refuses: a path without the token (404, saying nothing), a `Host`
header that is not this server's loopback address (403: a page elsewhere that
rebinds its DNS name to 127.0.0.1 cannot read it), any method but GET.
Kernel HTML is shown in a sandboxed frame, and served with a CSP `sandbox`:
no script a kernel sent ever runs, here or in an editor's webview.
"""

from __future__ import annotations

import contextlib
import html
import logging
import secrets
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from lsp_server.folder_files import read_regular, stored_output
from lsp_server.outputs.bundles import Output, latest_images
from lsp_server.outputs.view import HISTORY

log = logging.getLogger(__name__)

CONNECTIONS = 32
"""Connections the page serves at once."""
IDLE = 10.0
"""Seconds a connection may stay silent before it is closed."""

_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "svg": "image/svg+xml",
    "html": "text/html; charset=utf-8",
    "md": "text/plain; charset=utf-8",
    "tex": "text/plain; charset=utf-8",
    "json": "application/json",
}
# Nothing from elsewhere, no script anywhere; frames and images only from this server.
PAGE_POLICY = (
    "default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'; frame-src 'self'"
)
# A kernel's HTML (and SVG) is a sandboxed document of its own: no script, no form, no
# navigation, no same-origin access, whatever it holds.
FILE_POLICY = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"

View = Callable[[str, int], tuple[Path, list[Output]] | None]
"""(document URI, line) → its folder and the outputs of the statement there (None: none)."""


class OutputPage:
    """The loopback server; `url_for` starts it on first use."""

    def __init__(self, view: View, folders: Callable[[], Sequence[Path]]) -> None:
        self.view = view
        self.folders = folders
        self.token = secrets.token_urlsafe(24)
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server is not None else 0

    def url_for(self, uri: str, line: int) -> str:
        self._start()
        return f"http://127.0.0.1:{self.port}/{self.token}/view?uri={quote(uri)}&line={line}"

    def _start(self) -> None:
        with self._lock:
            if self._server is not None:
                return
            page = self

            class Handler(_Handler):
                owner = page

            self._server = _BoundedServer(("127.0.0.1", 0), Handler)
            threading.Thread(
                target=self._server.serve_forever, name="runfix-page", daemon=True
            ).start()
            log.info("output page on 127.0.0.1:%d", self.port)

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None

    # -- what is served -------------------------------------------------------------------

    def allowed_file(self, raw: str) -> Path | None:
        """`raw` if it names a file runfix stored in a known folder's outputs, else None
        (a link, anywhere below the folder, is not followed: `folder_files`)."""
        path = Path(raw)
        if not path.is_absolute():
            return None
        for folder in self.folders():
            if (stored := stored_output(folder, path)) is not None:
                return stored
        return None

    def file_url(self, path: Path) -> str:
        return f"/{self.token}/file?path={quote(str(path))}"

    def render_view(self, uri: str, line: int) -> str:
        found = self.view(uri, line)
        name = html.escape(Path(urlsplit(uri).path).name or uri)
        parts = [f"<h1>{name}, line {line + 1}</h1>"]
        if found is None:
            parts.append("<p class=none>No output on this line.</p>")
            folder = None
        else:
            folder, outputs = found
            parts.extend(self._output(o) for o in outputs)
        parts.append(self._history(folder))
        return _PAGE.format(title=name, body="\n".join(parts))

    def _output(self, output: Output) -> str:
        label = html.escape(output.text.strip())
        if output.kind == "text":
            return f"<pre>{output.colored or label}</pre>"
        if output.image is not None and self.allowed_file(str(output.image)):
            return (
                f"<figure><img src='{self.file_url(output.image)}' alt='{label}'>"
                f"<figcaption>{label}</figcaption></figure>"
            )
        html_file = output.file is not None and output.file.suffix == ".html"
        if output.file is not None and html_file and self.allowed_file(str(output.file)):
            return (
                f"<figure><iframe sandbox src='{self.file_url(output.file)}'></iframe>"
                f"<figcaption>{label}</figcaption></figure>"
            )
        if output.markdown is not None:
            return f"<pre class=markdown>{html.escape(output.markdown)}</pre>"
        return f"<pre>{label}</pre>"

    def _history(self, folder: Path | None) -> str:
        folders = [folder] if folder is not None else list(self.folders())
        images = sorted(
            (p for each in folders for p in latest_images(each, HISTORY)),
            key=_modified,
            reverse=True,
        )[:HISTORY]
        if not images:
            return ""
        items = "".join(
            f"<a href='{self.file_url(p)}'><img src='{self.file_url(p)}' alt='figure'></a>"
            for p in images
        )
        return f"<h2>Latest images</h2><div class=history>{items}</div>"


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class _BoundedServer(ThreadingHTTPServer):
    """One thread per connection, at most `CONNECTIONS` at once, each closed after `IDLE`
    seconds of silence. When every slot is taken, the connection that has waited longest
    without sending a whole request is closed to make room: connections that say nothing
    can neither use up the server's threads and descriptors nor keep a real request out."""

    daemon_threads = True
    request_queue_size = 128  # connections waiting to be taken (or closed)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(CONNECTIONS)
        self._waiting: dict[Any, None] = {}
        """Connections served that have not sent a whole request yet, oldest first."""
        self._lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._evict()
            if not self._slots.acquire(timeout=1.0):
                self.shutdown_request(request)  # busy with real requests: this one waits not
                return
        with self._lock:
            self._waiting[request] = None
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.started(request)
            self._slots.release()
            raise

    def _evict(self) -> None:
        """Close the oldest connection still silent (its thread ends, freeing its slot)."""
        with self._lock:
            oldest = next(iter(self._waiting), None)
            if oldest is None:
                return
            del self._waiting[oldest]
        with contextlib.suppress(OSError):
            oldest.shutdown(socket.SHUT_RDWR)

    def started(self, request: Any) -> None:
        """The connection sent a whole request: it is being answered, not evicted."""
        with self._lock:
            self._waiting.pop(request, None)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.started(request)
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    """One connection to the output page: a token-checked GET of a view, an image or a file."""

    owner: OutputPage
    server_version = "runfix"
    sys_version = ""
    timeout = IDLE  # seconds a connection may stay silent

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("page: " + format, *args)

    def parse_request(self) -> bool:
        whole = super().parse_request()
        if whole and isinstance(self.server, _BoundedServer):
            self.server.started(self.request)
        return whole

    def _refuse(self, code: int) -> None:
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        page = self.owner
        host = self.headers.get("Host", "")
        if host not in (f"127.0.0.1:{page.port}", f"localhost:{page.port}"):
            self._refuse(403)
            return
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if parts.path == f"/{page.token}/view":
            try:
                line = int(query.get("line", ["0"])[0])
            except ValueError:
                line = 0
            body = page.render_view(query.get("uri", [""])[0], max(0, line)).encode()
            self._send(body, "text/html; charset=utf-8", PAGE_POLICY)
        elif parts.path == f"/{page.token}/file":
            path = page.allowed_file(query.get("path", [""])[0])
            if path is None:
                self._refuse(404)
                return
            try:
                body = read_regular(path)
            except OSError:
                self._refuse(404)
                return
            self._send(body, _TYPES[path.suffix[1:]], FILE_POLICY)
        else:
            self._refuse(404)

    def do_POST(self) -> None:
        self._refuse(405)

    def _send(self, body: bytes, kind: str, policy: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", policy)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>runfix · {title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }}
pre {{ background: #f6f6f6; padding: .6em; overflow: auto; }}
figure {{ margin: 1em 0; }} figcaption {{ color: #666; font-size: 12px; }}
iframe {{ width: 100%; height: 24em; border: 1px solid #ddd; }}
img {{ max-width: 100%; }}
.history img {{ height: 120px; margin: 4px; border: 1px solid #ddd; }}
.none {{ color: #666; }}
</style></head>
<body>
{body}
</body></html>
"""
