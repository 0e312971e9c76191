"""What the providers' prompt caches would serve during a study, call by call.

The estimate sends every request the study would send, in the order one conversation's (or one
judged conversation's) calls are made. ``PromptCacheModel`` replays each alias's requests against a
model of its provider's cache (llm/prompt_cache.py):
- automatic caching (OpenAI, Gemini, DeepSeek, other hosts, local servers): a call reads the longest
  prefix it shares with the alias's previous call of the same purpose, once that prefix reaches the
  provider's minimum (OpenAI: in 128-token steps); nothing is charged for writing.
- breakpoint caching (Anthropic): the breakpoints the request would carry (with_breakpoints); a call
  reads the longest of them the alias's previous call of the same purpose also marked, and pays the
  cache-write rate for the tokens from there to its last breakpoint.
Token counts are those of the estimate's tokenizer; the cache's lifetime (minutes) is not modelled,
as each chain's calls follow one another within seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from intake_eval.llm.base import ChatRequest, Message, ModelSpec
from intake_eval.llm.litellm_backend import cache_prices
from intake_eval.llm.prompt_cache import cache_behaviour, with_breakpoints

TokenCounter = Callable[[list[Message]], int]
TextCounter = Callable[[str], int]


class PromptCacheModel:
    """Cached-read and cache-write tokens for each request of one model alias."""

    def __init__(self, spec: ModelSpec, count_messages: TokenCounter, count_text: TextCounter):
        self.spec = spec
        self.behaviour = cache_behaviour(spec)
        self.count_messages = count_messages
        self.count_text = count_text
        self.previous: dict[str, list[Message]] = {}  # purpose -> the alias's last request of it
        self.marked: dict[str, set[str]] = {}  # purpose -> hashes of the prefixes its last request marked

    def _prefix_tokens(self, messages: list[Message], index: int, offset: int) -> int:
        """Tokens of the messages before ``index`` plus ``offset`` characters of message ``index``."""
        head = self.count_messages(messages[:index]) - 3 if index else 0  # without the reply priming
        text = str(messages[index].get("content", ""))
        if offset * 2 > len(text):  # the whole text is counted already: subtract the short rest (±1 token at the cut)
            return head + 3 + max(0, self.count_text(text) - self.count_text(text[offset:]))
        return head + 3 + self.count_text(text[:offset])

    def _shared_tokens(self, before: list[Message], now: list[Message]) -> int:
        index = 0
        while index < min(len(before), len(now)) and before[index] == now[index]:
            index += 1
        if index == len(now):
            return self.count_messages(now)
        if index < len(before) and before[index].get("role") == now[index].get("role"):
            offset = len(os.path.commonprefix([str(before[index].get("content", "")), str(now[index].get("content", ""))]))
            return self._prefix_tokens(now, index, offset)
        return self.count_messages(now[:index]) - 3 if index else 0

    def account(self, request: ChatRequest, purpose: str) -> tuple[int, int]:
        """(tokens read from the cache, tokens written to it) for this request, then remember it."""
        if self.spec.is_offline:
            return 0, 0
        messages = list(request.messages)
        if self.behaviour.explicit:
            return self._account_breakpoints(messages, request.cache_points, purpose)
        before = self.previous.get(purpose)
        self.previous[purpose] = messages
        shared = self._shared_tokens(before, messages) if before else 0
        if shared < self.behaviour.min_tokens:
            return 0, 0
        return shared - shared % self.behaviour.step, 0

    def _account_breakpoints(self, messages: list[Message], points: tuple[tuple[int, int], ...],
                             purpose: str) -> tuple[int, int]:
        sent = with_breakpoints(self.spec, messages, points)
        marks: list[tuple[str, int]] = []  # (prefix hash, tokens) per breakpoint, in order
        for index, message in enumerate(sent):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            offset = 0
            for block in content:
                offset += len(block["text"])
                if "cache_control" in block:
                    tokens = self._prefix_tokens(messages, index, offset)
                    if tokens >= self.behaviour.min_tokens:
                        key = json.dumps([messages[:index], str(messages[index]["content"])[:offset]])
                        marks.append((hashlib.sha256(key.encode()).hexdigest(), tokens))
        before = self.marked.get(purpose, set())
        read = max((tokens for key, tokens in marks if key in before), default=0)
        written = max(0, marks[-1][1] - read) if marks and marks[-1][0] not in before else 0
        self.marked[purpose] = {key for key, _ in marks}
        return read, written


def input_dollars(prompt: int, cached: int, written: int, input_price: float, read_price: float | None,
                  write_price: float | None) -> float:
    """Dollars of the input tokens: cached reads and writes at their rates (the input price where
    the provider publishes none), the rest at the input price."""
    read = input_price if read_price is None else read_price
    write = input_price if write_price is None else write_price
    return (prompt - cached - written) * input_price + cached * read + written * write


def cache_assumptions(specs: dict[str, ModelSpec]) -> dict[str, dict[str, Any]]:
    """Per alias: how its provider caches prompts (the estimate's model of it) and at what prices."""
    out = {}
    for alias, spec in sorted(specs.items()):
        if spec.is_offline:
            continue
        behaviour = cache_behaviour(spec)
        read, write = cache_prices(spec)
        out[alias] = {"breakpoints": behaviour.explicit, "min_tokens": behaviour.min_tokens, "step": behaviour.step,
                      "read_cost_per_token": read, "write_cost_per_token": write}
    return out
