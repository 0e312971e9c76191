"""One config runs the whole study: generate → run → judge → report, each stage resuming.

The run and judge stages overlap: the runner's ``on_done`` puts each finished conversation on an
asyncio queue that judge workers consume, so judging costs little wall time beyond the
conversations. A final sweep (``judging.judge_stage``) judges whatever an earlier, interrupted
invocation left unjudged, then metrics and the report are rebuilt. The run lock is held
throughout; every stage registers its configuration in the manifest, so a changed config is
refused with the difference shown, and ``force`` starts the changed stage over.

The config schema lives in ``study_config.py``; the estimate in ``estimate.py``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.study_config import StudyConfig, load_study_config
from intake_eval.store import RunPaths

if TYPE_CHECKING:
    from intake_eval.estimate import StudyEstimate
    from intake_eval.models.base import ModelSpec

__all__ = ["StudyConfig", "load_study_config", "run_study", "estimate_config", "StudyOutcome", "resolve_roles"]


@dataclass
class StudyOutcome:
    paths: RunPaths
    report_path: Path
    calls: int = 0  # model calls this invocation actually made (cache hits excluded)
    cache_hits: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    counts: dict[str, Any] = field(default_factory=dict)


def resolve_roles(config: StudyConfig, models_file: Path | None) -> dict[str, "ModelSpec"]:
    """Every alias the study names → its resolved spec (unknown aliases fail here, before any work)."""
    from intake_eval.models.registry import load_model_specs, resolve_spec

    specs = load_model_specs(models_file)
    resolved = {name: resolve_spec(name, specs) for name in config.model_names()}
    generator = resolved[config.generator]
    for role, aliases in config.roles().items():
        for alias in aliases:
            if role != "generator" and resolved[alias].model == generator.model and not generator.is_offline:
                raise _error(f"generator '{config.generator}' and {role} '{alias}' are the same model "
                             f"({generator.model}); the generator is held out from every other role")
    return resolved


def _error(message: str):
    from intake_eval.errors import IntakeEvalError

    return IntakeEvalError(message)


def estimate_config(config_path: Path, models_file: Path | None = None) -> "StudyEstimate":
    from intake_eval.catalog import load_catalog
    from intake_eval.estimate import estimate_study

    config = load_study_config(config_path)
    specs = resolve_roles(config, models_file)
    return estimate_study(config, specs, load_catalog())


# ---------------------------------------------------------------- stages


def _generate(config: StudyConfig, paths: RunPaths, pool: Any, manifest: Any, catalog: Any, *, force: bool,
              console: Any) -> dict:
    from intake_eval.generate_stage import generate_profiles

    summary = generate_profiles(paths, manifest=manifest, n=config.profiles.n, mode=config.profiles.mode,
                                seed=config.seed, generator=config.generator, pool=pool, force=force,
                                console=console, catalog=catalog, concurrency=config.concurrency)
    if summary.interrupted:
        raise KeyboardInterrupt
    return summary.counts()


def _patient_qc(config: StudyConfig, paths: RunPaths, models_file: Path | None, *, use_cache: bool, force: bool,
                console: Any) -> dict:
    """Patient QC before any conversation: refuse to start when the patient leaks above the limit."""
    from intake_eval.qc import QCSettings, execute_qc, qc_gate

    settings = QCSettings(patient=config.patient.model, mode=config.patient.mode, judge=config.judges[0],
                          tracker=config.patient.tracker, n=config.qc.profiles, concurrency=config.concurrency)
    result = execute_qc(paths, settings, models_file=models_file, use_cache=use_cache, force=force,
                        console=console, lock=False)
    qc_gate(result, config.qc.max_leak_rate)
    return {"leak_rate": result.leak_rate, "disclosure_recall": result.disclosure_recall,
            "invention_rate": result.invention_rate}


def _qc_stage_name(config: StudyConfig) -> str:
    return f"qc-patient {config.patient.model} {config.patient.mode} {config.judges[0]}"


def _run_settings(config: StudyConfig):
    from intake_eval.runner import RunSettings

    return RunSettings(
        clinicians=list(config.clinicians), patient=config.patient.model, patient_mode=config.patient.mode,
        tracker=config.patient.tracker, turns=config.turns, conditions=list(config.conditions),
        trials=config.trials, concurrency=config.concurrency, budget=config.budget,
    )


def _begin_run_stage(config: StudyConfig, specs: dict, paths: RunPaths, manifest: Any, force: bool):
    from intake_eval.prompts import prompt_hashes
    from intake_eval.runner import _record_clinician_models, prompt_names, stage_config

    from intake_eval.leakage import assert_no_generator_leak

    settings = _run_settings(config)
    for role, aliases in config.roles().items():
        if role != "generator":
            assert_no_generator_leak(manifest, role, aliases, specs=specs)
    role_specs = {"patient": specs[config.patient.model]}
    if config.patient.mode == "tracked":
        role_specs["tracker"] = specs[config.patient.tracker] if config.patient.tracker else role_specs["patient"]
    # Judgments, metrics and the report describe the conversations: a run started over takes them along.
    manifest.begin_stage("run", stage_config(settings, role_specs, paths.profiles), force=force,
                         outputs=[paths.conversations_dir, paths.judgments_dir, paths.metrics_dir, paths.report_dir])
    _record_clinician_models(manifest, {alias: specs[alias] for alias in config.clinicians})
    manifest.record_models("patient", [{"alias": config.patient.model, **role_specs["patient"].public_dict()}])
    if "tracker" in role_specs:
        alias = config.patient.tracker or config.patient.model
        manifest.record_models("tracker", [{"alias": alias, **role_specs["tracker"].public_dict()}])
    manifest.record_prompts(prompt_hashes(prompt_names(settings)))
    manifest.save()
    return settings


def _begin_judge_stage(config: StudyConfig, specs: dict, paths: RunPaths, manifest: Any, force: bool,
                       pool: Any) -> list:
    from intake_eval.judging import JUDGE_PROMPTS, JudgeSetup, judge_config, judge_label
    from intake_eval.prompts import prompt_hashes

    setups = []
    for alias in config.judges:
        label = judge_label(alias, config.judge_mode)
        manifest.begin_stage(f"judge:{label}", judge_config(alias, specs[alias].model, config.judge_mode),
                             force=force, outputs=[paths.judge_dir(label)])
        setups.append(JudgeSetup(label=label, alias=alias, model=pool.get(alias), mode=config.judge_mode))
    known = {entry.get("alias"): entry for entry in manifest.data.get("models", {}).get("judge", [])}
    for setup in setups:
        known[setup.alias] = {"alias": setup.alias, "label": setup.label, "mode": setup.mode,
                              **specs[setup.alias].public_dict()}
    manifest.record_models("judge", [known[key] for key in sorted(known)])
    # The first judge of the config is the primary one (the report's numbers); the rest cross-check.
    manifest.data.setdefault("judges", {})["primary"] = setups[0].label
    manifest.record_prompts(prompt_hashes(list(JUDGE_PROMPTS)))
    manifest.save()
    return setups


class _Progress:
    """Two bars on stderr: conversations and judgments, advancing together."""

    def __init__(self, console: Any, conversations: int, judgments: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("[bold]{task.description:<10}[/]"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                                 refresh_per_second=4, disable=console is None)
        self.run = self.progress.add_task("run", total=max(conversations, 1), note="")
        self.judge = self.progress.add_task("judge", total=max(judgments, 1), note="")

    def update_run(self, totals: Any) -> None:
        dollars = f"${totals.dollars:.2f}" + ("" if totals.cost_known else "+")
        self.progress.update(self.run, completed=totals.skipped + totals.ok + totals.failed,
                             total=max(totals.planned, 1),
                             note=f"failed {totals.failed} · in flight {totals.in_flight} · {dollars}")

    def judged(self, errors: int) -> None:
        self.progress.update(self.judge, advance=1, note=f"judge errors {errors}")

    def __enter__(self) -> "_Progress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


async def _run_and_judge(plan: list, settings: Any, setups: list, pool: Any, paths: RunPaths, catalog: Any,
                         profiles: dict, progress: _Progress, judge_workers: int) -> tuple[Any, dict]:
    """Conversations run; each one that finishes ok is judged by every judge right away."""
    from intake_eval.judging import judge_conversation
    from intake_eval.runner import RunTotals, run_conversations
    from intake_eval.store import JsonlWriter

    queue: asyncio.Queue = asyncio.Queue()
    writers: dict[Path, JsonlWriter] = {}
    tally = {"judged": 0, "judge_errors": 0, "provider_errors": 0}

    def on_done(conversation: Any) -> None:
        if conversation.ok:
            for setup in setups:
                queue.put_nowait((setup, conversation))

    async def worker() -> None:
        while True:
            item = await queue.get()
            try:
                if item is None:
                    return
                setup, conversation = item
                judgment = await judge_conversation(conversation, profiles[conversation.profile_id], setup.model,
                                                    setup.mode, judge=setup.label, catalog=catalog)
                out = paths.judgments(setup.label, conversation.clinician)
                if out not in writers:
                    writers[out] = JsonlWriter(out)
                writers[out].write(judgment)
                key = "judged" if judgment.ok else "judge_errors" if judgment.status == "judge_error" else "provider_errors"
                tally[key] += 1
                progress.judged(tally["judge_errors"] + tally["provider_errors"])
            finally:
                queue.task_done()

    workers = [asyncio.create_task(worker()) for _ in range(max(1, judge_workers))]
    totals = RunTotals()
    try:
        await run_conversations(plan, pool, paths=paths, patient=settings.patient, tracker=settings.tracker,
                                concurrency=settings.concurrency, budget=settings.budget, on_done=on_done,
                                totals=totals, on_update=progress.update_run)
        await queue.join()
    finally:
        for _ in workers:
            queue.put_nowait(None)
        await asyncio.gather(*workers, return_exceptions=True)
        for writer in writers.values():
            writer.close()
    return totals, tally


def _judgment_counts(paths: RunPaths, setups: list, conversation_ids: set[str]) -> dict[str, dict[str, int]]:
    from intake_eval.store import iter_json_lines

    counts = {}
    for setup in setups:
        status: dict[str, str] = {}
        for path in sorted((paths.judge_dir(setup.label)).glob("*.jsonl")):
            for data in iter_json_lines(path):
                status[str(data.get("conversation_id"))] = str(data.get("status", "ok"))
        wanted = [status.get(cid) for cid in conversation_ids]
        counts[setup.label] = {
            "done": sum(1 for s in wanted if s == "ok"),
            "judge_errors": sum(1 for s in wanted if s == "judge_error"),
            "failed": sum(1 for s in wanted if s not in (None, "ok", "judge_error")),
            "not_judged": sum(1 for s in wanted if s is None),
        }
    return counts


def _ok_conversation_ids(paths: RunPaths, clinicians: list[str]) -> set[str]:
    from intake_eval.store import done_keys

    ids: set[str] = set()
    for alias in clinicians:
        ids |= done_keys(paths.conversations(alias), "conversation_id")
    return ids


def _records_usage(paths: RunPaths, config: StudyConfig, setups: list) -> tuple[dict, dict]:
    """Usage per model alias summed over the records on disk (every invocation, cached calls free):
    (run stage, judge label → usage)."""
    from intake_eval.records import Usage
    from intake_eval.store import iter_json_lines

    owners = {"patient": config.patient.model, "tracker": config.patient.tracker or config.patient.model}
    run: dict[str, Usage] = {}
    for alias in config.clinicians:
        for data in iter_json_lines(paths.conversations(alias)):
            for role, raw in (data.get("usage") or {}).items():
                owner = alias if role == "clinician" else owners.get(role, role)
                run[owner] = run.get(owner, Usage()).add(Usage.model_validate(raw))
    judged: dict[str, dict[str, Usage]] = {}
    for setup in setups:
        total = Usage()
        for path in sorted((paths.judge_dir(setup.label)).glob("*.jsonl")):
            for data in iter_json_lines(path):
                total = total.add(Usage.model_validate(data.get("usage") or {}))
        judged[setup.label] = {setup.alias: total}
    return run, judged


def _usage_by_alias(pool: Any) -> dict:
    return {alias: meter.to_usage() for alias, meter in sorted(pool.usage.items()) if meter.calls}


def _report(paths: RunPaths, console: Any) -> Path:
    from intake_eval.metrics_tables import write_metrics
    from intake_eval.report.build import build_report

    from intake_eval.trials import write_trial_metrics

    write_metrics(paths)
    write_trial_metrics(paths)  # metrics/trials.csv when the study repeats trials
    say = (lambda step: console.log(f"report: {step}")) if console is not None else None
    return build_report(paths.root, progress=say).index


def run_study(config_path: Path, *, run_dir: Path | None = None, models_file: Path | None = None,
              force: bool = False, use_cache: bool = True, console: Any = None) -> StudyOutcome:
    """Run (or resume) every stage of the study the config describes. Returns where the report is."""
    from intake_eval.catalog import load_catalog
    from intake_eval.judging import judge_stage
    from intake_eval.manifest import Manifest, now_iso
    from intake_eval.models.pool import ModelPool
    from intake_eval.models.registry import preflight
    from intake_eval.runner import compact_conversations, disk_counts, load_profiles, plan_conversations
    from intake_eval.store import RunLock, compact, stable_hash

    started, wall = now_iso(), time.monotonic()
    config = load_study_config(Path(config_path))
    paths = RunPaths(Path(run_dir) if run_dir is not None else Path("runs") / config.name)
    specs = resolve_roles(config, models_file)
    preflight(list(specs.values()))  # every missing key named before any work starts
    catalog = load_catalog()
    say = console.print if console is not None else (lambda *a, **k: None)
    with RunLock(paths):
        manifest = Manifest(paths)
        study = manifest.data.setdefault("study", {})
        study.update({"config_file": str(config_path), "config": config.model_dump(mode="json"),
                      "study_config_hash": stable_hash(config.model_dump(mode="json"))})
        study.setdefault("history", [])
        manifest.record_seed("study", config.seed)
        manifest.save()
        pool = ModelPool(specs, cache_path=paths.cache_db, use_cache=use_cache and config.cache, catalog=catalog)
        outcome = StudyOutcome(paths=paths, report_path=paths.report_dir / "index.html")
        status, extra_calls, phases = "failed", 0, {}
        mark = [wall]

        def _lap() -> float:  # seconds since the previous phase ended
            now, previous = time.monotonic(), mark[0]
            mark[0] = now
            return round(now - previous, 2)

        try:
            say(f"[bold]study {config.name}[/] → {paths.root}")
            phases["setup"] = _lap()
            outcome.counts["generate"] = _generate(config, paths, pool, manifest, catalog, force=force,
                                                   console=console)
            phases["generate"] = _lap()
            if config.qc.enabled:
                manifest.save()
                try:
                    outcome.counts["qc"] = _patient_qc(config, paths, models_file, force=force, console=console,
                                                       use_cache=use_cache and config.cache)
                finally:
                    manifest = Manifest(paths)  # QC wrote its own stage into manifest.json
                    manifest.data["study"] = study
                    qc_usage = manifest.stage(_qc_stage_name(config)).get("usage", {})
                    extra_calls += sum(u.get("calls", 0) - u.get("cache_hits", 0) for u in qc_usage.values())
            settings = _begin_run_stage(config, specs, paths, manifest, force)
            setups = _begin_judge_stage(config, specs, paths, manifest, force, pool)
            profiles_list = load_profiles(paths)
            profiles = {p.profile_id: p for p in profiles_list}
            plan = plan_conversations(profiles_list, settings)
            progress = _Progress(console, len(plan), len(plan) * len(setups))
            already = _judgment_counts(paths, setups, _ok_conversation_ids(paths, settings.clinicians))
            progress.progress.update(progress.judge, completed=sum(c["done"] for c in already.values()))
            with progress:
                totals, _tally = asyncio.run(_run_and_judge(plan, settings, setups, pool, paths, catalog, profiles,
                                                            progress, judge_workers=config.concurrency))
                phases["run+judge"] = _lap()
                compact_conversations(paths, settings.clinicians)
                sweep = asyncio.run(judge_stage(paths, setups, concurrency=config.concurrency, catalog=catalog,
                                                on_done=lambda j: progress.judged(0)))
            for path in paths.judgment_files():  # the overlapped writes, like the sweep's: latest per id, sorted
                compact(path, "conversation_id")
            counts, per_clinician = disk_counts(paths, plan)
            run_usage, judge_usage = _records_usage(paths, config, setups)
            manifest.finish_stage("run", status="done" if counts["ok"] == counts["planned"] else "incomplete",
                                  counts=counts, usage=run_usage,
                                  extra={"per_clinician": per_clinician, "budget_reached": totals.budget_reached})
            judge_counts = _judgment_counts(paths, setups, _ok_conversation_ids(paths, settings.clinicians))
            for setup in setups:
                done = judge_counts[setup.label]
                manifest.finish_stage(f"judge:{setup.label}",
                                      status="done" if done["done"] == counts["ok"] else "incomplete",
                                      counts=done, usage=judge_usage[setup.label],
                                      extra={"aborted": sweep.aborted[setup.label]} if setup.label in sweep.aborted else None)
            outcome.counts.update({"run": counts, "judge": judge_counts})
            manifest.begin_stage("report", {"stages": {k: v.get("config_hash") for k, v in
                                                      manifest.data["stages"].items() if k != "report"}}, force=True)
            phases["judge sweep"] = _lap()
            outcome.report_path = _report(paths, console)
            phases["metrics+report"] = _lap()
            manifest.finish_stage("report", counts={"conversations_ok": counts["ok"]})
            status = "done" if counts["ok"] == counts["planned"] else "incomplete"
        except KeyboardInterrupt:
            status = "interrupted"
            say("[yellow]interrupted[/]: finished records are saved; run the same command again to resume.")
            raise
        finally:
            meters = list(pool.usage.values())
            outcome.calls = sum(m.calls - m.cache_hits for m in meters) + extra_calls
            outcome.cache_hits = sum(m.cache_hits for m in meters)
            outcome.cost_usd = round(sum(m.cost_usd for m in meters), 6)
            outcome.cost_known = all(m.cost_known for m in meters)
            study["history"].append({
                "started": started, "finished": now_iso(), "status": status, "calls": outcome.calls,
                "cache_hits": outcome.cache_hits, "cost_usd": outcome.cost_usd, "cost_known": outcome.cost_known,
                "wall_s": round(time.monotonic() - wall, 2), "phases_s": phases,
                "usage": {alias: u.model_dump() for alias, u in _usage_by_alias(pool).items()},
            })
            study["last_run"] = study["history"][-1]
            manifest.data["study"] = study
            manifest.save()
            pool.close()
    say(f"study {config.name}: {outcome.counts.get('run', {}).get('ok', 0)} conversations ok, "
        f"{outcome.calls} model calls this time ({outcome.cache_hits} from cache), ${outcome.cost_usd:.4f}")
    return outcome
