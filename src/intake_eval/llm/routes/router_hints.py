"""What a request tells the servers in front of a model about its conversation (llm/affinity.py):
the headers cache-aware routers read, for a server of your own (an ``api_base``) only — a cloud
provider's gateway has no use for them."""

from __future__ import annotations

from intake_eval.llm.affinity import ROUTER_HEADERS
from intake_eval.llm.base import ModelSpec


def router_headers(spec: ModelSpec, key: str | None) -> dict[str, str]:
    if key is None or not spec.api_base:
        return {}
    return {name: key for name in ROUTER_HEADERS}
