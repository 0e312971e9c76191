"""A provider's token counts, checked before anything is priced from them.

A count must be a non-negative integer no larger than a plausible bound: twice the model's context
window where litellm's table knows it, else ``UNKNOWN_CONTEXT_BOUND``. A count outside that is a
broken answer (``ImplausibleUsage``: the call fails with the reason and is not priced from it). A
usage that is missing, null or not an object is not an error but unknown: the call is estimated from
the request's own size and the answer's (``estimate_tokens``) and marked ``cost_known: false``, so a
budget holds an estimate instead of $0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from intake_eval.llm.base import ChatRequest

CHARS_PER_TOKEN = 4  # a text's size → tokens when no count is available
UNKNOWN_CONTEXT_BOUND = 10_000_000  # tokens; no model's context comes near it
CONTEXT_FACTOR = 2  # counts up to twice the context window pass (cached and reasoning tokens counted apart)


class ImplausibleUsage(ValueError):
    """A token count that is negative, fractional, not a number, or beyond the model's plausible bound."""


def count_bound(context_tokens: Any) -> int:
    if isinstance(context_tokens, int) and not isinstance(context_tokens, bool) and context_tokens > 0:
        return CONTEXT_FACTOR * context_tokens
    return UNKNOWN_CONTEXT_BOUND


def checked_count(name: str, value: Any, bound: int) -> int:
    """``value`` as a token count; None counts as 0. Raises ImplausibleUsage naming the field."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImplausibleUsage(f"usage.{name} is {value!r}, not a whole number of tokens")
    if value < 0:
        raise ImplausibleUsage(f"usage.{name} is negative ({value})")
    if value > bound:
        raise ImplausibleUsage(f"usage.{name} = {value:,} is beyond any plausible count for this model "
                               f"(bound {bound:,} tokens)")
    return value


def usage_is_missing(usage: Any) -> bool:
    """No usage object, or one without prompt and completion counts (missing, null, list-shaped)."""
    if usage is None or isinstance(usage, (list, tuple, str, int, float, bool)):
        return True
    get = usage.get if isinstance(usage, Mapping) else lambda name: getattr(usage, name, None)
    return get("prompt_tokens") is None and get("completion_tokens") is None


def text_chars(request: ChatRequest) -> int:
    """Characters of every message's content (content blocks counted by their text)."""
    total = 0
    for message in request.messages:
        content: Any = message.get("content", "")
        if isinstance(content, list):
            total += sum(len(str(block.get("text", ""))) for block in content if isinstance(block, dict))
        else:
            total += len(str(content or ""))
    return total


def estimate_tokens(request: ChatRequest, answer_text: str | None, max_tokens: int | None) -> tuple[int, int]:
    """(prompt, completion) tokens estimated from the request's size and the answer's (else max_tokens)."""
    prompt = max(1, text_chars(request) // CHARS_PER_TOKEN)
    completion = max(1, len(answer_text) // CHARS_PER_TOKEN) if answer_text is not None else (max_tokens or 0)
    return prompt, completion
