"""`intake-eval view`: serve a run's report/ folder on 127.0.0.1 (the transcript viewer loads its
conversation shards with <script> tags, which some browsers refuse from file:// URLs).

Only regular files inside report/ are served: a symlink (to /etc/passwd, or anywhere else) is a
404, and so is a folder (no listings). A request whose Host header is not a loopback name is
refused, so a web page in the user's browser cannot reach the report through DNS rebinding."""

from __future__ import annotations

import errno
import functools
import os
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from intake_eval.core.errors import IntakeEvalError

HOST = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def host_name(header: str | None) -> str:
    """The Host header without its port ('localhost:8765' → 'localhost', '[::1]:80' → '[::1]')."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        return value[: value.find("]") + 1] if "]" in value else value
    return value.split(":", 1)[0]


class _ReportHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass  # one line per request would bury the URL

    def send_head(self):  # noqa: ANN201 - the base class's contract (a file object or None)
        if host_name(self.headers.get("Host")) not in LOOPBACK_NAMES:
            self.send_error(HTTPStatus.FORBIDDEN, "the report is served to loopback names only")
            return None
        target = Path(self.translate_path(self.path))
        if target.is_dir() and not target.is_symlink():
            target = target / "index.html"
        if not _regular_file_inside(target, Path(self.directory)):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path):  # noqa: ANN001, ANN201 - the base class's signature
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None


def _regular_file_inside(path: Path, root: Path) -> bool:
    """A regular file under ``root`` reached without passing through any symlink."""
    absolute = Path(os.path.abspath(path))
    if not absolute.is_relative_to(root) or Path(os.path.realpath(absolute)) != absolute:
        return False
    return absolute.is_file()


def report_server(report_dir: Path, port: int) -> ThreadingHTTPServer:
    """A server for ``report_dir`` on 127.0.0.1:port; a taken port falls back to a free one."""
    handler = functools.partial(_ReportHandler, directory=os.path.realpath(report_dir))
    try:
        return ThreadingHTTPServer((HOST, port), handler)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE or port == 0:
            raise IntakeEvalError(f"--port {port}: cannot listen on {HOST} ({exc.strerror})") from None
        return ThreadingHTTPServer((HOST, 0), handler)


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://{HOST}:{server.server_address[1]}/index.html"
