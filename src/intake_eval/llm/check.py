"""`intake-eval models --check`: one tiny request per model, and how long it took or why it failed.

The request goes through the same pool as a study's calls (key, api_base, client, normalisation),
without the response cache and with a short retry budget, so a wrong key, model id or api_base
shows up in seconds with the server's own words. Offline participants need no request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from intake_eval.core.prompts import render_prompt
from intake_eval.llm.answer import unusable
from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec, api_base_label
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.request_kind import RequestKind
from intake_eval.llm.retry import RetryPolicy

CHECK_POLICY = RetryPolicy(max_attempts=2, base_delay_s=1.0, max_delay_s=5.0, deadline_s=60.0)
CHECK_MAX_TOKENS = 16


@dataclass
class CheckResult:
    name: str
    model: str
    api_base: str | None
    ok: bool
    latency_s: float | None
    detail: str


def _where(spec: ModelSpec) -> str | None:
    return api_base_label(spec.api_base) if spec.api_base else None


async def _check_one(pool: ModelPool, name: str) -> CheckResult:
    spec = pool.spec(name)
    if spec.is_offline:
        return CheckResult(name, spec.model, None, True, None, "offline participant: no request needed")
    # A reasoning model thinks before it answers: give it its own cap rather than a few tokens.
    cap = spec.max_tokens if spec.reasoning and spec.max_tokens else CHECK_MAX_TOKENS
    request = ChatRequest(messages=[{"role": "user", "content": render_prompt("model_check")}], max_tokens=cap,
                          temperature=0.0, purpose=RequestKind.CHECK)
    try:
        result = await pool.get(name).complete(request)
    except ModelCallError as error:
        if error.kind == "empty_after_length":
            return CheckResult(name, spec.model, _where(spec), True, None,
                               f"reachable; the answer was cut at {cap} tokens before any visible text")
        return CheckResult(name, spec.model, _where(spec), False, None, error.format_message())
    problem = unusable(result)
    if problem is not None and problem.kind == "refused":  # reachable, but the record of a study would fail
        return CheckResult(name, spec.model, _where(spec), True, result.latency_s,
                           f"reachable; the model {problem.describe()}")
    answer = " ".join(result.text.split())[:40] or "(empty)"
    return CheckResult(name, spec.model, _where(spec), True, result.latency_s,
                       f"answered {answer!r} ({result.usage.prompt_tokens}+{result.usage.completion_tokens} tokens)")


async def check_models(specs: Mapping[str, ModelSpec], names: Sequence[str]) -> list[CheckResult]:
    """Check every named model at once (each against its own endpoint)."""
    pool = ModelPool(specs, use_cache=False, retry_policy=CHECK_POLICY)
    try:
        return list(await asyncio.gather(*(_check_one(pool, name) for name in names)))
    finally:
        await pool.aclose()
