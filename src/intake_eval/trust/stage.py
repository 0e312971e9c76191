"""The patient QC stage (``qc-patient <patient> <mode> [<style>] <judge>`` in the manifest): the simulated
patient probed outside any interview, resuming probes already judged ok.

Shared by `intake-eval qc-patient` and the study (which gates on its result before any
conversation). The probing, judging and summaries are ``trust.patient_qc``'s; this is the stage
around them: settings, registration, resume, the record file and the manifest entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator

from intake_eval.core.limits import MAX_CONCURRENCY, MAX_PROFILES
from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES, style_prompt_names
from intake_eval.core.progress import ProgressBar
from intake_eval.core.records import PatientMode, PatientProbe, Profile
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import JsonlWriter, RunPaths, compact, file_hash, stable_hash
from intake_eval.interview.plan import PATIENT_PROMPTS, load_profiles
from intake_eval.judge.judging import JUDGE_PROMPTS
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.registry import ModelsFiles
from intake_eval.runner.protocol import run_in_folder
from intake_eval.runner.settings import StageSettings
from intake_eval.runner.stage import StageRunner
from intake_eval.trust.patient_qc import (
    QCContext,
    QCResult,
    existing_records,
    run_probes,
    summarize,
)
from intake_eval.trust.qc_tables import write_qc_metrics
from intake_eval.trust.patient_qc_kind import qc_patient_stage_name
from intake_eval.trust.probes import DEFAULT_PROBES, Probe, choose_profiles, load_probe_config, plan_probes

DEFAULT_QC_JUDGE = "offline/judge"


class QCSettings(StageSettings):
    """Which patient is probed, on how many profiles, judged by whom."""

    FLAGS: ClassVar[dict[str, str]] = {"mode": "--patient-mode", "style": "--patient-style"}

    patient: str
    mode: PatientMode = "prompted"
    judge: str = DEFAULT_QC_JUDGE
    tracker: str | None = None  # tracked mode; without one, the offline classifier decides unlocks
    n: Annotated[int, Field(ge=1, le=MAX_PROFILES, description="profiles to probe (bounded like generate --n)")] = 10
    probes: Path = DEFAULT_PROBES
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 8
    style: str = DEFAULT_STYLE  # how the patient speaks (core/patient_styles.py)

    @field_validator("style")
    @classmethod
    def _known_style(cls, style: str) -> str:
        if style not in STYLES:
            raise ValueError(f"choose one of {', '.join(STYLES)}")
        return style

    @property
    def roles(self) -> dict[str, str]:
        """role → alias of every model the probes call."""
        names = {"patient": self.patient, "judge": self.judge}
        if self.mode == "tracked" and self.tracker:
            names["tracker"] = self.tracker
        return names


def qc_stage_name(settings: QCSettings) -> str:
    return qc_patient_stage_name(settings.patient, settings.mode, settings.judge, settings.style)


@dataclass
class QCPlan:
    """Every probe of the chosen profiles, those still to run, and those already judged ok."""

    stage: str
    target: Path
    profiles: list[Profile]
    probes: list[tuple[Profile, Probe]]
    todo: list[tuple[Profile, Probe]]
    done: dict[str, PatientProbe]
    specs: dict[str, ModelSpec]
    fresh: list[PatientProbe] | None = None


class QCStage:
    """Patient QC as a stage: plan the probes, run them (records written as judged), summarize."""

    def __init__(self, settings: QCSettings, *, force: bool = False):
        self.settings = settings
        self.force = force

    def models(self) -> list[str | None]:
        return [self.settings.patient, self.settings.judge,
                self.settings.tracker if self.settings.mode == "tracked" else None]

    def plan(self, runner: StageRunner) -> QCPlan:
        settings, paths = self.settings, runner.paths
        names = settings.roles
        resolved = runner.resolve(names.values())
        specs = {role: resolved[alias] for role, alias in names.items()}
        config = load_probe_config(settings.probes, runner.catalog)
        profiles = choose_profiles(load_profiles(paths), settings.n)
        probes = [(profile, probe) for profile in profiles
                  for probe in plan_probes(profile, runner.catalog, config, settings.probes)]
        target = paths.qc_patient(settings.patient, settings.mode, settings.style)
        stage = qc_stage_name(settings)
        stage_config = {"patient": settings.patient, "mode": settings.mode, "judge": settings.judge,
                        "probes": file_hash(settings.probes)[:16], "probes_file": str(settings.probes)}
        if settings.style != DEFAULT_STYLE:  # absent for the default, so earlier QC stages resume
            stage_config["patient_style"] = settings.style
        runner.begin(stage, stage_config, force=self.force, outputs=[target],
                     models={role: {names[role]: spec} for role, spec in specs.items()},
                     prompts=[*PATIENT_PROMPTS[settings.mode], *style_prompt_names([settings.style]), *JUDGE_PROMPTS])
        done = {k: r for k, r in existing_records(paths, settings.patient, settings.mode, settings.style).items()
                if r.status == "ok"}
        todo = [(p, probe) for p, probe in probes if f"{probe.probe_id}|{settings.judge}" not in done]
        return QCPlan(stage=stage, target=target, profiles=profiles, probes=probes, todo=todo, done=done, specs=specs)

    def run(self, runner: StageRunner, plan: QCPlan) -> bool:
        settings, pool = self.settings, runner.pool
        tracker = settings.roles.get("tracker")
        ctx = QCContext(settings.patient, settings.mode, settings.judge, pool.get(settings.patient),
                        pool.get(settings.judge), pool.get(tracker) if tracker else None, runner.catalog,
                        style=settings.style)
        progress = ProgressBar(runner.console, "patient QC", len(plan.probes), len(plan.probes) - len(plan.todo))
        with JsonlWriter(plan.target) as writer:
            plan.fresh, interrupted = runner.run(lambda: run_probes(ctx, plan.todo, write=writer.write,
                                                                    concurrency=settings.concurrency,
                                                                    on_done=lambda record: progress.advance()),
                                                 progress)
        return interrupted

    def finish(self, runner: StageRunner, plan: QCPlan, *, interrupted: bool) -> QCResult | None:
        """The summary (None when interrupted: the probes written are kept for a resume)."""
        settings = self.settings
        compact(plan.target, "key")
        if interrupted or plan.fresh is None:
            runner.finish(plan.stage, status="interrupted")
            return None
        by_key = {**plan.done, **{r.key: r for r in plan.fresh}}
        records = [by_key[f"{probe.probe_id}|{settings.judge}"] for _, probe in plan.probes]
        result = summarize(records, patient=settings.patient, patient_model=plan.specs["patient"].model,
                           mode=settings.mode, judge=settings.judge, style=settings.style)
        result.records_path = plan.target
        result.metrics_path = write_qc_metrics(runner.paths, result, records, plan.profiles)
        failed = sum(result.errors.values())
        runner.finish(plan.stage, status="done" if not failed else "incomplete",
                      counts={"probes": len(plan.probes), "profiles": len(plan.profiles), "ran": len(plan.fresh),
                              "skipped": len(plan.probes) - len(plan.todo), "failed": failed},
                      extra={"summary": {row["metric"]: row["rate"] for row in result.rows()},
                             "plan_hash": stable_hash([probe.probe_id for _, probe in plan.probes])[:16]})
        return result


def execute_qc(paths: RunPaths, settings: QCSettings, *, models_file: ModelsFiles = None, use_cache: bool = True,
               force: bool = False, console: object = None, kinds: StageKinds) -> QCResult | None:
    """Patient QC as the CLI runs it: its own runner; Ctrl-C is raised after the stage is finished."""
    return run_in_folder(paths, QCStage(settings, force=force), kinds=kinds, models_file=models_file, use_cache=use_cache,
                         console=console)
