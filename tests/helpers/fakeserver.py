"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

The real litellm/openai clients talk to it over real HTTP. Replies are scripted by a responder
function (request body, call index) -> Reply, so a test can return text, reasoning, 429 with
Retry-After, 500s, a hang, a truncated JSON body or an empty length-stopped answer. Every request
body is recorded in ``server.requests`` (its path in ``server.paths``) so tests can assert the
prompts that were sent. A POST to ``…/messages`` is answered in Anthropic's Messages shape and one to
``…:generateContent`` in Gemini's, so litellm's own providers can be pointed here with ``api_base``.
Scripted errors come in the real provider's shape for the path (``error_body``): Anthropic's error
envelope, Google's error object, Gemini's OpenAI-compatible root array, OpenAI's error object.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = "OK"
    reasoning_content: str | None = None  # sent as message.reasoning_content
    reasoning: str | None = None  # sent as message.reasoning (OpenRouter/vLLM style)
    finish_reason: str = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering (a hang = longer than the client timeout)
    raw_body: bytes | None = None  # sent verbatim (e.g. truncated JSON)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int = 0
    error_message: str = "scripted error"
    usage: dict[str, Any] | None = None  # merged over the usage sent (a provider's own usage shape)
    extra: dict[str, Any] = field(default_factory=dict)  # more top-level fields (e.g. llama.cpp's timings)


Responder = Callable[[dict[str, Any], int], Reply]


def scripted(replies: Iterable[Reply | str], then: Reply | str | None = None) -> Responder:
    """Answer with the given replies in order, then ``then`` (or the last one) forever."""
    queue = [r if isinstance(r, Reply) else Reply(content=r) for r in replies]
    tail = then if isinstance(then, Reply) else Reply(content=then) if then is not None else (queue[-1] if queue else Reply())
    lock = threading.Lock()

    def respond(_body: dict[str, Any], _index: int) -> Reply:
        with lock:
            return queue.pop(0) if queue else tail

    return respond


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content blocks / parts
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _anthropic_payload(body: dict[str, Any], reply: Reply, index: int) -> dict[str, Any]:
    prompt_text = _text_of(body.get("system")) + " " + " ".join(_text_of(m.get("content")) for m in body.get("messages", []))
    usage: dict[str, Any] = {
        "input_tokens": reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(prompt_text),
        "output_tokens": reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content or " "),
    }
    usage.update(reply.usage or {})
    stop = {"stop": "end_turn", "length": "max_tokens"}.get(reply.finish_reason, reply.finish_reason)
    return {"id": f"msg_fake_{index}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": [{"type": "text", "text": reply.content}], "stop_reason": stop, "stop_sequence": None,
            "usage": usage, **reply.extra}


def _gemini_payload(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt_text = " ".join(_text_of(c.get("parts")) for c in body.get("contents", []))
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(prompt_text)
    completion = reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content or " ")
    usage: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": completion,
                             "totalTokenCount": prompt + completion}
    usage.update(reply.usage or {})
    finish = {"stop": "STOP", "length": "MAX_TOKENS"}.get(reply.finish_reason, reply.finish_reason)
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": reply.content}]}, "finishReason": finish,
                            "index": 0}], "usageMetadata": usage, "modelVersion": "fake", **reply.extra}


# Anthropic's error type for each status (https://docs.anthropic.com/en/api/errors)
ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         500: "api_error", 529: "overloaded_error"}
# Google's status names, as its error bodies spell them
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def error_body(path: str, reply: Reply) -> Any:
    """A scripted error in the shape the real provider sends on that path (the shapes recorded in
    tests/conformance): Anthropic's envelope on /messages, Google's error object on :generateContent
    and inside a root JSON array on Gemini's OpenAI-compatible endpoint, OpenAI's object elsewhere."""
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error"),
                                           "message": reply.error_message}, "request_id": "req_fake"}
    google = {"error": {"code": reply.status, "message": reply.error_message,
                        "status": GOOGLE_STATUS.get(reply.status, "UNKNOWN")}}
    if path.endswith(":generateContent"):
        return google
    if "/v1beta/openai/" in path:
        return [google]
    return {"error": {"message": reply.error_message, "type": "scripted", "param": None, "code": reply.status}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stall
    server: "_Server"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b"{}"
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        owner = self.server.owner
        index = owner._record(body, dict(self.headers), self.path)
        reply = owner.responder(body, index)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.raw_body is not None:
            self._send(reply.status, reply.raw_body, reply.headers)
            return
        path = self.path.split("?", 1)[0]
        if reply.status != 200:
            self._send(reply.status, json.dumps(error_body(path, reply)).encode(), reply.headers)
            return
        if path.endswith("/messages"):
            self._send(200, json.dumps(_anthropic_payload(body, reply, index)).encode(), reply.headers)
            return
        if path.endswith(":generateContent"):
            self._send(200, json.dumps(_gemini_payload(body, reply)).encode(), reply.headers)
            return
        prompt_text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        if reply.reasoning is not None:
            message["reasoning"] = reply.reasoning
        completion = reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content or " ")
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(prompt_text)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion + reply.reasoning_tokens,
            "total_tokens": prompt + completion + reply.reasoning_tokens,
        }
        if reply.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
        usage.update(reply.usage or {})
        payload = {
            "id": f"chatcmpl-fake-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": usage,
            **reply.extra,
        }
        self._send(200, json.dumps(payload).encode(), reply.headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True
    owner: "FakeOpenAIServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (timeout, cancelled task) closes its socket mid-reply; that is a
        # scenario under test, not a server fault. Anything else is kept for the test to see.
        import sys

        error = sys.exc_info()[1]
        if not isinstance(error, (ConnectionError, TimeoutError)):
            self.owner.errors.append(repr(error))


class FakeOpenAIServer:
    """Start with ``with FakeOpenAIServer(responder) as server: ... server.url``. ``port`` brings a
    server back where an earlier one listened (a resumed run must meet the same api_base)."""

    def __init__(self, responder: Responder | None = None, port: int = 0):
        self.responder: Responder = responder or (lambda body, index: Reply())
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.errors: list[str] = []  # unexpected handler exceptions
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str = "") -> int:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.paths.append(path)
            return next(self._counter)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def start(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
