"""Wall time of calls to ``local/`` models: the embedded llama.cpp server computes on this machine's
CPU, so its calls do not overlap the way a provider's do, and every call pays for its prompt.

The rates are what ``scripts/bench_local.py`` measured for the bundled SmolLM2 135M on two CPU cores
(81.8 prompt and 33.4 generated tokens per second of server compute, rounded down); a larger model
or a busier machine is slower, so the figure is a floor only for models this size. Prompt tokens
the estimate's prefix-cache replay serves are not computed again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

LOCAL_PREFILL_TOKENS_PER_S = 80.0
LOCAL_DECODE_TOKENS_PER_S = 30.0


class CallTally(Protocol):
    model: str
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int


def is_local(line: CallTally) -> bool:
    return line.model.startswith("local/")


def local_compute_seconds(line: CallTally) -> float:
    """Seconds of server compute for all of a line's calls."""
    computed_prompt = max(0, line.prompt_tokens - line.cached_prompt_tokens)
    return computed_prompt / LOCAL_PREFILL_TOKENS_PER_S + line.completion_tokens / LOCAL_DECODE_TOKENS_PER_S


def local_call_seconds(line: CallTally) -> float:
    return local_compute_seconds(line) / line.calls if line.calls else 0.0


def local_server_bound(lines: Iterable[CallTally]) -> float:
    """Seconds the busiest local server needs for these calls: one server per weights file (aliases of
    the same model share it), its calls adding up however many run at once."""
    per_model: dict[str, float] = {}
    for line in lines:
        if is_local(line):
            per_model[line.model] = per_model.get(line.model, 0.0) + local_compute_seconds(line)
    return max(per_model.values(), default=0.0)
