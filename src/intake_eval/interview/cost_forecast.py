"""What a conversation or a judgment is expected to cost, before and after any is measured: the prior
from the models' prices × expected tokens, the measured costs of the finished conversations on disk, and the
judging estimate. The budget (interview/budget.py) reserves these figures and forecasts what is left with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from intake_eval.core.records import arm_condition
from intake_eval.core.usage import latest_lines, usage_of
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.llm.litellm_backend import call_cost

# The prior, before any conversation of a clinician/arm is measured: a prompt's fixed part per role
# (system prompt, the patient's profile), the answer lengths of the cost estimate, and a margin so
# that the first conversations rather under- than overspend (over-reserving only delays starts
# until the first conversation has measured the real cost).
BASE_PROMPT_TOKENS = {"clinician": 500, "patient": 2000, "tracker": 1500}
ANSWER_TOKENS = {"clinician": 80, "patient": 90, "tracker": 25, "formulation": 300}
PRIOR_MARGIN = 2.0
JUDGE_PROMPT_TOKENS = 2500  # the judge's instructions and the hidden domains
JUDGE_ANSWER_TOKENS = 400


def record_cost(usage: Mapping[str, Any] | None) -> float:
    """Dollars of a conversation record's usage (role → usage dict)."""
    return sum(usage_of(raw).cost_usd for raw in (usage or {}).values())


def arm_of(item: PlannedConversation) -> tuple[str, str]:
    fork = {"at": item.fork.at, "nudge": item.fork.nudge} if item.fork is not None else None
    return item.clinician, arm_condition(item.condition, fork)


def role_cost(spec: Any, prompt_tokens: int, completion_tokens: int) -> float:
    if spec is None or getattr(spec, "is_offline", False):
        return 0.0
    dollars, _known = call_cost(spec, prompt_tokens, completion_tokens)
    return dollars


def prior_cost(item: PlannedConversation, specs: Mapping[str, Any], margin: float = PRIOR_MARGIN) -> float:
    """Dollars one conversation is expected to cost from prices × expected tokens (``specs``: role →
    ModelSpec or None), times ``margin``."""
    turns = item.max_turns
    exchange = ANSWER_TOKENS["clinician"] + ANSWER_TOKENS["patient"]
    history = exchange * turns * (turns + 1) // 2  # the transcript grows by one exchange per turn
    tokens = {
        "clinician": (BASE_PROMPT_TOKENS["clinician"] * turns + history, ANSWER_TOKENS["clinician"] * turns),
        "patient": (BASE_PROMPT_TOKENS["patient"] * (turns + 1) + history, ANSWER_TOKENS["patient"] * (turns + 1)),
    }
    if specs.get("tracker") is not None:
        tokens["tracker"] = (BASE_PROMPT_TOKENS["tracker"] * turns + history, ANSWER_TOKENS["tracker"] * turns)
    dollars = sum(role_cost(specs.get(role), *counts) for role, counts in tokens.items())
    if item.formulation:
        dollars += role_cost(specs.get("clinician"), BASE_PROMPT_TOKENS["clinician"] + exchange * turns,
                              ANSWER_TOKENS["formulation"])
    return dollars * margin


def measured_costs(paths: Any, clinicians: Iterable[str]) -> dict[tuple[str, str], list[float]]:
    """Cost of every finished ok conversation on disk, by (clinician, arm)."""
    measured: dict[tuple[str, str], list[float]] = {}
    files = [paths.conversations(alias) for alias in sorted(set(clinicians))]
    for data in latest_lines(files, "conversation_id").values():
        if data.get("status", "ok") != "ok":
            continue
        fork = data.get("fork") if isinstance(data.get("fork"), dict) else None
        key = (str(data.get("clinician", "")), arm_condition(str(data.get("condition", "minimal")), fork))
        measured.setdefault(key, []).append(record_cost(data.get("usage")))
    return measured


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
