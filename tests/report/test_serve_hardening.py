"""`view` serves regular files inside report/ only, to loopback Host names only."""

from __future__ import annotations

import http.client
import threading
from pathlib import Path

import pytest

from intake_eval.report.serve import report_server


@pytest.fixture
def served(tmp_path: Path):
    report = tmp_path / "run" / "report"
    (report / "conversations").mkdir(parents=True)
    (report / "index.html").write_text("<!DOCTYPE html><p>report</p>")
    (report / "conversations" / "c0.js").write_text("window.shard = 1;")
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (report / "passwd").symlink_to(secret)
    (report / "up").symlink_to(tmp_path)
    (report / "conversations" / "inner.js").symlink_to(report / "index.html")
    server = report_server(report, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.putrequest("GET", path, skip_host=True)
    connection.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def test_the_report_and_its_shards_are_served(served):
    assert get(served, "/index.html") == (200, b"<!DOCTYPE html><p>report</p>")
    assert get(served, "/") == (200, b"<!DOCTYPE html><p>report</p>")
    assert get(served, "/conversations/c0.js") == (200, b"window.shard = 1;")
    for host in ("localhost", f"localhost:{served}", "[::1]", f"[::1]:{served}", "127.0.0.1"):
        assert get(served, "/index.html", host)[0] == 200, host


@pytest.mark.parametrize("path", ["/passwd", "/up/secret.txt", "/conversations/inner.js", "/../secret.txt",
                                  "/%2e%2e/secret.txt", "/conversations/", "/up/"])
def test_symlinks_escapes_and_listings_are_not_served(served, path):
    status, body = get(served, path)
    assert status == 404 and b"root:x" not in body and b"report" not in body.split(b"<title>")[0]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "", "10.0.0.1"])
def test_a_host_header_that_is_not_loopback_is_refused(served, host):
    status, body = get(served, "/index.html", host)
    assert status == 403 and b"report</p>" not in body
