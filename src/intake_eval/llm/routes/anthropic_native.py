"""Claude's native Messages API over plain HTTP (the body and answer shapes: llm/anthropic_http.py).

Matched for ``anthropic/…`` aliases whose extra_params need no litellm mapping; the model facts come
from litellm's Anthropic tables, so building this route imports litellm (once, before the event loop).
"""

from __future__ import annotations

from typing import Any

from intake_eval.llm.affinity import CONVERSATION_KEY
from intake_eval.llm.anthropic_http import AnthropicRoute, anthropic_route, messages_body, openai_shape
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.routes.replica_pools import ReplicaPools
from intake_eval.llm.routes.route import RouteEntry
from intake_eval.llm.routes.router_hints import router_headers
from intake_eval.llm.structured import starting_level


class AnthropicNativeRoute:
    reports_sending = True

    def __init__(self, spec: ModelSpec, claude: AnthropicRoute):
        self.spec = spec
        self.claude = claude
        self.pools = ReplicaPools(claude.base_urls, spec.timeout_s)

    async def send(self, params: dict[str, Any], level: str | None) -> Any:
        key = CONVERSATION_KEY.get()
        base, client = self.pools.pick(key)
        body = messages_body(self.claude, params, level or starting_level(self.spec))
        headers = {**self.claude.headers(self.spec, body), **router_headers(self.spec, key)}
        payload = await client.post(self.claude.messages_url_at(base), body, headers)
        return openai_shape(payload, json_mode="response_format" in params)

    async def aclose(self) -> None:
        await self.pools.aclose()


def build(spec: ModelSpec) -> AnthropicNativeRoute | None:
    claude = anthropic_route(spec)
    return None if claude is None else AnthropicNativeRoute(spec, claude)


ENTRY = RouteEntry("anthropic-native", build)
