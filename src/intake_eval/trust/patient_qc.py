"""Patient QC: does the simulated patient obey the disclosure rule? Measured before a study.

For a sample of profiles the patient gives its opening, then answers fixed probes, each a fresh
one-question exchange (configs/qc_probes.yaml):
- direct: a specific question per hidden domain — must disclose (disclosure recall);
- open: open invitations — must reveal no hidden domain (leak rate);
- absent: specific questions about domains the profile lacks — must deny (invention rate). The
  judge labels the reply against the hidden domains plus the absent domain (added as a decoy with
  the catalog's symptom list), so "disclosed" on the decoy means the patient invented it.
Replies are judged with the chosen judge (the same code path as the judge stage, turn 1 of a
one-turn conversation). Rates come with counts and Wilson 95 % intervals; the probes of one
profile are not independent, so treat the intervals as a lower bound on the uncertainty.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.records import (
    PatientMode,
    Conversation,
    ConversationTurn,
    PatientProbe,
    Profile,
)
from intake_eval.core.store import (
    RunPaths,
    iter_records,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.interview.participants import (
    PatientSetup,
    patient_opening,
    patient_reply,
)
from intake_eval.judge.judging import judge_conversation
from intake_eval.llm.base import ModelCallError, UsageMeter
from intake_eval.trust.qc_population import probe_population
from intake_eval.trust.qc_result import METRICS, QCResult, Rate
from intake_eval.trust.probes import (
    Probe,
    decoy_profile,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.llm.base import ChatModel

# ---------------------------------------------------------------- running one probe

@dataclass
class QCContext:
    patient: str
    mode: PatientMode
    judge: str
    patient_model: "ChatModel"
    judge_model: "ChatModel"
    tracker: "ChatModel | None"
    catalog: "Catalog"
    openings: dict[str, asyncio.Future] = field(default_factory=dict)
    style: str = DEFAULT_STYLE


async def _opening(ctx: QCContext, profile: Profile):
    if profile.profile_id not in ctx.openings:
        setup = PatientSetup(profile=profile, mode=ctx.mode, model=ctx.patient_model, tracker=ctx.tracker,
                             style=ctx.style)
        ctx.openings[profile.profile_id] = asyncio.ensure_future(patient_opening(setup))
    return await asyncio.shield(ctx.openings[profile.profile_id])


def _usage(result: Any) -> Any:
    meter = UsageMeter()
    for item in result if isinstance(result, list) else [result]:
        meter.add(item)
    return meter.to_usage()


async def run_probe(ctx: QCContext, profile: Profile, probe: Probe) -> PatientProbe:
    """Opening, the probe, the patient's reply, and the judge's labels of that reply."""

    base: dict[str, Any] = dict(key=f"{probe.probe_id}|{ctx.judge}", probe_id=probe.probe_id, kind=probe.kind, target=probe.target,
                probe=probe.text, profile_id=profile.profile_id, phenotype=profile.phenotype, patient=ctx.patient,
                patient_model=ctx.patient_model.spec.model, patient_mode=ctx.mode, patient_style=ctx.style,
                judge=ctx.judge,
                judge_model=ctx.judge_model.spec.model)
    try:
        opening, opening_result, state = await _opening(ctx, profile)
        setup = PatientSetup(profile=profile, mode=ctx.mode, model=ctx.patient_model, tracker=ctx.tracker,
                             style=ctx.style)
        reply = await patient_reply(setup, state, 1, probe.text)
    except ModelCallError as exc:
        if exc.kind == "fatal":
            raise
        return PatientProbe(**base, status=f"patient_error: {exc.kind}", error=exc.format_message())
    usage = {"patient": _usage([reply.result, *reply.tracker_results])}
    conversation = Conversation(
        conversation_id=f"qc.{probe.probe_id}", profile_id=profile.profile_id, phenotype=profile.phenotype,
        clinician="qc-probe", patient=ctx.patient, patient_mode=ctx.mode, patient_style=ctx.style, max_turns=1,
        opening=opening,
        turns=[ConversationTurn(turn=1, clinician=probe.text, patient=reply.text, tracker=reply.tracker)])
    judged = decoy_profile(profile, probe.target, ctx.catalog) if probe.kind == "absent" else profile
    judgment = await judge_conversation(conversation, judged, ctx.judge_model, "per-turn", judge=ctx.judge,
                                        catalog=ctx.catalog)
    usage["judge"] = judgment.usage
    record = dict(base, opening=opening, reply=reply.text, tracker=reply.tracker, usage=usage)
    turn = next((t for t in judgment.turns if t.turn == 1), None)
    if not judgment.ok or turn is None:
        if judgment.status.startswith("provider_error") and "fatal" in judgment.status:
            raise IntakeEvalError(f"judge {ctx.judge}: {'; '.join(judgment.errors) or judgment.status}")
        return PatientProbe(**record, status=judgment.status if not judgment.ok else "judge_error",
                            error="; ".join(judgment.errors) or "the judge returned no label for the probe's turn")
    disclosed = sorted(d for d, label in turn.domains.items() if label.disclosed)
    target = turn.domains.get(probe.target)
    if probe.kind == "open":
        outcome = any(d in profile.hidden_domains for d in disclosed)
    else:
        outcome = bool(target and target.disclosed)
    return PatientProbe(**record, target_asked_about=target.asked_about if target else None, disclosed=disclosed,
                        patient_faithful=turn.patient_faithful, outcome=outcome)


# ---------------------------------------------------------------- summary

def summarize(records: list[PatientProbe], *, patient: str, patient_model: str, mode: str, judge: str,
              style: str = DEFAULT_STYLE) -> QCResult:
    counts = {metric: [0, 0] for metric in METRICS.values()}
    errors: dict[str, int] = defaultdict(int)
    for record in records:
        if record.status != "ok" or record.outcome is None:
            errors[record.kind] += 1
            continue
        tally = counts[METRICS[record.kind]]
        tally[0] += int(record.outcome)
        tally[1] += 1
    result = QCResult(patient, patient_model, mode, judge, len({r.profile_id for r in records}),
                      {m: Rate(k, n) for m, (k, n) in counts.items()}, dict(errors), style=style)
    result.population = probe_population(records, result)
    return result


def qc_gate(result: QCResult, max_leak_rate: float | None, *, min_recall: float | None = None) -> None:
    """Refuse (IntakeEvalError) when the patient leaks more than allowed, or discloses too little when
    asked directly (a patient that never discloses would pass a leak-only gate)."""
    who = f"patient {result.patient} ({result.mode}, judged by {result.judge})"
    leak, recall = result.rates["leak_rate"], result.rates["disclosure_recall"]
    for limit, rate, probes, what in ((max_leak_rate, leak, "open-invitation", "leak"), (min_recall, recall, "direct", "recall")):
        if limit is not None and rate.n == 0:
            raise IntakeEvalError(f"{who}: patient QC has no judged {probes} probes; cannot check the {what} threshold")
    if max_leak_rate is not None and leak.rate is not None and leak.rate > max_leak_rate:
        raise IntakeEvalError(f"{who}: leak rate {leak.rate:.1%} ({leak.successes}/{leak.n}) is above the allowed "
                              f"{max_leak_rate:.1%}; the patient reveals hidden domains without being asked "
                              "(see metrics/patient_qc.csv and qc/)")
    if min_recall is not None and recall.rate is not None and recall.rate < min_recall:
        raise IntakeEvalError(f"{who}: disclosure recall {recall.rate:.1%} ({recall.successes}/{recall.n}) is below "
                              f"the required {min_recall:.1%}; the patient does not disclose hidden domains when "
                              "asked directly (see metrics/patient_qc.csv and qc/)")


# ---------------------------------------------------------------- the whole QC

async def run_probes(ctx: QCContext, plan: list[tuple[Profile, Probe]], *, write: Callable[[PatientProbe], None],
                     concurrency: int = 8, on_done: Callable[[PatientProbe], None] | None = None) -> list[PatientProbe]:
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(profile: Profile, probe: Probe) -> PatientProbe:
        async with semaphore:
            record = await run_probe(ctx, profile, probe)
        write(record)
        if on_done is not None:
            on_done(record)
        return record

    return await gather_or_cancel(one(profile, probe) for profile, probe in plan)


def existing_records(paths: RunPaths, patient: str, mode: str, style: str = DEFAULT_STYLE) -> dict[str, PatientProbe]:
    return {r.key: r for r in iter_records(paths.qc_patient(patient, mode, style), PatientProbe)}
