"""Every other provider (Bedrock, Vertex, Azure, …) through litellm's ``acompletion``, with its own
retries off (retry.py owns them). Building this route imports litellm — the only route that must."""

from __future__ import annotations

from typing import Any

from intake_eval.llm.affinity import CONVERSATION_KEY, ReplicaChooser
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.keys import sdk_api_key
from intake_eval.llm.litellm_import import import_litellm
from intake_eval.llm.routes.route import RouteEntry
from intake_eval.llm.routes.router_hints import router_headers


class LitellmRoute:
    reports_sending = False  # litellm does not say when a body has left: the pool writes it as sent first

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.replicas = ReplicaChooser(spec.api_bases) if spec.api_bases else None
        import_litellm()  # here, not inside the event loop: the import takes seconds

    async def send(self, params: dict[str, Any], level: str | None) -> Any:
        spec = self.spec
        key = CONVERSATION_KEY.get()
        api_base = self.replicas.choose(key) if self.replicas is not None else None
        headers = router_headers(spec, key)
        sent = {**params, "extra_headers": {**params.get("extra_headers", {}), **headers}} if headers else params
        return await import_litellm().acompletion(
            model=spec.model, api_key=sdk_api_key(spec), api_base=api_base, timeout=spec.timeout_s,
            num_retries=0, max_retries=0, **sent)

    async def aclose(self) -> None:
        return None


def build(spec: ModelSpec) -> LitellmRoute:
    return LitellmRoute(spec)


ENTRY = RouteEntry("litellm", build)
