"""One config runs the whole study: generate → patient QC → run (+ judge, overlapped) → report.

The study is a short list of named steps (``StudySteps``), each running stage objects (the
``runner.protocol`` stages, built from the settings the config composes) on one ``StageRunner``
held for the whole invocation (one lock, one manifest, one model pool, the same guards as the
stage commands), so stages run by hand and by the study resume each other. The run stage hands
each finished conversation to the judge stage (``study.overlap``); metrics and the report are
rebuilt at the end. The manifest's ``study`` section keeps the config and one history entry per
invocation (calls made, cache hits, dollars paid, wall time); spend over all invocations is summed
from the records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.errors import ConfigChangedError, IntakeEvalError
from intake_eval.core.manifest import now_iso
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.prompts import use_prompts, user_prompts_folder
from intake_eval.core.shard import Shard, shard_from_config
from intake_eval.core.store import RunPaths
from intake_eval.generate.stage import GenerateStage
from intake_eval.interview.stage import RUN_STAGE
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.registry import ModelsFiles, load_model_specs, resolve_spec
from intake_eval.metrics.tables import write_metrics
from intake_eval.metrics.trials import write_trial_metrics
from intake_eval.report.build import build_report
from intake_eval.runner.protocol import execute_stage
from intake_eval.runner.stage import StageRunner
from intake_eval.simulated import check_offline_name, check_offline_role
from intake_eval.stage_kinds import REPORT_STAGE, stage_kinds
from intake_eval.study.config import StudyConfig, find_study_config, load_study_config, with_flags
from intake_eval.study.estimate import StudyEstimate, estimate_study
from intake_eval.study.overlap import run_and_judge_stages
from intake_eval.trust.patient_qc import qc_gate
from intake_eval.trust.qc_population import population_gate
from intake_eval.trust.stage import QCStage

__all__ = ["StudyConfig", "load_study_config", "run_study", "estimate_config", "StudyOutcome", "resolve_roles"]


@dataclass
class StudyOutcome:
    paths: RunPaths
    report_path: Path
    calls: int = 0  # model calls this invocation actually made (cache hits excluded)
    cache_hits: int = 0
    cost_usd: float = 0.0  # billed by this invocation
    saved_by_cache_usd: float = 0.0  # what this invocation's response-cache hits would have cost
    cost_known: bool = True
    counts: dict[str, Any] = field(default_factory=dict)


def resolve_roles(config: StudyConfig, models_file: ModelsFiles) -> dict[str, ModelSpec]:
    """Every alias the study names → its resolved spec (unknown aliases fail here, before any work)."""
    specs = load_model_specs(models_file)
    resolved = {name: resolve_spec(name, specs) for name in config.model_names()}
    for spec in resolved.values():
        check_offline_name(spec.model)
    for patient in config.patient_models():
        check_offline_role("patient", resolved[patient])
    generator = resolved[config.generator]
    for role, aliases in config.roles().items():
        for alias in aliases:
            if role != "generator" and resolved[alias].model == generator.model and not generator.is_offline:
                raise IntakeEvalError(f"generator '{config.generator}' and {role} '{alias}' are the same model "
                                      f"({generator.model}); the generator is held out from every other role")
    return resolved


def estimate_config(config_path: Path, models_file: ModelsFiles = None, catalog_dir: Path | None = None) -> StudyEstimate:
    config = with_flags(load_study_config(config_path), config_path, prompts=user_prompts_folder(), catalog=catalog_dir)
    specs = resolve_roles(config, models_file)
    with use_prompts(config.prompts_folder(), label="prompts_dir:"):
        return estimate_study(config, specs, config.study_catalog())


@dataclass
class StudySteps:
    """The study's stages on one runner, as named steps; each adds its counts to the outcome."""

    config: StudyConfig
    runner: StageRunner
    outcome: StudyOutcome
    force: bool
    shard: Shard | None

    def generate(self) -> None:
        summary = execute_stage(self.runner, GenerateStage(self.config.generate_settings(), force=self.force))
        self.outcome.counts["generate"] = summary.counts()

    def patient_qc(self) -> None:
        """Patient QC before any conversation, per patient model and style: refuse to start when one leaks
        above the limit (each style is its own patient population, gated on its own)."""
        qc = self.config.qc
        if not qc.enabled:
            return
        several_patients, styled = len(self.config.patient_models()) > 1, self.config.patient_styles != [DEFAULT_STYLE]
        outcomes: dict[str, dict[str, float | None]] = {}
        for settings in self.config.qc_settings():
            result = execute_stage(self.runner, QCStage(settings, force=self.force))
            assert result is not None, "an interrupted stage raises"
            qc_gate(result, qc.max_leak_rate, min_recall=qc.min_recall)
            population_gate(result, qc.population_limits())
            key = " ".join(([settings.patient] if several_patients else []) + ([settings.style] if styled else []))
            outcomes[key] = {"leak_rate": result.leak_rate, "disclosure_recall": result.disclosure_recall,
                             "invention_rate": result.invention_rate}
        # one patient model speaking as it always did keeps the shape the counts always had
        self.outcome.counts["qc"] = outcomes[""] if "" in outcomes else outcomes

    def run_and_judge(self, laps: Callable[[str], None]) -> None:
        """The run stage handing each finished conversation to the judge stage, then the forks."""
        self.outcome.counts.update(run_and_judge_stages(self.config, self.runner, force=self.force, laps=laps,
                                                        shard=self.shard))
        skipped = self.runner.paths.unreadable_lines()
        if skipped:
            self.outcome.counts["skipped_inputs"] = skipped

    def report(self) -> None:
        runner, run_counts = self.runner, self.outcome.counts["run"]
        assert runner.manifest is not None  # the runner is entered before any step runs
        runner.begin(REPORT_STAGE, {"stages": runner.manifest.config_hashes(leaving_out=REPORT_STAGE)}, force=True)
        write_metrics(runner.paths, runner.kinds)
        write_trial_metrics(runner.paths)  # metrics/trials.csv when the study repeats trials
        console = runner.console
        say = (lambda step: console.print(f"[dim]report: {step}[/dim]")) if console is not None else None
        self.outcome.report_path = build_report(runner.paths.root, progress=say).index
        runner.finish(REPORT_STAGE, status="done", counts={"conversations_ok": run_counts["ok"]})

    def status(self) -> str:
        run_counts = self.outcome.counts["run"]
        complete = run_counts["ok"] == run_counts["planned"] and not self.outcome.counts.get("skipped_inputs")
        return "done" if complete else "incomplete"


