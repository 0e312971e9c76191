"""The OpenAI-compatible route: a plain aiohttp POST to ``{base}/chat/completions``.

For every provider providers.py lists and any ``openai/…`` or ``hosted_vllm/…`` alias with an
``api_base`` (vLLM, SGLang, llama.cpp, a gateway). With several ``api_base`` replicas each
conversation's requests go to one of them (llm/affinity.py). The conversation's routing key goes as
OpenAI's ``prompt_cache_key`` where the provider declares that field (OpenAI's own API) and as the
routers' headers to a server of your own.
"""

from __future__ import annotations

from typing import Any

from intake_eval.llm.affinity import CONVERSATION_KEY
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.providers import DirectRoute, direct_route
from intake_eval.llm.routes.replica_pools import ReplicaPools
from intake_eval.llm.routes.route import RouteEntry
from intake_eval.llm.routes.router_hints import router_headers


class OpenAICompatibleRoute:
    """One alias over OpenAI's wire format; one connection pool per replica."""

    reports_sending = True

    def __init__(self, spec: ModelSpec, direct: DirectRoute):
        self.spec = spec
        self.direct = direct
        self.pools = ReplicaPools(direct.base_urls, spec.timeout_s)

    def body(self, params: dict[str, Any], key: str | None) -> dict[str, Any]:
        body = self.direct.body(params)
        field = self.direct.provider.cache_key_field
        if key is not None and field is not None and not self.spec.api_base:
            body.setdefault(field, key)
        return body

    async def send(self, params: dict[str, Any], level: str | None) -> Any:
        key = CONVERSATION_KEY.get()
        _base, client = self.pools.pick(key)
        answer = await client.chat(self.body(params, key), self.direct.api_key(self.spec),
                                   router_headers(self.spec, key))
        return self.direct.fix_usage(answer)

    async def aclose(self) -> None:
        await self.pools.aclose()


def build(spec: ModelSpec) -> OpenAICompatibleRoute | None:
    direct = direct_route(spec)
    return None if direct is None else OpenAICompatibleRoute(spec, direct)


ENTRY = RouteEntry("openai-compatible", build)
