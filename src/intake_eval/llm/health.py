"""What a user sees of provider failures, and when to stop sending to an endpoint.

- The first failure of each kind on an endpoint is announced once, with the server's own words
  (and the key variable for 401/403), through the pool's notice callback: a console line while
  the stage runs, instead of a count at the end.
- A deterministic failure (HTTP 400/401/403/404/422 that is not about the response format, or a
  refused connection) repeated identically ``threshold`` times in a row opens the endpoint's
  breaker: further calls fail at once without a request, and stages stop starting work on it.
  A success in between resets the count, so one bad request among good ones stops nothing.
- A failure about the account rather than the request (out of credit, a per-day quota used up)
  opens the breaker at the first occurrence (``stop``); one about a request's content (a
  content-policy refusal) never counts towards it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from intake_eval.llm.base import ModelCallError

DETERMINISTIC_STATUS = frozenset({400, 401, 403, 404, 422})
BREAKER_THRESHOLD = 3

Notify = Callable[[str], None]


@dataclass
class EndpointHealth:
    label: str  # "<provider id> @ <api_base>" as the user wrote them
    threshold: int = BREAKER_THRESHOLD
    notify: Notify | None = None
    seen: dict[str, str] = field(default_factory=dict)  # kind -> the first message of that kind
    stopped: str | None = None  # why the breaker opened
    _streak: tuple[object, ...] | None = None
    _streak_count: int = 0

    def announce(self, kind: str, message: str) -> None:
        """Tell the user once per kind of problem on this endpoint."""
        if kind in self.seen:
            return
        self.seen[kind] = message
        if self.notify is not None:
            self.notify(message)

    def failed(self, kind: str, message: str, *, deterministic: bool, identity: tuple[object, ...]) -> None:
        self.announce(kind, message)
        if not deterministic:
            return
        if identity == self._streak:
            self._streak_count += 1
        else:
            self._streak, self._streak_count = identity, 1
        if self._streak_count >= self.threshold and self.stopped is None:
            self.stopped = (f"stopped sending to {self.label} after {self._streak_count} identical failures: "
                            f"{message}")
            if self.notify is not None:
                self.notify(self.stopped)

    def stop(self, message: str) -> None:
        """Open the breaker at once: the failure is about the account or endpoint, not this request
        (out of credit, a per-day quota used up), so no further request can succeed."""
        if self.stopped is None:
            self.stopped = f"stopped sending to {self.label}: {message}"
            if self.notify is not None:
                self.notify(self.stopped)

    def succeeded(self) -> None:
        self._streak, self._streak_count = None, 0

    def check(self) -> None:
        """Refuse a new request once the breaker is open."""
        if self.stopped is not None:
            raise ModelCallError(f"not sent: {self.stopped}", kind="fatal", attempts=0)