def _history_entry(runner: StageRunner, outcome: StudyOutcome, *, started: str, wall: float, status: str,
                   phases: dict[str, float]) -> dict[str, Any]:
    pool = runner.pool
    meters = pool.usage
    outcome.calls = sum(m.calls - m.cache_hits for m in meters.values())
    outcome.cache_hits = sum(m.cache_hits for m in meters.values())
    # billed by this invocation: the call ledger's count (retried and truncated attempts included)
    billed = pool.ledger.billed_usd if pool.ledger is not None else sum(m.paid_usd for m in meters.values())
    outcome.cost_usd = round(billed, 6)
    outcome.saved_by_cache_usd = round(sum(m.cost_usd - m.paid_usd for m in meters.values()), 6)
    outcome.cost_known = all(m.cost_known for m in meters.values())
    return {
        "started": started, "finished": now_iso(), "status": status, "calls": outcome.calls,
        "cache_hits": outcome.cache_hits, "cost_usd": outcome.cost_usd, "billed_usd": outcome.cost_usd,
        "saved_by_cache_usd": outcome.saved_by_cache_usd, "cost_known": outcome.cost_known,
        "wall_s": round(time.monotonic() - wall, 2), "phases_s": phases,
        "usage": {alias: m.to_usage().model_dump() for alias, m in sorted(meters.items()) if m.calls},
        # every HTTP attempt, retry and give-up per alias, by reason (429, 5xx, timeout, bad_body, …)
        "retries": pool.retry_stats(),
    }


def default_run_dir(config: StudyConfig, shard: Shard | None) -> Path:
    """runs/<name>, or runs/<name>.shard-<i>-of-<N> for one shard of it."""
    name = config.name if shard is None else f"{config.name}.shard-{shard.index}-of-{shard.count}"
    return Path("runs") / name


