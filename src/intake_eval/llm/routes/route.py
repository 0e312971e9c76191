"""The contract of a provider route: one wire format, matched to an alias, sending one request.

A route entry *matches* a ModelSpec by building a route for it (``build`` returns None when the
alias is not its to serve). A built route *sends* one attempt of a request — the OpenAI-style
parameters ProviderBackend.request_params makes, plus the structured-output level — and returns the
answer in OpenAI's chat-completion shape, so that one normalisation (litellm_backend.normalise)
builds every ChatResult, prices it and checks its usage whichever route made the call. A failed
attempt raises the route's own error carrying the *error envelope*: the HTTP routes raise
openai_http.ProviderHTTPError (status, headers and the parsed body that llm/error_body reads), the
litellm route litellm's exceptions (the same facts under litellm's names); retry.py classifies both.

Adding a wire format is one module with a ``RouteEntry`` and one line in table.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from intake_eval.llm.base import ModelSpec


class Route(Protocol):
    """One alias's way to its provider."""

    @property
    def reports_sending(self) -> bool:
        """Whether the route tells ``REQUEST_SENT`` when a request's body is on the wire."""
        ...

    async def send(self, params: dict[str, Any], level: str | None) -> Any:
        """One attempt; the answer in OpenAI's chat shape, or the route's error with its envelope."""
        ...

    async def aclose(self) -> None:
        """Release connections (safe to call twice)."""
        ...


@dataclass(frozen=True)
class RouteEntry:
    """A registered wire format: its name (shown in docs and errors) and how it matches an alias."""

    name: str
    build: Callable[[ModelSpec], Route | None]
