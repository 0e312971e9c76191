"""`intake-eval view`: serve a run's report/ folder on 127.0.0.1 (the transcript viewer loads its
conversation shards with <script> tags, which some browsers refuse from file:// URLs)."""

from __future__ import annotations

import errno
import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from intake_eval.core.errors import IntakeEvalError

HOST = "127.0.0.1"


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass  # one line per request would bury the URL


def report_server(report_dir: Path, port: int) -> ThreadingHTTPServer:
    """A server for ``report_dir`` on 127.0.0.1:port; a taken port falls back to a free one."""
    handler = functools.partial(_QuietHandler, directory=str(report_dir))
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE or port == 0:
            raise IntakeEvalError(f"--port {port}: cannot listen on {HOST} ({exc.strerror})") from None
        return ThreadingHTTPServer((HOST, 0), handler)


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{server.server_address[1]}/index.html"
