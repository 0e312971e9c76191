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
import csv
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.catalog.load import load_catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.numbers import csv_cell
from intake_eval.core.progress import ProgressBar
from intake_eval.core.records import (
    PatientMode,
    Conversation,
    ConversationTurn,
    PatientProbe,
    Profile,
)
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    JsonlWriter,
    RunPaths,
    compact,
    file_hash,
    iter_records,
    stable_hash,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.interview.participants import (
    PatientSetup,
    patient_opening,
    patient_reply,
)
from intake_eval.interview.plan import PATIENT_PROMPTS, load_profiles
from intake_eval.judge.judging import JUDGE_PROMPTS, judge_conversation
from intake_eval.llm.base import ModelCallError, UsageMeter
from intake_eval.llm.registry import ModelsFiles
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import wilson_interval
from intake_eval.runner.stage import StageRunner
from intake_eval.trust.patient_qc_kind import qc_patient_stage_name
from intake_eval.trust.probes import (
    DEFAULT_PROBES,
    Probe,
    choose_profiles,
    decoy_profile,
    load_probe_config,
    plan_probes,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.llm.base import ChatModel

QC_METRICS = "patient_qc"
QC_DOMAIN_METRICS = "patient_qc_domains"
QC_DOMAIN_COLUMNS = ["patient", "patient_model", "patient_mode", "judge", "metric", "domain", "successes", "n", "rate",
                     "ci_low", "ci_high"]
METRICS: dict[str, str] = {"direct": "disclosure_recall", "open": "leak_rate", "absent": "invention_rate"}
QC_COLUMNS = ["patient", "patient_model", "patient_mode", "judge", "metric", "successes", "n", "rate", "ci_low",
              "ci_high", "profiles", "errors"]


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


async def _opening(ctx: QCContext, profile: Profile):
    if profile.profile_id not in ctx.openings:
        setup = PatientSetup(profile=profile, mode=ctx.mode, model=ctx.patient_model, tracker=ctx.tracker)
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
                patient_model=ctx.patient_model.spec.model, patient_mode=ctx.mode, judge=ctx.judge,
                judge_model=ctx.judge_model.spec.model)
    try:
        opening, opening_result, state = await _opening(ctx, profile)
        setup = PatientSetup(profile=profile, mode=ctx.mode, model=ctx.patient_model, tracker=ctx.tracker)
        reply = await patient_reply(setup, state, 1, probe.text)
    except ModelCallError as exc:
        if exc.kind == "fatal":
            raise
        return PatientProbe(**base, status=f"patient_error: {exc.kind}", error=exc.format_message())
    usage = {"patient": _usage([reply.result, *reply.tracker_results])}
    conversation = Conversation(
        conversation_id=f"qc.{probe.probe_id}", profile_id=profile.profile_id, phenotype=profile.phenotype,
        clinician="qc-probe", patient=ctx.patient, patient_mode=ctx.mode, max_turns=1, opening=opening,
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

@dataclass(frozen=True)
class Rate:
    successes: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def ci(self) -> tuple[float | None, float | None]:
        return wilson_interval(self.successes, self.n)


@dataclass
class QCResult:
    patient: str
    patient_model: str
    mode: str
    judge: str
    profiles: int
    rates: dict[str, Rate]  # metric name → counts
    errors: dict[str, int]  # kind → probes that failed (patient or judge error), excluded from rates
    records_path: Path | None = None
    metrics_path: Path | None = None

    @property
    def disclosure_recall(self) -> float | None:
        return self.rates["disclosure_recall"].rate

    @property
    def leak_rate(self) -> float | None:
        return self.rates["leak_rate"].rate

    @property
    def invention_rate(self) -> float | None:
        return self.rates["invention_rate"].rate

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for kind, metric in METRICS.items():
            rate = self.rates[metric]
            low, high = rate.ci
            rows.append({"patient": self.patient, "patient_model": self.patient_model, "patient_mode": self.mode,
                         "judge": self.judge, "metric": metric, "successes": rate.successes, "n": rate.n,
                         "rate": rate.rate, "ci_low": low, "ci_high": high, "profiles": self.profiles,
                         "errors": self.errors.get(kind, 0)})
        return rows


def summarize(records: list[PatientProbe], *, patient: str, patient_model: str, mode: str, judge: str) -> QCResult:
    counts = {metric: [0, 0] for metric in METRICS.values()}
    errors: dict[str, int] = defaultdict(int)
    for record in records:
        if record.status != "ok" or record.outcome is None:
            errors[record.kind] += 1
            continue
        tally = counts[METRICS[record.kind]]
        tally[0] += int(record.outcome)
        tally[1] += 1
    return QCResult(patient, patient_model, mode, judge, len({r.profile_id for r in records}),
                    {m: Rate(k, n) for m, (k, n) in counts.items()}, dict(errors))


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


def domain_rows(records: list[PatientProbe], hidden: dict[str, list[str]], result: QCResult) -> list[dict[str, Any]]:
    """Per domain: direct probes disclosed, open probes that leaked it (of those where it was hidden),
    absent probes that invented it — which domains the patient gets wrong."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        if record.status != "ok" or record.outcome is None:
            continue
        if record.kind == "open":
            for domain in hidden.get(record.profile_id, []):
                tally = counts[(METRICS["open"], domain)]
                tally[0] += int(domain in record.disclosed)
                tally[1] += 1
        else:
            tally = counts[(METRICS[record.kind], record.target)]
            tally[0] += int(record.outcome)
            tally[1] += 1
    rows = []
    for (metric, domain), (k, n) in sorted(counts.items()):
        low, high = wilson_interval(k, n)
        rows.append({"patient": result.patient, "patient_model": result.patient_model, "patient_mode": result.mode,
                     "judge": result.judge, "metric": metric, "domain": domain, "successes": k, "n": n,
                     "rate": k / n if n else None, "ci_low": low, "ci_high": high})
    return rows


def write_qc_table(paths: RunPaths, name: str, columns: list[str], result: QCResult,
                   rows: list[dict[str, Any]]) -> Path:
    """Replace this (patient, mode, judge)'s rows in metrics/<name>.csv, keeping the other patients'."""
    target = paths.metrics(name)
    kept = []
    if target.exists():
        with open(target, newline="", encoding="utf-8") as handle:
            kept = [row for row in csv.DictReader(handle)
                    if (row.get("patient"), row.get("patient_mode"), row.get("judge")) != (result.patient, result.mode, result.judge)]
    merged = kept + [{k: csv_cell(v) for k, v in row.items()} for row in rows]
    merged.sort(key=lambda r: (r["patient"], r["patient_mode"], r["judge"], r["metric"], r.get("domain", "")))
    return write_csv(target, columns, merged)


def write_qc_metrics(paths: RunPaths, result: QCResult, records: list[PatientProbe] | None = None,
                     profiles: list[Profile] | None = None) -> Path:
    """metrics/patient_qc.csv (and, given the records, metrics/patient_qc_domains.csv)."""
    if records is not None and profiles is not None:
        hidden = {p.profile_id: p.hidden_domains for p in profiles}
        write_qc_table(paths, QC_DOMAIN_METRICS, QC_DOMAIN_COLUMNS, result, domain_rows(records, hidden, result))
    return write_qc_table(paths, QC_METRICS, QC_COLUMNS, result, result.rows())


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


def existing_records(paths: RunPaths, patient: str, mode: str) -> dict[str, PatientProbe]:
    return {r.key: r for r in iter_records(paths.qc_patient(patient, mode), PatientProbe)}


@dataclass
class QCSettings:
    patient: str
    mode: str = "prompted"
    judge: str = "offline/judge"
    tracker: str | None = None  # tracked mode; default: the patient model (offline: the classifier)
    n: int = 10
    probes: Path = DEFAULT_PROBES
    concurrency: int = 8


def qc_stage_name(settings: QCSettings) -> str:
    return qc_patient_stage_name(settings.patient, settings.mode, settings.judge)


def execute_qc(paths: RunPaths, settings: QCSettings, *, models_file: ModelsFiles = None, use_cache: bool = True,
               force: bool = False, console: Any = None, kinds: StageKinds) -> QCResult:
    """Patient QC as the CLI runs it: its own stage runner (lock, guards, pool)."""
    names = [settings.patient, settings.judge, settings.tracker if settings.mode == "tracked" else None]
    with StageRunner(paths, kinds=kinds, models_file=models_file, use_cache=use_cache, console=console, models=names) as runner:
        return run_patient_qc(runner, settings, force=force)


def run_patient_qc(runner: StageRunner, settings: QCSettings, *, force: bool = False) -> QCResult:
    """The whole patient QC under a runner: validate, plan, run (resuming probes already judged),
    write, summarize. The study hands its own runner, so QC shares its lock and manifest."""
    paths = runner.paths
    if settings.mode not in PATIENT_PROMPTS:
        raise IntakeEvalError(f"--patient-mode {settings.mode}: choose one of {', '.join(PATIENT_PROMPTS)}")
    mode: PatientMode = "tracked" if settings.mode == "tracked" else "prompted"  # validated just above
    if settings.n < 1:
        raise IntakeEvalError(f"--n {settings.n}: must be at least 1")
    names = {"patient": settings.patient, "judge": settings.judge}
    if settings.mode == "tracked" and settings.tracker:
        names["tracker"] = settings.tracker
    specs = runner.resolve(names.values())
    roles = {role: specs[alias] for role, alias in names.items()}
    catalog = runner.catalog if runner.catalog is not None else load_catalog()
    config = load_probe_config(settings.probes, catalog)
    profiles = choose_profiles(load_profiles(paths), settings.n)
    plan = [(profile, probe) for profile in profiles for probe in plan_probes(profile, catalog, config, settings.probes)]
    target = paths.qc_patient(settings.patient, settings.mode)
    stage = qc_stage_name(settings)
    stage_config = {"patient": settings.patient, "mode": settings.mode, "judge": settings.judge,
                    "probes": file_hash(settings.probes)[:16], "probes_file": str(settings.probes)}
    runner.begin(stage, stage_config, force=force, outputs=[target],
                 models={role: {names[role]: spec} for role, spec in roles.items()},
                 prompts=[*PATIENT_PROMPTS[settings.mode], *JUDGE_PROMPTS])
    done = {k: r for k, r in existing_records(paths, settings.patient, settings.mode).items() if r.status == "ok"}
    todo = [(p, probe) for p, probe in plan if f"{probe.probe_id}|{settings.judge}" not in done]
    pool = runner.pool
    ctx = QCContext(settings.patient, mode, settings.judge, pool.get(settings.patient),
                    pool.get(settings.judge), pool.get(names["tracker"]) if "tracker" in names else None, catalog)
    progress = ProgressBar(runner.console, "patient QC", len(plan), len(plan) - len(todo))
    with JsonlWriter(target) as writer:
        fresh, interrupted = runner.run(lambda: run_probes(ctx, todo, write=writer.write,
                                                           concurrency=settings.concurrency,
                                                           on_done=lambda record: progress.advance()), progress)
    compact(target, "key")
    if interrupted:
        runner.finish(stage, status="interrupted")
        raise KeyboardInterrupt
    assert fresh is not None  # the runner returns no result only when interrupted
    by_key = {**done, **{r.key: r for r in fresh}}
    records = [by_key[f"{probe.probe_id}|{settings.judge}"] for _, probe in plan]
    result = summarize(records, patient=settings.patient, patient_model=roles["patient"].model,
                       mode=settings.mode, judge=settings.judge)
    result.records_path = target
    result.metrics_path = write_qc_metrics(paths, result, records, profiles)
    failed = sum(result.errors.values())
    runner.finish(stage, status="done" if not failed else "incomplete",
                  counts={"probes": len(plan), "profiles": len(profiles), "ran": len(fresh),
                          "skipped": len(plan) - len(todo), "failed": failed},
                  extra={"summary": {row["metric"]: row["rate"] for row in result.rows()},
                         "plan_hash": stable_hash([probe.probe_id for _, probe in plan])[:16]})
    return result
