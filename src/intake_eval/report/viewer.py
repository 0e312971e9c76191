"""Transcript-viewer data: per-conversation JSON in script shards loaded on demand.

Browsers block fetch() from file://, so each shard is a script that registers its data through a
global callback: ``report/conversations/<shard>.js`` = ``IE_SHARD("<shard>", {...})``. A shard
holds every conversation of a block of profiles (all clinicians, every judge), so the drilldown
row of one profile needs one small file. The page inlines only a compact index.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

PROFILES_PER_SHARD = 10

# Per (conversation, judge, hidden domain) outcome over the whole conversation.
ACTIVE, BLEED, ASKED, MISSED = "active", "bleed", "asked", "missed"
OUTCOME_CODE = {ACTIVE: 3, BLEED: 2, ASKED: 1, MISSED: 0}


def hidden_domains(conv: dict[str, Any], profile: dict[str, Any] | None) -> list[str]:
    if profile:
        return [draw["domain"] for draw in profile.get("hidden", [])]
    return []


def domain_outcomes(judgment: dict[str, Any] | None, hidden: list[str]) -> dict[str, str] | None:
    """active = some turn asked + disclosed; else bleed = disclosed without ask; else asked; else missed."""
    if not judgment or judgment.get("status", "ok") != "ok":
        return None
    out = {}
    for domain in hidden:
        active = bleed = asked = False
        for turn in judgment.get("turns", []):
            label = turn.get("domains", {}).get(domain)
            if not label:
                continue
            a, d = bool(label.get("asked_about")), bool(label.get("disclosed"))
            active |= a and d
            bleed |= d and not a
            asked |= a
        out[domain] = ACTIVE if active else BLEED if bleed else ASKED if asked else MISSED
    return out


def outcome_codes(outcomes: dict[str, str] | None, hidden: list[str]) -> str:
    """Drill-down squares as a string: one digit (OUTCOME_CODE) per hidden domain; '' if not judged."""
    return "" if outcomes is None else "".join(str(OUTCOME_CODE[outcomes[d]]) for d in hidden)


def compact_judgment(judgment: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    turns = []
    for turn in sorted(judgment.get("turns", []), key=lambda t: t.get("turn", 0)):
        cells = {}
        for domain in hidden:
            label = turn.get("domains", {}).get(domain)
            if label is not None:
                cells[domain] = [int(bool(label.get("asked_about"))), int(bool(label.get("disclosed"))),
                                 label.get("reasoning", "")]
        turns.append({"t": turn.get("turn", 0), "q": turn.get("question_type", "other"),
                      "f": int(bool(turn.get("patient_faithful", True))), "r": turn.get("reasoning", ""), "d": cells})
    return {"status": judgment.get("status", "ok"), "errors": judgment.get("errors", [])[:5], "turns": turns,
            "model": judgment.get("judge_model", "")}


def compact_conversation(conv: dict[str, Any], profile: dict[str, Any] | None,
                         judgments: dict[str, dict[str, Any]]) -> dict[str, Any]:
    hidden = hidden_domains(conv, profile)
    labels = {draw["domain"]: draw.get("label") or draw["domain"] for draw in (profile or {}).get("hidden", [])}
    presenting = (profile or {}).get("presenting", {})
    demo = (profile or {}).get("demographics", {})
    return {
        "id": conv["conversation_id"],
        "clinician": conv.get("clinician", ""),
        "clinician_model": conv.get("clinician_model", ""),
        "patient": conv.get("patient", ""),
        "profile_id": conv.get("profile_id", ""),
        "phenotype": conv.get("phenotype", ""),
        "alignment": (profile or {}).get("alignment", ""),
        "condition": conv.get("condition", ""),
        "patient_mode": conv.get("patient_mode", ""),
        "trial": conv.get("trial", 0),
        "status": conv.get("status", "ok"),
        "termination": conv.get("termination", ""),
        "error": conv.get("error"),
        "presenting": presenting.get("label") or presenting.get("domain", ""),
        "who": ", ".join(str(x) for x in (demo.get("name"), demo.get("age"), demo.get("sex"), demo.get("occupation")) if x),
        "hidden": hidden,
        "labels": labels,
        "opening": conv.get("opening", ""),
        "turns": [{"t": t.get("turn"), "c": t.get("clinician", ""), "p": t.get("patient", "")}
                  for t in conv.get("turns", [])],
        "judges": {judge: compact_judgment(j, hidden) for judge, j in judgments.items()},
    }


def shard_name(index: int) -> str:
    return f"s{index:05d}"


def write_shards(target: Path, profiles: dict, conversations: dict, judgments: dict[str, dict],
                 progress=None) -> dict[str, str]:
    """Write conversations/<shard>.js files; returns conversation_id -> shard name."""
    staging = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    by_profile: dict[str, list[str]] = {}
    for cid, conv in conversations.items():
        by_profile.setdefault(conv.get("profile_id", ""), []).append(cid)
    profile_ids = sorted(by_profile)
    assignment: dict[str, str] = {}
    for start in range(0, len(profile_ids), PROFILES_PER_SHARD):
        name = shard_name(start // PROFILES_PER_SHARD)
        payload = {}
        for pid in profile_ids[start:start + PROFILES_PER_SHARD]:
            for cid in sorted(by_profile[pid]):
                per_judge = {judge: done[cid] for judge, done in judgments.items() if cid in done}
                payload[cid] = compact_conversation(conversations[cid], profiles.get(pid), per_judge)
                assignment[cid] = name
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
        (staging / f"{name}.js").write_text(f"IE_SHARD({json.dumps(name)},{text});\n", encoding="utf-8")
        if progress:
            progress(len(payload))
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
    return assignment
