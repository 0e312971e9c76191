"""Dollars a call costs by litellm's price table, computed here from the table's own rates
(not through intake_eval's pricing), so a conformance test compares our figure with an independent one:
uncached input × input rate + cache reads × cache-read rate + cache writes × cache-write rate +
output × output rate (a cache rate the table lacks is the input rate)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def table_dollars(model: str, prompt: int, completion: int, cached: int = 0, written: int = 0) -> float:
    import litellm

    info = litellm.get_model_info(model)
    rate_in, rate_out = info["input_cost_per_token"], info["output_cost_per_token"]
    rate_read = info.get("cache_read_input_token_cost")
    rate_write = info.get("cache_creation_input_token_cost")
    rate_read = rate_in if rate_read is None else rate_read
    rate_write = rate_in if rate_write is None else rate_write
    return ((prompt - cached - written) * rate_in + cached * rate_read + written * rate_write
            + completion * rate_out)
