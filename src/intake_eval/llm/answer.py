"""Whether a provider's answer can be used: visible text, a refusal, an empty answer, a cut.

Every role (clinician, patient, tracker, judge, formulation) reads an answer through here, so "no
visible text" means the same everywhere and is never read as a finished intake or a "no" label:

- **refused** — the provider declined: OpenAI's ``message.refusal``, ``finish_reason: content_filter``
  (OpenRouter, Azure, Claude's ``stop_reason: refusal``). Not retried: the same request is refused
  again, and re-asking until a model complies would bias the comparison it is measured in. The
  provider's words are kept (``refusal``). A filter that stopped an answer part-way is refused too:
  what was said is not a whole turn. A request a content policy rejects (HTTP 400, kind
  ``content_policy``) is counted as refused by the conversation and the judge as well.
- **empty** — no visible text and no refusal: ``content: null``, whitespace, a tool call only, a
  reasoning model's empty content. Retried once, as a fresh sample (its own cache key); a second
  empty answer fails with ``empty_answer``.
- **empty_after_length** — a length stop with no visible text (provider routes already fail it in
  normalisation): not retried, the same cap would cut the retry too.

A length stop *with* visible text is usable but **truncated**: callers record it per turn and
role (``truncated``), and ``--on-truncation fail`` turns it into a failure (``truncated_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal, get_args

from intake_eval.llm.base import ChatModel, ChatRequest, ChatResult, ModelCallError

REFUSAL_FINISH_REASONS = frozenset({"content_filter", "refusal"})
TRUNCATION_FINISH_REASONS = frozenset({"length"})
EMPTY_RETRIES = 1  # fresh samples after an empty answer
TruncationPolicy = Literal["keep", "fail"]  # keep-and-flag (the default) | fail the conversation
TRUNCATION_POLICIES: tuple[str, ...] = get_args(TruncationPolicy)
REFUSAL_KEPT = 600  # characters of a refusal kept in a record


@dataclass(frozen=True)
class Unusable:
    """Why an answer has nothing to use."""

    kind: Literal["refused", "empty_answer", "empty_after_length"]
    reason: str  # the provider's finish_reason, "refusal", or "tool call only" / "no visible text"
    refusal: str | None = None

    def describe(self) -> str:
        if self.kind == "empty_after_length":
            return self.reason
        if self.kind == "refused":
            words = f": {self.refusal}" if self.refusal else ""
            return f"refused (finish_reason={self.reason}){words}"
        return f"no visible text ({self.reason})"


def truncated(result: ChatResult) -> bool:
    """The answer was cut at the token cap (it may still hold visible text)."""
    return result.finish_reason in TRUNCATION_FINISH_REASONS


def unusable(result: ChatResult) -> Unusable | None:
    """None for an answer with visible text; else whether it was refused or empty, and why."""
    if result.refusal or result.finish_reason in REFUSAL_FINISH_REASONS:
        refusal = result.refusal or (result.text or "").strip() or None
        return Unusable("refused", result.finish_reason or "refusal",
                        refusal[:REFUSAL_KEPT] if refusal else None)
    if (result.text or "").strip():
        return None
    if truncated(result):
        return Unusable("empty_after_length", "cut at the token cap before any visible text; raise max_tokens")
    if result.tool_calls or result.finish_reason == "tool_calls":
        return Unusable("empty_answer", "tool call only")
    return Unusable("empty_answer", f"no visible text, finish_reason={result.finish_reason}")


def unusable_error(who: str, problem: Unusable, result: ChatResult, attempts: int = 1) -> ModelCallError:
    tried = f" after {attempts} samples" if attempts > 1 else ""
    return ModelCallError(f"{who} {problem.describe()}{tried}", kind=problem.kind, attempts=attempts,
                          finish_reason=result.finish_reason, refusal=problem.refusal)


def truncated_error(who: str, result: ChatResult, cap: int | None) -> ModelCallError:
    at = f"max_tokens={cap}" if cap is not None else "its token cap"
    return ModelCallError(f"{who} was cut at {at} (finish_reason={result.finish_reason}); "
                          "--on-truncation fail counts such a conversation as failed",
                          kind="truncated", finish_reason=result.finish_reason)


def retry_request(request: ChatRequest, retry: int) -> ChatRequest:
    """The same request as a fresh sample: its own cache key, so a cached empty answer is not served again."""
    return replace(request, answer_retry=retry)


def _folded(result: ChatResult, discarded: list[ChatResult]) -> ChatResult:
    """``result`` carrying the usage of the empty answers sampled before it (they were paid for too)."""
    if not discarded:
        return result
    usage = result.usage.model_copy()
    for earlier in discarded:
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_prompt_tokens",
                     "cache_write_tokens", "cost_usd"):
            setattr(usage, name, getattr(usage, name) + getattr(earlier.usage, name))
        usage.cost_known = usage.cost_known and earlier.usage.cost_known
    return result.model_copy(update={"usage": usage, "attempts": result.attempts + sum(d.attempts for d in discarded)})


async def complete_visible(model: ChatModel, request: ChatRequest, who: str,
                           on_result: Callable[[ChatResult], None] | None = None) -> ChatResult:
    """An answer with visible text, or ModelCallError(refused | empty_answer | empty_after_length)
    saying why not. ``on_result`` sees every answered call, the unusable ones included (they were
    paid for); without it, the returned answer carries the usage of the empty ones before it."""
    discarded: list[ChatResult] = []
    for retry in range(EMPTY_RETRIES + 1):
        result = await model.complete(request if retry == 0 else retry_request(request, retry))
        if on_result is not None:
            on_result(result)
        problem = unusable(result)
        if problem is None:
            return result if on_result is not None else _folded(result, discarded)
        discarded.append(result)
        if problem.kind != "empty_answer" or retry == EMPTY_RETRIES:  # the same refusal, the same cap
            raise unusable_error(who, problem, result, attempts=retry + 1)
    raise AssertionError("unreachable: the loop returns or raises")
