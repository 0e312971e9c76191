"""Claude's native Messages API over plain HTTP (the body and answer shapes: llm/anthropic_http.py).

Matched for ``anthropic/…`` aliases whose extra_params need no litellm mapping; the model facts come
from litellm's Anthropic tables, so building this route imports litellm (once, before the event loop).
"""

from __future__ import annotations

from typing import Any

from intake_eval.llm.affinity import CONVERSATION_KEY, ReplicaChooser
from intake_eval.llm.anthropic_http import AnthropicRoute, anthropic_route, messages_body, openai_shape
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.openai_http import OpenAICompatibleClient
from intake_eval.llm.routes.route import RouteEntry
from intake_eval.llm.routes.router_hints import router_headers
from intake_eval.llm.structured import starting_level


class AnthropicNativeRoute:
    reports_sending = True

    def __init__(self, spec: ModelSpec, claude: AnthropicRoute):
        self.spec = spec
        self.claude = claude
        self.replicas = ReplicaChooser(claude.base_urls)
        self._clients = {base: OpenAICompatibleClient(base, spec.timeout_s) for base in claude.base_urls}

    async def send(self, params: dict[str, Any], level: str | None) -> Any:
        key = CONVERSATION_KEY.get()
        base = self.replicas.choose(key)
        body = messages_body(self.claude, params, level or starting_level(self.spec))
        headers = {**self.claude.headers(self.spec, body), **router_headers(self.spec, key)}
        payload = await self._clients[base].post(self.claude.messages_url_at(base), body, headers)
        return openai_shape(payload, json_mode="response_format" in params)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()


def build(spec: ModelSpec) -> AnthropicNativeRoute | None:
    claude = anthropic_route(spec)
    return None if claude is None else AnthropicNativeRoute(spec, claude)


ENTRY = RouteEntry("anthropic-native", build)
