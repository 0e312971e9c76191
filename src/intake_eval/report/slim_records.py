"""What the report keeps of each record while it builds the page: a slim profile, conversation and judgment
(ids, arm, status, spend, drill-down outcomes, a label signature), small enough to spill one per record
(report/load holds them); the full records are read back only for the viewer's shards.
"""

from __future__ import annotations

from typing import Any

from intake_eval.core.records import arm_condition
from intake_eval.report.viewer import label_code, outcome_of


def _pick(source: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source} if isinstance(source, dict) else source


def slim_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """What the page and the shards use of a profile (not its symptoms, phenomenology or life context)."""
    out = _pick(profile, ("profile_id", "phenotype", "alignment"))
    if "presenting" in profile:
        out["presenting"] = _pick(profile["presenting"], ("domain", "label"))
    if "hidden" in profile:
        hidden = profile["hidden"]
        out["hidden"] = [_pick(d, ("domain", "label")) for d in hidden] if isinstance(hidden, list) else hidden
    if "demographics" in profile:
        out["demographics"] = _pick(profile["demographics"], ("name", "age", "sex", "occupation"))
    return out


def slim_conversation(conv: dict[str, Any]) -> dict[str, Any]:
    """Ids, arm, status, trial, patient spend and number of turns (not the transcript)."""
    out = _pick(conv, ("conversation_id", "profile_id", "phenotype", "clinician", "condition", "patient_mode",
                       "trial", "status"))
    out["condition"] = arm_condition(str(conv.get("condition", "minimal")), conv.get("fork"))
    usage = conv.get("usage") or {}
    # the simulated patient's calls: its replies and, in tracked mode, the tracker's unlock decisions
    patient = [usage[role] for role in ("patient", "tracker") if isinstance(usage.get(role), dict)]
    if patient:
        out["usage"] = {"patient": {
            "prompt_tokens": sum(int(u.get("prompt_tokens", 0)) for u in patient),
            "completion_tokens": sum(int(u.get("completion_tokens", 0)) for u in patient),
            "cost_usd": sum(float(u.get("cost_usd", 0.0)) for u in patient),
            "cost_known": all(bool(u.get("cost_known", True)) for u in patient)}}
    out["n_turns"] = len(conv.get("turns", []))
    return out


def _qtype_code(value: Any) -> str:
    return "\x00" if value is None else str(value)


_CODE_TEXT = ("0", "1", "2", "3")


def slim_judgment(judgment: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    """Status, the drill-down outcome per hidden domain (``viewer.domain_outcomes``), a label signature:
    per turn "turn\x1fquestion type\x1fcodes", one code per hidden domain (``viewer.label_code``, '-' if
    unlabelled), turns joined by \x1e (the agreement hotspots compare two judges' signatures), and the hidden
    domains themselves, in the codes' order. One walk over the labels gives them all (hot loop: kept plain)."""

    out: dict[str, Any] = {"status": str(judgment["status"])} if "status" in judgment else {}
    seen = [0] * len(hidden)  # per hidden domain: the bit set of its label codes (``viewer.outcome_of``)
    turns = []
    for turn in judgment.get("turns", []):
        labels = turn.get("domains", {})
        codes = []
        for position, domain in enumerate(hidden):
            label = labels.get(domain)
            if label is None:
                codes.append("-")
                continue
            code = label_code(label)
            codes.append(_CODE_TEXT[code])
            seen[position] |= 1 << code
        number = turn.get("turn")
        turns.append(f"{'' if number is None else int(number)}\x1f{_qtype_code(turn.get('question_type'))}\x1f{''.join(codes)}")
    judged_ok = bool(judgment) and judgment.get("status", "ok") == "ok"
    out["outcomes"] = {domain: outcome_of(seen[position]) for position, domain in enumerate(hidden)} if judged_ok else None
    out["sig"] = "\x1e".join(turns)
    out["hidden"] = hidden  # what the codes' positions stand for (the agreement hotspots tally by domain)
    return out
