"""Replay real provider answers over loopback HTTP, so the real client and the real commands read them.

A recorded answer is a JSON file ``{"source", "status", "headers", "body", "derived"?}`` (``body`` is
JSON, or a string sent as it is). They come from two folders: ``tests/conformance/recorded/`` (found
in public repositories, each naming its source) and the shared set other projects recorded
(``../shared/conformance/`` beside the checkout, or ``$INTAKE_EVAL_CONFORMANCE_DIR``).
``recorded(name)`` returns one parsed file; ``recorded_names()`` lists them all.

``ReplayServer`` answers the routes our clients call, each from a recording (or a list played in
order, the last one repeated, or a function of the request):

    chat             POST …/chat/completions          (every OpenAI-compatible provider)
    files            POST …/files                     (batch input upload)
    batches          POST …/batches                   (batch creation)
    batch            GET  …/batches/{id}
    file_content     GET  …/files/{id}/content
    messages         POST …/v1/messages               (Anthropic)
    message_batches  POST …/v1/messages/batches
    message_batch    GET  …/v1/messages/batches/{id}
    message_results  GET  …/v1/messages/batches/{id}/results

A route given no answer gets what a FastAPI server (vLLM) says for a path it does not serve:
404 ``{"detail": "Not Found"}``. ``server.env(provider)`` is the ``INTAKE_EVAL_BASE_URL_<PROVIDER>``
override that points a provider here (for monkeypatch.setenv or a subprocess's environment).
Every request is kept in ``server.requests`` (method, path, headers, parsed body).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Union

HERE = Path(__file__).resolve().parent
OWN_RECORDINGS = HERE / "recorded"
SHARED_RECORDINGS = HERE.parents[2] / "shared" / "conformance"
# The shared set as it stood when these tests were written, kept byte for byte so the suite never depends on a
# folder beside the checkout; the live ../shared/conformance (or $INTAKE_EVAL_CONFORMANCE_DIR) adds later recordings.
SHARED_COPY = HERE / "shared_copy"
FOLDER_VARIABLE = "INTAKE_EVAL_CONFORMANCE_DIR"
NOT_SERVED = {"status": 404, "headers": {}, "body": {"detail": "Not Found"}}  # FastAPI's answer for an unknown path

Answer = Mapping[str, Any]  # a recording: {"status", "headers", "body"}


@dataclass(frozen=True)
class ReplayRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, the raw bytes when not JSON (a multipart upload), None when empty
    route: str


Route = Union[Answer, list[Answer], Callable[[ReplayRequest], Answer]]


def recording_folders() -> list[Path]:
    shared = Path(os.environ[FOLDER_VARIABLE]) if os.environ.get(FOLDER_VARIABLE) else SHARED_RECORDINGS
    return [folder for folder in (OWN_RECORDINGS, shared, SHARED_COPY) if folder.is_dir()]


@lru_cache(maxsize=None)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def recorded(name: str) -> dict[str, Any]:
    """One recording, parsed (a fresh copy each time: a test may build a variation from it)."""
    stem = name.removesuffix(".json")
    for folder in recording_folders():
        path = folder / f"{stem}.json"
        if path.is_file():
            return json.loads(_read(path))
    raise FileNotFoundError(f"no recording named {stem!r} in {', '.join(map(str, recording_folders())) or 'any folder'}")


def recorded_names() -> list[str]:
    """Every recording's name, all folders (a name in an earlier folder hides a later one's)."""
    return sorted({path.stem for folder in recording_folders() for path in folder.glob("*.json")})


# (route, method, pattern of the path without its query); the first match wins
_ROUTES: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (name, method, re.compile(pattern)) for name, method, pattern in (
        ("message_results", "GET", r".*/v1/messages/batches/[^/]+/results$"),
        ("message_batch", "GET", r".*/v1/messages/batches/[^/]+$"),
        ("message_batches", "POST", r".*/v1/messages/batches$"),
        ("messages", "POST", r".*/v1/messages$"),
        ("chat", "POST", r".*/chat/completions$"),
        ("file_content", "GET", r".*/files/[^/]+/content$"),
        ("files", "POST", r".*/files$"),
        ("batch", "GET", r".*/batches/[^/]+$"),
        ("batches", "POST", r".*/batches$"),
    ))


def route_of(method: str, path: str) -> str | None:
    bare = path.split("?", 1)[0].rstrip("/")
    return next((name for name, verb, pattern in _ROUTES if verb == method and pattern.fullmatch(bare)), None)


def encode_body(body: Any) -> tuple[bytes, str]:
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    return json.dumps(body).encode("utf-8"), "application/json"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        route = route_of(method, self.path) or "unrouted"
        request = ReplayRequest(method, self.path, dict(self.headers), body, route)
        answer = self.server.owner.answer_for(request)
        payload, content_type = encode_body(answer.get("body"))
        headers = {str(k).lower(): str(v) for k, v in (answer.get("headers") or {}).items()}
        headers.setdefault("content-type", content_type)
        headers.pop("content-length", None)
        headers.pop("transfer-encoding", None)
        self.send_response(int(answer.get("status", 200)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        try:
            self.wfile.write(payload)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ReplayServer"


@dataclass
class ReplayServer:
    """``with ReplayServer({"chat": recorded("openai_gpt4o_plain")}) as server: … server.url``."""

    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[ReplayRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._played: dict[str, int] = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer_for(self, request: ReplayRequest) -> Answer:
        with self._lock:
            self.requests.append(request)
            route = self.routes.get(request.route)
            if route is None:
                return NOT_SERVED
            if callable(route):
                return route(request)
            if isinstance(route, list):
                index = self._played.get(request.route, 0)
                self._played[request.route] = index + 1
                return route[min(index, len(route) - 1)]
            return route

    def calls(self, route: str) -> list[ReplayRequest]:
        with self._lock:
            return [request for request in self.requests if request.route == route]

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def env(self, provider: str) -> dict[str, str]:
        """The variable pointing ``provider`` (litellm's prefix) here; Anthropic's base has no /v1."""
        return {f"INTAKE_EVAL_BASE_URL_{provider.upper()}": self.root if provider == "anthropic" else self.url}

    def __enter__(self) -> "ReplayServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
