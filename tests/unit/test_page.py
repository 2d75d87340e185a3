"""The loopback output page over real HTTP: the token, the Host header, the files it serves."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from lsp_server.outputs.bundles import FOLDER, Output, OutputFiles
from lsp_server.outputs.page import OutputPage


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[OutputPage, Path, Path]]:
    folder = tmp_path / "project"
    folder.mkdir()
    files = OutputFiles(folder)
    image = files.save(b"\x89PNG\r\n\x1a\nfake", ".png")
    kernel_html = files.save(b"<script>document.title='ran'</script><table></table>", ".html")
    assert image is not None and kernel_html is not None
    outputs = [
        Output("<figure 640×480>\n", image=image, file=image, kind="figure"),
        Output("<html table 0×0>\n", file=kernel_html, kind="html"),
        Output("<b>not markup</b>\n"),
    ]
    page = OutputPage(lambda uri, line: (folder, outputs) if line == 3 else None, lambda: [folder])
    page.url_for("file:///x.py", 0)  # starts it
    try:
        yield page, image, kernel_html
    finally:
        page.close()


def get(page: OutputPage, path: str, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=10)
    connection.putrequest("GET", path, skip_host=True)
    connection.putheader("Host", host or f"127.0.0.1:{page.port}")
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), body


def test_the_view_shows_images_and_frames_kernel_html_without_scripts(
    served: tuple[OutputPage, Path, Path],
) -> None:
    page, image, kernel_html = served
    url = urlsplit(page.url_for("file:///ws/analysis.py", 3))
    assert url.hostname == "127.0.0.1"
    status, headers, body = get(page, f"{url.path}?{url.query}")
    text = body.decode()
    assert status == 200 and "analysis.py, line 4" in text
    assert f"/{page.token}/file?path={quote(str(image))}" in text
    assert f"<iframe sandbox src='/{page.token}/file?path={quote(str(kernel_html))}'>" in text
    assert "&lt;b&gt;not markup&lt;/b&gt;" in text  # text is text
    assert "script-src" not in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]

    status, headers, body = get(page, f"/{page.token}/file?path={quote(str(kernel_html))}")
    assert status == 200 and b"<script>" in body  # served as it came, but as a sandbox:
    assert headers["Content-Security-Policy"].startswith("sandbox;")
    assert "default-src 'none'" in headers["Content-Security-Policy"]  # no script runs


def test_no_token_another_host_or_another_file_is_refused(
    served: tuple[OutputPage, Path, Path], tmp_path: Path
) -> None:
    page, image, _ = served
    assert get(page, f"/{page.token}/file?path={quote(str(image))}")[0] == 200
    assert get(page, f"/file?path={quote(str(image))}")[0] == 404  # no token
    assert get(page, f"/{'x' * len(page.token)}/view?uri=a&line=0")[0] == 404  # a wrong one
    rebound = get(page, f"/{page.token}/file?path={quote(str(image))}", host="evil.example:80")
    assert rebound[0] == 403  # a page elsewhere that rebinds its name to 127.0.0.1
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"secret")
    assert get(page, f"/{page.token}/file?path={quote(str(secret))}")[0] == 404
    outside = tmp_path / "elsewhere" / FOLDER
    outside.mkdir(parents=True)
    stray = outside / image.name
    stray.write_bytes(b"not ours")  # a runfix-like name, in a folder the session does not know
    assert get(page, f"/{page.token}/file?path={quote(str(stray))}")[0] == 404
    dots = f"{image.parent}/../../{FOLDER}/{image.name}"
    assert get(page, f"/{page.token}/file?path={quote(dots)}")[0] == 200  # resolves to the same
    link = image.parent / ("f" * 16 + ".png")
    link.symlink_to(secret)
    assert get(page, f"/{page.token}/file?path={quote(str(link))}")[0] == 404  # leads outside


def test_idle_connections_cannot_use_up_the_page(
    served: tuple[OutputPage, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections that say nothing: at most CONNECTIONS are served at once (the rest are
    closed at once), each closed after its idle time; then the page answers."""
    import socket
    import threading
    import time

    from lsp_server.outputs import page as page_module

    page, image, _ = served
    monkeypatch.setattr(page_module._Handler, "timeout", 1.0)
    idle = []
    for _ in range(300):
        idle.append(socket.create_connection(("127.0.0.1", page.port), timeout=5))
    time.sleep(0.3)
    threads = sum(
        1
        for t in threading.enumerate()
        if "process_request" in t.name or t.name.startswith("Thread-")
    )
    assert threads <= page_module.CONNECTIONS + 5
    time.sleep(1.5)  # their idle time is over
    status, _, body = get(page, f"/{page.token}/file?path={quote(str(image))}")
    assert status == 200 and body.startswith(b"\x89PNG")
    for s in idle:
        s.close()


def test_a_request_is_answered_while_300_idle_connections_are_open(
    served: tuple[OutputPage, Path, Path],
) -> None:
    """Issue 36, S3 14: silent connections hold every slot for their whole idle time; a
    real request closes the oldest of them and is answered at once."""
    import socket
    import time

    page, image, _ = served
    idle = [socket.create_connection(("127.0.0.1", page.port), timeout=5) for _ in range(300)]
    time.sleep(0.3)
    began = time.monotonic()
    status, _, body = get(page, f"/{page.token}/file?path={quote(str(image))}")
    assert status == 200 and body.startswith(b"\x89PNG")
    assert time.monotonic() - began < 5  # not after the idle connections' 10 s
    for s in idle:
        s.close()
