"""Transcript-viewer data: the compact per-conversation JSON the viewer's shards carry (report/shards writes them).

Browsers block fetch() from file://, so each shard is a script that registers its data through a
global callback: ``report/conversations/<shard>.js`` = ``IE_SHARD("<shard>", {...})``. A shard
holds every conversation of a block of profiles (all clinicians, every judge), so the drilldown
row of one profile needs one small file. The page inlines only a compact index.

A conversation with a post-intake formulation carries it compactly (``compact_formulation``),
with each diagnosis's catalog domain from metrics/diagnosis.csv's ``mapping`` column and, per judge,
the hidden domains it named without their being actively surfaced (``unearned_domains``).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

# Per (conversation, judge, hidden domain) outcome over the whole conversation.
ACTIVE, BLEED, ASKED, MISSED = "active", "bleed", "asked", "missed"
OUTCOME_CODE = {ACTIVE: 3, BLEED: 2, ASKED: 1, MISSED: 0}


def hidden_domains(conv: dict[str, Any], profile: dict[str, Any] | None) -> list[str]:
    if profile:
        return [draw["domain"] for draw in profile.get("hidden", [])]
    return []


def label_code(label: dict[str, Any]) -> int:
    """A turn's label of one domain as a number: asked (1) + 2 × disclosed (2)."""
    return (1 if label.get("asked_about") else 0) + (2 if label.get("disclosed") else 0)


def outcome_of(codes_seen: int) -> str:
    """A domain's outcome over the conversation from the bit set of its turns' ``label_code``s
    (bit ``1 << code``): active = some turn asked + disclosed; else bleed = disclosed without ask;
    else asked; else missed."""
    if codes_seen & 0b1000:
        return ACTIVE
    return BLEED if codes_seen & 0b0100 else ASKED if codes_seen & 0b0010 else MISSED


def domain_outcomes(judgment: dict[str, Any] | None, hidden: list[str]) -> dict[str, str] | None:
    """Each hidden domain's outcome (``outcome_of``); None when the judgment is missing or not ok."""
    if not judgment or judgment.get("status", "ok") != "ok":
        return None
    out = {}
    for domain in hidden:
        seen = 0
        for turn in judgment.get("turns", []):
            label = turn.get("domains", {}).get(domain)
            if label:
                seen |= 1 << label_code(label)
        out[domain] = outcome_of(seen)
    return out


def bleed_flags(signature: str, n_hidden: int) -> str:
    """Per hidden domain '1' when some turn disclosed it without asking (bleed, as metrics count it),
    from ``slim_records.slim_judgment``'s label signature (code 2 = disclosed, not asked). A domain caught
    later bled all the same: the drill-down marks it on top of its ✓."""
    flags = ["0"] * n_hidden
    for turn in signature.split("\x1e") if signature else []:
        codes = turn.rsplit("\x1f", 1)[-1]
        for i, code in enumerate(codes[:n_hidden]):
            if code == "2":
                flags[i] = "1"
    return "".join(flags)


def outcome_codes(outcomes: dict[str, str] | None, hidden: list[str]) -> str:
    """Drill-down squares as a string: one digit (OUTCOME_CODE) per hidden domain; '' if not judged."""
    return "" if outcomes is None else "".join(str(OUTCOME_CODE[outcomes[d]]) for d in hidden)


