"""What one model costs per million tokens, and who says so: the alias's own prices, litellm's
local price table, free (an offline participant or a server on this machine), or unknown.

The figures come from the same ``call_cost`` every call is billed with, so what `models` shows is
what a run would charge."""

from __future__ import annotations

from dataclasses import dataclass

from intake_eval.llm.base import ModelSpec, is_local_base
from intake_eval.llm.litellm_backend import cache_prices, call_cost

PER_MILLION = 1_000_000
ALIAS_SOURCE = "alias override"
TABLE_SOURCE = "litellm's table"
FREE_SOURCE = "free: offline or on this machine"
UNKNOWN_SOURCE = "unknown"


@dataclass(frozen=True)
class Prices:
    """Dollars per 1M tokens; ``cached_input`` is None where no cached price is published (cached
    tokens then cost the input price)."""

    input: float | None
    cached_input: float | None
    output: float | None
    source: str

    def to_dict(self) -> dict:
        """The fields of `models --json`."""
        return {"input_per_1m": self.input, "cached_input_per_1m": self.cached_input, "output_per_1m": self.output,
                "price_source": self.source}


def _per_million(value: float | None) -> float | None:
    return None if value is None else round(value * PER_MILLION, 6)


def model_prices(spec: ModelSpec) -> Prices:
    """The alias's prices per 1M tokens; the source is the alias when it sets any price of its own."""
    if spec.is_offline or spec.is_local or (spec.api_base and is_local_base(spec.api_base)):
        return Prices(0.0, None, 0.0, FREE_SOURCE)
    overridden = spec.input_cost_per_token is not None or spec.output_cost_per_token is not None
    per_input, known_in = call_cost(spec, PER_MILLION, 0)
    per_output, known_out = call_cost(spec, 0, PER_MILLION)
    if not (known_in and known_out):
        return Prices(None, None, None, UNKNOWN_SOURCE)
    read, _ = cache_prices(spec)
    return Prices(round(per_input, 6), _per_million(read), round(per_output, 6),
                  ALIAS_SOURCE if overridden or spec.cache_read_cost_per_token is not None else TABLE_SOURCE)
