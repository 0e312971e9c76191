"""What model work is expected to cost before it is measured, for any stage: prices × expected tokens,
with the shared token assumptions (prompt sizes, answer lengths, the prior's margin), and a judgment's
expected cost from the judgments on disk or the prior. interview/cost_forecast.py builds a conversation's
estimate on these; the folder budget (runner/budget.py) holds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from intake_eval.core.usage import latest_lines, usage_of
from intake_eval.llm.litellm_backend import call_cost

# The prior, before any work is measured: a prompt's fixed part per role (system prompt, the patient's
# profile), the answer lengths, and a margin so that the first pieces of work rather under- than
# overspend (over-reserving only delays starts until the first one has measured the real cost).
BASE_PROMPT_TOKENS = {"clinician": 500, "patient": 2000, "tracker": 1500}
ANSWER_TOKENS = {"clinician": 80, "patient": 90, "tracker": 25, "formulation": 300}
PRIOR_MARGIN = 2.0
JUDGE_PROMPT_TOKENS = 2500  # the judge's instructions and the hidden domains
JUDGE_ANSWER_TOKENS = 400


def record_cost(usage: Mapping[str, Any] | None) -> float:
    """Dollars of a record's usage (role → usage dict)."""
    return sum(usage_of(raw).cost_usd for raw in (usage or {}).values())


def role_cost(spec: Any, prompt_tokens: int, completion_tokens: int) -> float:
    """Dollars of one role's tokens at its model's prices (0 for an offline participant or no model)."""
    if spec is None or getattr(spec, "is_offline", False):
        return 0.0
    dollars, _known = call_cost(spec, prompt_tokens, completion_tokens)
    return dollars


def judging_estimate(paths: Any, judges: Mapping[str, Any], turns: int, mode: str) -> tuple[float, bool]:
    """Dollars to judge one conversation by every judge (label → ModelSpec): the mean judgment cost of
    each judge on disk, else prices × expected tokens (a per-turn judge reads the transcript once per turn,
    with PRIOR_MARGIN); and whether every judge's figure was measured."""
    total, measured = 0.0, True
    for label, spec in judges.items():
        folder = paths.judge_dir(label)
        costs = [usage_of(data.get("usage")).cost_usd for data in
                 latest_lines(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [], "conversation_id").values()
                 if data.get("status", "ok") == "ok"]
        if costs:
            total += sum(costs) / len(costs)
            continue
        calls = turns + 1 if mode == "per-turn" else 1
        transcript = (ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]) * turns
        total += PRIOR_MARGIN * role_cost(spec, calls * (JUDGE_PROMPT_TOKENS + transcript), calls * JUDGE_ANSWER_TOKENS)
        measured = False
    return total, measured