def compact_judgment(judgment: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    """Labels per turn as {domain: [asked 0/1, disclosed 0/1, reasoning]} (hot loop: kept plain)."""
    turns = []
    raw_turns = judgment.get("turns") or []
    if any(a.get("turn", 0) > b.get("turn", 0) for a, b in zip(raw_turns, raw_turns[1:])):
        raw_turns = sorted(raw_turns, key=lambda t: t.get("turn", 0))
    for turn in raw_turns:
        labels = turn.get("domains") or {}
        cells = {}
        for domain in hidden:
            label = labels.get(domain)
            if label is not None:
                cells[domain] = [1 if label.get("asked_about") else 0, 1 if label.get("disclosed") else 0,
                                 label.get("reasoning", "")]
        turns.append({"t": turn.get("turn", 0), "q": turn.get("question_type", "other"),
                      "f": 0 if turn.get("patient_faithful", True) is False else 1, "r": turn.get("reasoning", ""),
                      "d": cells})
    return {"status": judgment.get("status", "ok"), "errors": (judgment.get("errors") or [])[:5], "turns": turns,
            "model": judgment.get("judge_model", "")}


ERROR_SHOWN, ANSWER_SHOWN = 300, 400  # characters of a failed formulation's error / answer in a shard


DIAGNOSIS_FACT_COLUMNS = ("conversation_id", "judge", "mapping", "unearned_domains", "principal_domain", "principal_hit")


def diagnosis_facts(table, into: MutableMapping[str, dict[str, Any]] | None = None) -> MutableMapping[str, dict[str, Any]]:
    """metrics/diagnosis.csv → conversation_id → {"map": [[slot, name, icd10, domain | None, method], …],
    "unearned": {judge: [domain, …]}, "core": the phenotype's principal domain, "hit": whether the principal
    diagnosis maps to it} (judges whose row was scored; mapping and principal hit are the same for every judge).
    Written into ``into`` (e.g. ``spill.SpilledRows``, so a long table holds no dict per conversation) or a new dict."""
    out: MutableMapping[str, dict[str, Any]] = {} if into is None else into
    needed = DIAGNOSIS_FACT_COLUMNS
    if table is None or not set(needed) <= set(table.columns):
        return out
    for cid, judge, mapping, unearned, core, hit in zip(*(table[c] for c in needed)):
        if not isinstance(mapping, str) or not mapping:
            continue  # judgment not ok or formulation not scored: nothing mapped from this row
        facts = out.get(str(cid)) or {"map": None, "unearned": {}}
        if facts["map"] is None:
            try:
                facts["map"] = [[m.get("slot", ""), m.get("name", ""), m.get("icd10", ""), m.get("domain"),
                                 m.get("method", "")] for m in json.loads(mapping)]
            except (ValueError, AttributeError):
                out[str(cid)] = facts
                continue
            facts.update(core=str(core), hit=str(hit).lower() == "true")
        facts["unearned"][str(judge)] = [d for d in unearned.split(";") if d] if isinstance(unearned, str) else []
        out[str(cid)] = facts
    return out


def compact_formulation(record: dict[str, Any] | None, facts: dict[str, Any] | None) -> dict[str, Any] | None:
    """The formulation for the viewer: status ``s`` (+ error ``e``, truncated answer ``a`` when it failed);
    if ok, chief complaint ``cc``, problems ``pr``, diagnoses ``dx`` ([slot, name, icd10, domain, method];
    domain None until the run's diagnosis.csv maps them), risk level ``risk`` and evidence ``ev``,
    repaired ``rep``, unearned domains per judge ``u``, the phenotype's principal domain ``core`` and
    whether the principal diagnosis maps to it ``hit``."""
    if not record:
        return None
    out: dict[str, Any] = {"s": str(record.get("status", "invalid"))}
    if record.get("error"):
        out["e"] = str(record["error"])[:ERROR_SHOWN]
    if record.get("answer"):
        out["a"] = str(record["answer"])[:ANSWER_SHOWN]
    body = record.get("formulation")
    if out["s"] != "ok" or not isinstance(body, dict):
        if out["s"] == "ok":
            out.update(s="invalid", e="the record says ok but holds no formulation")
        return out
    refs = [("principal", body.get("principal_diagnosis"))]
    refs += [(f"differential[{i}]", ref) for i, ref in enumerate(body.get("differential") or [])]
    listed = [[slot, str(ref.get("name", "")), str(ref.get("icd10", "")), None, ""]
              for slot, ref in refs if isinstance(ref, dict)]
    facts = facts or {}
    out.update(rep=1 if record.get("repaired") else 0, cc=str(body.get("chief_complaint", "")),
               pr=[str(p) for p in (body.get("problems") or [])], dx=facts.get("map") or listed,
               risk=str(body.get("risk_level", "")), ev=str(body.get("risk_evidence", "")),
               u=facts.get("unearned", {}))
    if "core" in facts:
        out.update(core=facts["core"], hit=1 if facts["hit"] else 0)
    return out


def compact_conversation(conv: dict[str, Any], profile: dict[str, Any] | None,
                         judgments: dict[str, dict[str, Any]], diagnosis: dict[str, Any] | None = None) -> dict[str, Any]:
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
        "presenting_domain": presenting.get("domain", ""),
        "who": ", ".join(str(x) for x in (demo.get("name"), demo.get("age"), demo.get("sex"), demo.get("occupation")) if x),
        "hidden": hidden,
        "labels": labels,
        "opening": conv.get("opening", ""),
        # x: the roles whose answer was cut at the token cap (only on such turns)
        "turns": [{"t": t.get("turn"), "c": t.get("clinician", ""), "p": t.get("patient", ""),
                   **({"x": list(t["truncated"])} if t.get("truncated") else {})}
                  for t in conv.get("turns", [])],
        "judges": {judge: compact_judgment(j, hidden) for judge, j in judgments.items()},
        "formulation": compact_formulation(conv.get("formulation"), diagnosis),
    }
