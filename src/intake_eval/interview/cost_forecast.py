"""What a conversation is expected to cost, before and after any is measured: the prior from the models'
prices × expected tokens (the token assumptions of runner/cost_estimate.py) and the measured costs of the
finished conversations on disk. The conversation budget (interview/budget.py) holds these figures and
forecasts what is left with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from intake_eval.core.records import arm_condition
from intake_eval.core.usage import latest_lines
from intake_eval.interview.conversation import PlannedConversation
from intake_eval.runner.cost_estimate import (
    ANSWER_TOKENS,
    BASE_PROMPT_TOKENS,
    PRIOR_MARGIN,
    record_cost,
    role_cost,
)


def arm_of(item: PlannedConversation) -> tuple[str, str]:
    fork = {"at": item.fork.at, "nudge": item.fork.nudge} if item.fork is not None else None
    return item.clinician, arm_condition(item.condition, fork)


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
