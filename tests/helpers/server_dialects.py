"""Loopback servers that treat ``response_format`` the way real OpenAI-compatible servers do.

Each dialect is a responder for ``tests.helpers.fakeserver.FakeOpenAIServer``: it checks the request's
``response_format`` as that server would and either rejects it with the server's own error body
or answers with ``answer(body)``. The bodies are the real ones:

- llama-cpp-python: its pydantic request model allows only ``text`` and ``json_object`` (with an
  optional ``schema``); its route handler turns the validation error into HTTP 500
  ``{"error": {"message": str(error), "type": "internal_server_error", …}}``.
- llama.cpp's own ``llama-server``: accepts ``json_schema`` (and ``json_object`` with a schema).
- a json_object-only server (vLLM before json_schema support, many gateways): HTTP 400 in
  vLLM's error shape for ``json_schema``, and for a ``schema`` key beside ``json_object``.
- a server that accepts no ``response_format`` at all: HTTP 400 in OpenAI's error shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.helpers.fakeserver import Reply, Responder

Answer = Callable[[dict[str, Any]], str]

LLAMA_CPP_PYTHON_MESSAGE = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}]"
)
VLLM_JSON_SCHEMA_MESSAGE = LLAMA_CPP_PYTHON_MESSAGE  # same pydantic literal on vLLM's older request model
VLLM_EXTRA_KEY_MESSAGE = (
    "[{'type': 'extra_forbidden', 'loc': ('body', 'response_format', 'schema'), "
    "'msg': 'Extra inputs are not permitted', 'input': {'type': 'object'}}]"
)
OPENAI_UNSUPPORTED_MESSAGE = "Unsupported parameter: 'response_format' is not supported with this model."


def _raw(status: int, payload: dict[str, Any]) -> Reply:
    return Reply(status=status, raw_body=json.dumps(payload).encode())


def llama_cpp_python(answer: Answer) -> Responder:
    def respond(body: dict[str, Any], _index: int) -> Reply:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") not in ("text", "json_object"):
            return _raw(500, {"error": {"message": LLAMA_CPP_PYTHON_MESSAGE, "type": "internal_server_error",
                                        "param": None, "code": None}})
        return Reply(content=answer(body))

    return respond


def llama_server(answer: Answer) -> Responder:
    def respond(body: dict[str, Any], _index: int) -> Reply:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") not in ("text", "json_object", "json_schema"):
            message = f'response_format type must be one of "text" or "json_object", but got: {fmt.get("type")}'
            return _raw(400, {"error": {"code": 400, "message": message, "type": "invalid_request_error"}})
        return Reply(content=answer(body))

    return respond


def json_object_only(answer: Answer) -> Responder:
    def respond(body: dict[str, Any], _index: int) -> Reply:
        fmt = body.get("response_format")
        if isinstance(fmt, dict):
            message = None
            if fmt.get("type") not in ("text", "json_object"):
                message = VLLM_JSON_SCHEMA_MESSAGE
            elif set(fmt) - {"type"}:
                message = VLLM_EXTRA_KEY_MESSAGE
            if message is not None:
                return _raw(400, {"object": "error", "message": message, "type": "BadRequestError",
                                  "param": None, "code": 400})
        return Reply(content=answer(body))

    return respond


def no_response_format(answer: Answer) -> Responder:
    def respond(body: dict[str, Any], _index: int) -> Reply:
        if "response_format" in body:
            return _raw(400, {"error": {"message": OPENAI_UNSUPPORTED_MESSAGE, "type": "invalid_request_error",
                                        "param": "response_format", "code": "unsupported_parameter"}})
        return Reply(content=answer(body))

    return respond


DIALECTS: dict[str, Callable[[Answer], Responder]] = {
    "llama-cpp-python": llama_cpp_python,
    "llama-server": llama_server,
    "json-object-only": json_object_only,
    "no-response-format": no_response_format,
}
# What each dialect is sent, in order, before the first answer: the levels it rejects, then the one it takes.
EXPECTED_LEVELS = {
    "llama-server": ["json_schema"],
    "llama-cpp-python": ["json_schema", "json_object_schema"],
    "json-object-only": ["json_schema", "json_object_schema", "json_object"],
    "no-response-format": ["json_schema", "json_object_schema", "json_object", "prompt"],
}


def level_sent(body: dict[str, Any]) -> str:
    """Which negotiation level a request body used."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return "prompt"
    if fmt.get("type") == "json_schema":
        return "json_schema"
    return "json_object_schema" if "schema" in fmt else "json_object"


def schema_sent(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    return fmt.get("schema")


def instance_of(schema: dict[str, Any], text: str = "the patient says so") -> Any:
    """A value that satisfies ``schema`` (the subset our schemas use), as a grammar-constrained
    model would produce: every required property, first enum value, booleans false."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {key: instance_of(properties[key], text) for key in schema.get("required", list(properties))}
    if kind == "array":
        return [instance_of(schema.get("items", {}), text) for _ in range(schema.get("minItems", 1))]
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return 0
    return text
