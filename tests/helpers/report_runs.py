"""Synthetic run folders for the report tests and scripts/bench_report.py.

Records are real pydantic records (Profile, Conversation, Judgment) written with the store's
JSONL writer, shaped like a study: clinicians with different probing styles, a patient who
discloses a hidden domain when asked about it, and judges whose labels differ now and then.
"""

from __future__ import annotations

import random
from pathlib import Path

from intake_eval.core.records import (
    Conversation,
    ConversationTurn,
    Demographics,
    DomainDraw,
    DomainLabel,
    Judgment,
    Profile,
    TurnJudgment,
    Usage,
)
from intake_eval.core.store import JsonlWriter, RunPaths

PHENOTYPES = {
    "bipolar_masked": ("masked", "depression", ["hypomania", "insomnia", "alcohol_use", "irritability", "generalized_anxiety"]),
    "postpartum_intrusive": ("masked", "depression", ["intrusive_harm_thoughts", "generalized_anxiety", "insomnia", "ocd"]),
    "trauma_substance": ("aligned", "alcohol_use", ["ptsd", "nightmares", "depression", "irritability"]),
    "panic_agoraphobia": ("aligned", "panic", ["agoraphobia", "depression", "health_anxiety", "alcohol_use"]),
    "eating_complex": ("masked", "depression", ["restrictive_eating", "purging", "body_image", "self_harm", "generalized_anxiety"]),
}
STYLES = {  # clinician -> (probability of probing a new hidden domain per turn, treatment-planning pivot turn)
    "offline/screener": (0.75, 11),
    "offline/anchored": (0.06, 6),
    "llama-3.3-70b": (0.25, 8),
}


def label(domain: str) -> str:
    return domain.replace("_", " ")


def make_profile(index: int, rng: random.Random) -> Profile:
    phenotype = sorted(PHENOTYPES)[index % len(PHENOTYPES)]
    alignment, presenting, pool = PHENOTYPES[phenotype]
    hidden = pool[: 4 + (index % 2)] if len(pool) > 4 else pool
    draw = lambda d: DomainDraw(domain=d, label=label(d), severity=rng.choice(["mild", "moderate", "severe"]),  # noqa: E731
                                symptoms=[f"{label(d)} symptom {k}" for k in range(3)],
                                phenomenology=f"I have had {label(d)} troubles.")
    return Profile(profile_id=f"P{index:05d}", index=index, phenotype=phenotype, alignment=alignment,
                   presenting=draw(presenting), hidden=[draw(d) for d in hidden],
                   demographics=Demographics(age=20 + index % 50, sex="female" if index % 2 else "male",
                                             occupation="teacher", name=f"Pat {index}"))


def make_conversation(profile: Profile, clinician: str, turns: int, rng: random.Random,
                      trial: int = 0) -> tuple[Conversation, list[tuple[str | None, str]]]:
    """Returns the conversation and, per turn, (domain asked or None, question type)."""
    probe, pivot = STYLES.get(clinician, (0.3, 8))
    remaining = list(profile.hidden_domains)
    rng.shuffle(remaining)
    plan: list[tuple[str | None, str]] = []
    records = []
    for number in range(1, turns + 1):
        asked = None
        if number >= pivot:
            qtype = "treatment_planning" if number < turns else "other"
            text = "It might help to try a regular sleep routine and some breathing exercises."
        elif remaining and rng.random() < probe:
            asked = remaining.pop()
            qtype = "closed_hypothesis"
            text = f"Have you noticed any {label(asked)} lately, for example in the past two weeks?"
        else:
            qtype = rng.choice(["open", "clarifying"])
            text = "Can you tell me more about how this has been affecting you?"
        reply = (f"Yes, actually — the {label(asked)} has been bad. I didn't think to mention it." if asked
                 else f"It's mostly the {profile.presenting.label}, it is hard every day.")
        plan.append((asked, qtype))
        records.append(ConversationTurn(turn=number, clinician=text, patient=reply))
    usage = {"clinician": Usage(calls=turns, prompt_tokens=900 * turns, completion_tokens=60 * turns, cost_usd=0.0009 * turns),
             "patient": Usage(calls=turns + 1, prompt_tokens=1200 * turns, completion_tokens=70 * turns, cost_usd=0.003 * turns)}
    safe = clinician.replace("/", "__")
    conv = Conversation(conversation_id=f"{profile.profile_id}.{safe}.minimal.prompted.t{trial}", profile_id=profile.profile_id,
                        phenotype=profile.phenotype, clinician=clinician, patient="offline/patient", trial=trial,
                        opening=f"Hi, I'm here because of my {profile.presenting.label}.", turns=records, usage=usage)
    return conv, plan


