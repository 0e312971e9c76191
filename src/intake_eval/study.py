"""One config runs the whole study: generate → run → judge → report, each stage resuming.

The run and judge stages overlap: the runner's ``on_done`` puts each finished conversation on an
asyncio queue that judge workers consume, so judging costs little wall time beyond the
conversations. A final sweep (``judging.judge_stage``) judges whatever an earlier, interrupted
invocation left unjudged, then metrics and the report are rebuilt. The run lock is held
throughout; every stage registers its configuration in the manifest, so a changed config is
refused with the difference shown, and ``force`` starts the changed stage over.

The config schema lives in ``study_config.py``, the overlapped run and judge stages in
``study_overlap.py``, the estimate in ``estimate.py``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.store import RunPaths
from intake_eval.study_config import StudyConfig, load_study_config

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


def _usage_by_alias(pool: Any) -> dict:
    return {alias: meter.to_usage() for alias, meter in sorted(pool.usage.items()) if meter.calls}


def _report(paths: RunPaths, console: Any) -> Path:
    from intake_eval.metrics_tables import write_metrics
    from intake_eval.report.build import build_report

    from intake_eval.trials import write_trial_metrics

    write_metrics(paths)
    write_trial_metrics(paths)  # metrics/trials.csv when the study repeats trials
    say = (lambda step: console.print(f"[dim]report: {step}[/dim]")) if console is not None else None
    return build_report(paths.root, progress=say).index


def run_study(config_path: Path, *, run_dir: Path | None = None, models_file: Path | None = None,
              force: bool = False, use_cache: bool = True, console: Any = None) -> StudyOutcome:
    """Run (or resume) every stage of the study the config describes. Returns where the report is."""
    from intake_eval.catalog import load_catalog
    from intake_eval.manifest import Manifest, now_iso
    from intake_eval.models.pool import ModelPool
    from intake_eval.models.registry import preflight
    from intake_eval.store import RunLock, stable_hash
    from intake_eval.study_overlap import run_and_judge_stages

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

        def lap(phase: str) -> None:  # seconds since the previous phase ended
            now, previous = time.monotonic(), mark[0]
            mark[0] = now
            phases[phase] = round(now - previous, 2)

        try:
            say(f"[bold]study {config.name}[/] → {paths.root}")
            lap("setup")
            outcome.counts["generate"] = _generate(config, paths, pool, manifest, catalog, force=force,
                                                   console=console)
            lap("generate")
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
            outcome.counts.update(run_and_judge_stages(config, specs, paths, manifest, pool, catalog, force=force,
                                                       console=console, laps=lap))
            manifest.begin_stage("report", {"stages": {k: v.get("config_hash") for k, v in
                                                      manifest.data["stages"].items() if k != "report"}}, force=True)
            outcome.report_path = _report(paths, console)
            lap("metrics+report")
            run_counts = outcome.counts["run"]
            manifest.finish_stage("report", counts={"conversations_ok": run_counts["ok"]})
            status = "done" if run_counts["ok"] == run_counts["planned"] else "incomplete"
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
                # every HTTP attempt, retry and give-up per alias, by reason (429, 5xx, timeout, bad_body, …)
                "retries": pool.retry_stats(),
            })
            study["last_run"] = study["history"][-1]
            manifest.data["study"] = study
            manifest.save()
            pool.close()
    say(f"study {config.name}: {outcome.counts.get('run', {}).get('ok', 0)} conversations ok, "
        f"{outcome.calls} model calls this time ({outcome.cache_hits} from cache), ${outcome.cost_usd:.4f}")
    return outcome
