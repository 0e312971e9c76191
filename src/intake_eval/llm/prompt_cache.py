"""Provider prompt caching: which providers reuse a repeated prompt prefix, and how they are asked to.

Every role's prompt is static-first (instructions, profile, domain lists) with the growing
conversation appended last, so each call's prompt begins with the previous call's. Providers
reuse such a prefix at a discount: OpenAI, Gemini, DeepSeek and the other OpenAI-style hosts do it
on their own once the prefix is long enough, llama.cpp and vLLM keep it in their KV cache; Anthropic
caches only up to explicit ``cache_control`` breakpoints. A request names where its shared prefixes
end (``ChatRequest.cache_points``); ``with_breakpoints`` turns them into breakpoints for the
providers that need them, within their limits (at most four, none below the minimum length).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from intake_eval.llm.base import Message, ModelSpec

MAX_BREAKPOINTS = 4  # Anthropic refuses a request with more cache_control blocks
# A breakpoint whose prefix is shorter than the minimum is ignored by the provider; prose runs about
# four characters a token, so three characters a token errs on the side of keeping a breakpoint.
CHARS_PER_TOKEN_LOW = 3.0


@dataclass(frozen=True)
class CacheBehaviour:
    """How a provider caches a repeated prompt prefix."""

    explicit: bool  # only up to cache_control breakpoints (else: automatically)
    min_tokens: int  # shorter prefixes are never cached
    step: int = 1  # cached lengths are whole multiples of this many tokens


# Anthropic's minimum cacheable prefix per model family (its prompt-caching documentation); Sonnet 4.6
# is documented at 1,024 but was observed to cache only from 2,048, so the larger figure is used.
_ANTHROPIC_MINIMUM = (("opus-4-6", 4096), ("opus-4-5", 4096), ("haiku-4-5", 4096), ("sonnet-4-6", 2048),
                      ("haiku-3", 2048), ("3-haiku", 2048), ("3-5-haiku", 2048))


def _is_anthropic(spec: ModelSpec) -> bool:
    return spec.provider == "anthropic" or (spec.provider in ("vertex_ai", "bedrock") and "claude" in spec.model)


def cache_behaviour(spec: ModelSpec) -> CacheBehaviour:
    model = spec.model.lower()
    if _is_anthropic(spec):
        minimum = next((tokens for family, tokens in _ANTHROPIC_MINIMUM if family in model), 1024)
        return CacheBehaviour(explicit=True, min_tokens=minimum)
    if spec.provider in ("openai", "azure") and not spec.api_base:
        return CacheBehaviour(explicit=False, min_tokens=1024, step=128)  # OpenAI: 1,024, then 128-token steps
    if spec.provider in ("gemini", "vertex_ai"):
        return CacheBehaviour(explicit=False, min_tokens=4096 if "pro" in model else 1024)
    if spec.provider == "deepseek":
        return CacheBehaviour(explicit=False, min_tokens=64, step=64)
    if spec.api_base or spec.provider == "local":  # llama.cpp, vLLM, Ollama: any repeated prefix stays in the KV cache
        return CacheBehaviour(explicit=False, min_tokens=1)
    return CacheBehaviour(explicit=False, min_tokens=1024)  # hosts that bill cached input automatically


def message_end(messages: list[Message], index: int) -> tuple[int, int]:
    """The cache point at the end of one message."""
    return index, len(str(messages[index].get("content", "")))


def history_cache_points(messages: list[Message], static_end: int, previous_end: int | None = None) -> tuple[tuple[int, int], ...]:
    """Cache points of a growing chat: the static block, the previous call's whole prompt (this call
    extends it by one exchange: read from the cache) and this call's whole prompt (the next one
    extends it: written for it)."""
    last = len(messages) - 1
    previous = last - 2 if previous_end is None else previous_end
    ends = sorted({i for i in (static_end, previous, last) if 0 <= i <= last})
    return tuple(message_end(messages, i) for i in ends)


def with_breakpoints(spec: ModelSpec, messages: list[Message],
                     points: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    """The messages as sent: for a provider that caches only at explicit breakpoints, the content
    is cut at each cache point and the piece that ends there carries ``cache_control``. The text
    is unchanged; other providers get the messages as they are."""
    behaviour = cache_behaviour(spec)
    if not behaviour.explicit or not points:
        return messages
    lengths = [len(str(m.get("content", ""))) for m in messages]
    before = [sum(lengths[:i]) for i in range(len(messages))]
    valid = sorted({(i, min(max(offset, 0), lengths[i])) for i, offset in points if 0 <= i < len(messages)})
    chosen = [(i, offset) for i, offset in valid
              if offset > 0 and (before[i] + offset) / CHARS_PER_TOKEN_LOW >= behaviour.min_tokens]
    if len(chosen) > MAX_BREAKPOINTS:  # keep the static block and the latest prefixes
        chosen = chosen[:1] + chosen[-(MAX_BREAKPOINTS - 1):]
    cuts: dict[int, list[int]] = {}
    for i, offset in chosen:
        cuts.setdefault(i, []).append(offset)
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if i not in cuts:
            out.append(message)
            continue
        text = str(message.get("content", ""))
        blocks: list[dict[str, Any]] = []
        start = 0
        for offset in cuts[i]:
            blocks.append({"type": "text", "text": text[start:offset], "cache_control": {"type": "ephemeral"}})
            start = offset
        if start < len(text):
            blocks.append({"type": "text", "text": text[start:]})
        out.append({**message, "content": blocks})
    return out
