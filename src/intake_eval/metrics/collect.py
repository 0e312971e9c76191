"""One streaming pass over a run folder's judgments: what the metrics tables need per (conversation, judge),
kept small — a metrics row, per-domain outcomes, the coverage trajectory, question types and the
paired-label units (no transcripts). The latest record per conversation wins, so an uncompacted file (a crash
mid-stage) collects the same as a compacted one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from intake_eval.core.records import Judgment, Profile, arm_condition
from intake_eval.core.store import (
    RunPaths,
    iter_json_lines,
    iter_records,
)
from intake_eval.core.usage import CLINICIAN_ROLES, usage_of
from intake_eval.metrics import registry
from intake_eval.metrics.agreement import (
    CompactUnits,
    compact_units,
    units_from_labels,
)
from intake_eval.metrics.figures import (
    Figures,
    TurnLabels,
    figures,
    last_clinician_turn,
)
from intake_eval.metrics.integrity import counted_judgments


@dataclass
class Collected:
    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (judge, conversation) -> row
    outcomes: dict[tuple[str, str], list] = field(default_factory=dict)
    trajectories: dict[tuple[str, str], list] = field(default_factory=dict)
    qtypes: dict[tuple[str, str], dict[int, str]] = field(default_factory=dict)
    last_turns: dict[tuple[str, str], int] = field(default_factory=dict)  # where time-to-event curves censor
    units: dict[tuple[str, str], CompactUnits] = field(default_factory=dict)
    conversations: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> small meta
    shared_keys: dict[tuple, tuple] = field(default_factory=dict)  # unit-key tuples stored once


def _profile_facts(paths: RunPaths) -> dict[str, dict[str, Any]]:
    facts = {}
    for profile in iter_records(paths.profiles, Profile):
        facts[profile.profile_id] = {"phenotype": profile.phenotype, "alignment": profile.alignment,
                                     "hidden": profile.hidden_domains}
    return facts


def _conversation_meta(paths: RunPaths, collected: Collected) -> None:
    for path in paths.conversation_files():
        for data in iter_json_lines(path):
            usage = data.get("usage") or {}
            # the clinician's calls: its turns and its post-intake formulation
            clinician_usage = [usage.get(role) or {} for role in CLINICIAN_ROLES]
            collected.conversations[str(data.get("conversation_id"))] = {
                "clinician": data.get("clinician", ""),
                "condition": arm_condition(str(data.get("condition", "minimal")), data.get("fork")),
                "patient_mode": data.get("patient_mode", "prompted"), "status": data.get("status", "ok"),
                "patient": str(data.get("patient", "")),
                "tokens": sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in clinician_usage),
                "cost": sum(float(u.get("cost_usd", 0.0)) for u in clinician_usage),
                "profile_id": str(data.get("profile_id", "")),
                "usage": {str(role): usage_of(raw) for role, raw in usage.items()} if isinstance(usage, dict) else {},
            }


def _collect_judgment(judgment: Judgment, labels: list[TurnLabels], facts: dict[str, Any] | None,
                      collected: Collected) -> tuple[list[str], Figures | None]:
    """Keep this judgment's numbers; returns (the hidden domains used, its figures or None when not ok)."""
    key = (judgment.judge, judgment.conversation_id)
    hidden = facts["hidden"] if facts else sorted({d for t in labels for d in t.domains})
    row: dict[str, Any] = {
        "conversation_id": judgment.conversation_id, "judge": judgment.judge, "judge_mode": judgment.mode,
        "clinician": judgment.clinician, "phenotype": (facts or {}).get("phenotype") or judgment.phenotype,
        "profile_id": judgment.profile_id, "condition": judgment.condition, "patient_mode": judgment.patient_mode,
        "trial": judgment.trial, "alignment": (facts or {}).get("alignment", ""), "n_hidden": len(hidden),
        "status": judgment.status, "judge_calls": judgment.usage.calls,
        "judge_prompt_tokens": judgment.usage.prompt_tokens, "judge_completion_tokens": judgment.usage.completion_tokens,
        "judge_cached_prompt_tokens": judgment.usage.cached_prompt_tokens,
        "judge_cost_usd": judgment.usage.cost_usd if judgment.usage.cost_known else None,
        "judge_errors": " | ".join(judgment.errors),
        # the patient model that spoke (pooled over, and broken down by, in metrics/patient_models)
        "patient": collected.conversations.get(judgment.conversation_id, {}).get("patient", ""),
    }
    for name in ("outcomes", "trajectories", "qtypes", "last_turns", "units"):
        getattr(collected, name).pop(key, None)
    result = None
    if judgment.ok:
        result = figures(labels, hidden)
        row.update(registry.metric_row(registry.Judged(labels, hidden, result)))
        outcomes = result.outcomes
        row["caught_domains"] = ";".join(o.domain for o in outcomes if o.actively_covered)
        row["missed_domains"] = ";".join(o.domain for o in outcomes if not o.actively_covered)
        row["bled_domains"] = ";".join(o.domain for o in outcomes if o.bled)
        collected.outcomes[key] = outcomes
        collected.trajectories[key] = result.trajectory
        collected.qtypes[key] = {t.turn: t.question_type for t in labels if t.turn >= 1}
        collected.last_turns[key] = last_clinician_turn(labels)
        collected.units[key] = compact_units(units_from_labels(labels, hidden, result.covered), collected.shared_keys)
    collected.rows[key] = row
    return hidden, result


def collect(paths: RunPaths, also: Callable[..., None] | None = None) -> Collected:
    """One pass over every judgment; ``also(judgment, labels, hidden, figures)`` sees each one too
    (the diagnosis/safety rows), with the figures computed here over ``hidden``."""
    facts = _profile_facts(paths)
    collected = Collected()
    _conversation_meta(paths, collected)
    for judgment, labels in counted_judgments(paths):
        hidden, result = _collect_judgment(judgment, labels, facts.get(judgment.profile_id), collected)
        if also is not None:
            also(judgment, labels, hidden, result)
    return collected
