"""The registered routes, in the order they are tried: the first that matches an alias serves it.

The direct HTTP routes come first (a fraction of litellm's CPU per call, and no litellm import on
their path); litellm serves whatever none of them matches, and every alias when the pool is asked
for ``client="litellm"``.
"""

from __future__ import annotations

from collections.abc import Callable

from intake_eval.llm.base import ModelSpec
from intake_eval.llm.routes import anthropic_native, litellm_sdk, openai_compatible
from intake_eval.llm.routes.route import Route, RouteEntry

ROUTES: tuple[RouteEntry, ...] = (openai_compatible.ENTRY, anthropic_native.ENTRY)
FALLBACK: Callable[[ModelSpec], Route] = litellm_sdk.build
CLIENTS = ("auto", "litellm")


def route_for(spec: ModelSpec, client: str = "auto") -> Route:
    """The route serving this alias: the first registered one that matches, else the fallback
    (always the fallback with ``client="litellm"``)."""
    if client not in CLIENTS:
        raise ValueError(f"client must be 'auto' or 'litellm', not {client!r}")
    if client == "auto":
        for entry in ROUTES:
            route = entry.build(spec)
            if route is not None:
                return route
    return FALLBACK(spec)