def make_judgment(conv: Conversation, profile: Profile, plan: list[tuple[str | None, str]], judge: str,
                  rng: random.Random, noise: float = 0.0) -> Judgment:
    hidden = profile.hidden_domains
    bleed_domain = hidden[-1] if rng.random() < 0.15 else None
    turns = [TurnJudgment(turn=0, question_type="other", domains={
        d: DomainLabel(asked_about=False, disclosed=False, reasoning="The opening only covers the presenting concern.") for d in hidden})]
    for number, (asked, qtype) in enumerate(plan, start=1):
        labels = {}
        for d in hidden:
            a = d == asked
            s = a or (d == bleed_domain and number == 3)
            if noise and rng.random() < noise:
                a = not a
            why = (f"The clinician asks specifically about {label(d)} and the patient confirms it." if a and s else
                   f"The clinician asks about {label(d)}; the patient does not describe it." if a else
                   f"The patient mentions {label(d)} without being asked about it." if s else
                   f"Turn {number} does not touch {label(d)}.")
            labels[d] = DomainLabel(asked_about=a, disclosed=s, reasoning=why)
        faithful = not (bleed_domain and number == 3)
        if noise and rng.random() < noise:
            qtype = "open" if qtype != "open" else "clarifying"
        turns.append(TurnJudgment(turn=number, question_type=qtype, patient_faithful=faithful, domains=labels,
                                  reasoning=f"Turn {number} is {qtype}."))
    return Judgment(conversation_id=conv.conversation_id, judge=judge, clinician=conv.clinician, profile_id=profile.profile_id,
                    phenotype=profile.phenotype, turns=turns, usage=Usage(calls=len(turns), prompt_tokens=1500 * len(turns),
                                                                         completion_tokens=200 * len(turns), cost_usd=0.001 * len(turns)))


def synth_run(root: Path, *, n_profiles: int = 10, clinicians=("offline/screener", "offline/anchored"),
              judges=("offline/judge", "cross-judge"), turns: int = 12, failures: int = 0, judge_errors: int = 0,
              seed: str = "synth") -> RunPaths:
    """Write profiles.jsonl, conversations/*.jsonl, judgments/*/*.jsonl (and a manifest) under root."""
    import json

    paths = RunPaths(root)
    rng = random.Random(seed)
    profiles = [make_profile(i, rng) for i in range(n_profiles)]
    with JsonlWriter(paths.profiles) as out:
        for profile in profiles:
            out.write(profile)
    for clinician in clinicians:
        writers = {j: JsonlWriter(paths.judgments(j, clinician)) for j in judges}
        with JsonlWriter(paths.conversations(clinician)) as out:
            for i, profile in enumerate(profiles):
                conv, plan = make_conversation(profile, clinician, turns, rng)
                if i < failures:
                    conv.status, conv.termination, conv.error = "model_error", "model_error", "HTTP 500 after 6 attempts"
                    conv.turns = conv.turns[:4]
                out.write(conv)
                if conv.status != "ok":
                    continue
                for k, judge in enumerate(judges):
                    judgment = make_judgment(conv, profile, plan, judge, random.Random(f"{seed}|{conv.conversation_id}"),
                                             noise=0.0 if k == 0 else 0.04)
                    if k == 0 and i >= failures and i < failures + judge_errors:
                        judgment.status, judgment.errors = "judge_error", ["turn 5: invalid JSON after repair"]
                    writers[judge].write(judgment)
        for writer in writers.values():
            writer.close()
    manifest = {"schema_version": 1, "run_name": root.name, "created": "2026-11-21T20:00:00+00:00",
                "updated": "2026-11-21T21:00:00+00:00", "config_hash": "ab12cd34" * 8,
                "versions": {"intake-eval": "0.1.0", "python": "3.11"},
                "models": {"clinician": [{"alias": c, "model": c} for c in clinicians], "patient": [{"alias": "offline/patient", "model": "offline/patient"}],
                           "judge": [{"alias": j, "model": j} for j in judges]},
                "stages": {"generate": {"status": "done", "config_hash": "1" * 64, "finished": "2026-11-21T20:10:00+00:00"},
                           **{f"judge:{j}": {"status": "done", "config_hash": "2" * 64} for j in judges}},
                "judges": {"primary": judges[0]} if judges else {}}
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.manifest.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return paths