def _check_same_shard(paths: RunPaths, manifest: dict[str, Any], shard: Shard | None, *, force: bool) -> None:
    """A folder that ran as one shard (or unsharded) resumes only as that: refused before any stage
    runs (the run stage's config guard would refuse it too, after generation and patient QC)."""
    run = manifest.get("stages", {}).get(RUN_STAGE)
    if run is None or force:
        return
    recorded = shard_from_config(run.get("config", {}))
    if recorded != shard:
        was = f"shard {recorded}" if recorded is not None else "unsharded"
        now = f"--shard {shard}" if shard is not None else "no --shard"
        raise ConfigChangedError(f"{paths.root}: this study folder ran {was}, not {now}; rerun with the same --shard, "
                                 "use another --run-dir, or pass --force to start the run over")


def run_study(config_path: Path, *, run_dir: Path | None = None, models_file: ModelsFiles = None,
              force: bool = False, use_cache: bool = True, console: Any = None,
              catalog_dir: Path | None = None, shard: Shard | None = None) -> StudyOutcome:
    """Run (or resume) every stage of the study the config describes. Returns where the report is.
    The config's ``prompts_dir:`` (or the --prompts folder in effect) is in effect for every stage;
    ``catalog_dir`` is the --catalog flag (a config naming ``catalog:`` takes neither flag); with ``shard``,
    only that shard's conversations (the folder is one of N that ``intake-eval merge`` joins)."""
    config = with_flags(load_study_config(Path(config_path)), Path(config_path), prompts=user_prompts_folder(),
                        catalog=catalog_dir)
    with use_prompts(config.prompts_folder(), label="prompts_dir:"):
        return _run_study(config, find_study_config(Path(config_path)), run_dir=run_dir, models_file=models_file,
                          force=force, use_cache=use_cache, console=console, shard=shard)


def _run_study(config: StudyConfig, config_path: Path, *, run_dir: Path | None, models_file: ModelsFiles,
               force: bool, use_cache: bool, console: Any, shard: Shard | None) -> StudyOutcome:
    started, wall = now_iso(), time.monotonic()
    paths = RunPaths(Path(run_dir) if run_dir is not None else default_run_dir(config, shard))
    resolve_roles(config, models_file)  # design errors (leakage, unknown aliases) before the lock
    catalog = config.study_catalog()
    say = console.print if console is not None else (lambda *a, **k: None)
    with StageRunner(paths, kinds=stage_kinds(), models_file=models_file, use_cache=use_cache and config.cache, console=console,
                     catalog=catalog) as runner:
        runner.resolve(config.model_names())  # every missing key named before any work starts
        manifest = runner.manifest
        assert manifest is not None  # set on entering the runner
        _check_same_shard(paths, manifest.data, shard, force=force)
        manifest.record_study(str(config_path), config.model_dump(mode="json"),
                              shard.as_config() if shard is not None else None)
        manifest.record_seed("study", config.seed)
        manifest.save()
        outcome = StudyOutcome(paths=paths, report_path=paths.report_dir / "index.html")
        status, phases, mark = "failed", {}, [wall]

        def lap(phase: str) -> None:  # seconds since the previous phase ended
            now, previous = time.monotonic(), mark[0]
            mark[0] = now
            phases[phase] = round(now - previous, 2)

        steps = StudySteps(config, runner, outcome, force=force, shard=shard)
        try:
            say(f"[bold]study {config.name}[/] → {paths.root}")
            lap("setup")
            steps.generate()
            lap("generate")
            steps.patient_qc()
            steps.run_and_judge(lap)
            steps.report()
            lap("metrics+report")
            status = steps.status()
        except KeyboardInterrupt:
            status = "interrupted"
            say("[yellow]interrupted[/]: finished records are saved; run the same command again to resume.")
            raise
        finally:
            manifest.add_study_history(_history_entry(runner, outcome, started=started, wall=wall, status=status,
                                                      phases=phases))
            manifest.save()
    part = "" if shard is None else f" (shard {shard})"
    say(f"study {config.name}{part}: {outcome.counts.get('run', {}).get('ok', 0)} conversations ok, "
        f"{outcome.calls} model calls this time ({outcome.cache_hits} from cache): billed ${outcome.cost_usd:.4f}, "
        f"saved by the cache ${outcome.saved_by_cache_usd:.4f}")
    return outcome
