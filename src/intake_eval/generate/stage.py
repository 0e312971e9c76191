"""The generate stage: plan → sample (stages 1-5) → render + QC (stage 6) → profiles.jsonl.

Shared by `intake-eval generate` and `intake-eval study`. The caller holds the run lock and owns
the manifest; this registers the stage config (a changed config is refused), records the generator
for the leakage guard, skips profile ids already on disk (resume), writes each finished profile as
one JSON line, reports profiles that never pass QC in render_failures.jsonl, and compacts at the
end so a resumed file is byte-identical to an uninterrupted one. At the end it writes
sampling_rates.csv: cited, design and realised rate of every phenotype × optional domain (rates).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from intake_eval.catalog.snapshot import write_catalog_snapshot
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.manifest import Manifest
from intake_eval.core.progress import ProgressBar
from intake_eval.core.prompts import prompt_hash
from intake_eval.core.records import Profile, RenderFailure
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    JsonlWriter,
    compact,
    done_keys,
    dumps_record,
    iter_json_lines,
    latest_by_key,
    write_text_atomic,
)
from intake_eval.core.tasks import gather_or_cancel
from intake_eval.generate.render import (
    MAX_ATTEMPTS,
    QC_THRESHOLD,
    RENDER_TEMPLATE,
    failure_record,
    render_profile,
)
from intake_eval.generate.dedup import check_symptom_supply
from intake_eval.generate.design import check_designs
from intake_eval.generate.kind import GENERATE_STAGE
from intake_eval.generate.rates import rate_table, rates_csv
from intake_eval.generate.settings import DEFAULT_GENERATE_CONCURRENCY, DEFAULT_GENERATOR, GenerateSettings
from intake_eval.generate.sampling import (
    Mode,
    plan_phenotypes,
    profile_id,
    sample_profile,
)
from intake_eval.llm.registry import ModelsFiles, load_model_specs, resolve_spec
from intake_eval.runner.leakage import GENERATOR_ROLE, assert_generator_is_held_out
from intake_eval.runner.protocol import StageInterrupted, run_in_folder
from intake_eval.runner.stage import StageRunner
from intake_eval.simulated import check_offline_name
from intake_eval.simulated.generator import TEMPLATE as OFFLINE_TEMPLATE

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.core.records import Profile
    from intake_eval.core.store import RunPaths
    from intake_eval.llm.base import ChatModel, ModelSpec

STAGE = GENERATE_STAGE


@dataclass
class GenerateSummary:
    n: int
    written_now: int = 0
    already_done: int = 0
    failed: list[str] = field(default_factory=list)  # profile ids that never passed QC
    failed_now: int = 0
    per_phenotype: dict[str, int] = field(default_factory=dict)  # on disk after the stage
    hidden_counts: dict[int, int] = field(default_factory=dict)
    first_attempt_pass: int = 0
    interrupted: bool = False
    hidden_count: str = "seed"
    rates: list[dict[str, Any]] = field(default_factory=list)  # the rows of sampling_rates.csv

    @property
    def on_disk(self) -> int:
        return sum(self.per_phenotype.values())

    @property
    def qc_pass_rate(self) -> float:
        attempted = self.on_disk + len(self.failed)
        return self.on_disk / attempted if attempted else 1.0

    def counts(self) -> dict[str, int]:
        return {"profiles": self.on_disk, "render_failures": len(self.failed), "written_now": self.written_now,
                "resumed_from_disk": self.already_done}


def stage_config(n: int, mode: str, seed: int, spec: "ModelSpec", catalog: "Catalog", *,
                 max_attempts: int, qc_threshold: float, hidden_count: str = "seed") -> dict[str, Any]:
    """Everything that determines the profiles' content (concurrency does not)."""

    return {
        "n": n, "mode": mode, "seed": seed, "hidden_count": hidden_count,
        "generator": spec.alias or spec.model,
        "generator_model": spec.model,
        "generator_params": {"temperature": spec.temperature, "max_tokens": spec.max_tokens,
                             "reasoning": spec.reasoning, "extra_params": spec.extra_params},
        "catalog": catalog.content_hash,
        "prompt": prompt_hash(config_prompt_name(spec)),
        "max_attempts": max_attempts, "qc_threshold": qc_threshold,
    }


async def _produce(indices: list[int], plan: list[str], seed: int, catalog: "Catalog", model: "ChatModel",
                   generator: str, *, concurrency: int, max_attempts: int, qc_threshold: float,
                   on_profile, on_failure, hidden_count: str = "seed") -> None:
    """``concurrency`` workers, each sampling and rendering one profile at a time; at most
    ``concurrency`` generator calls in flight."""
    semaphore = asyncio.Semaphore(concurrency)
    queue = iter(indices)

    async def worker() -> None:
        for index in queue:  # a shared iterator: each index goes to exactly one worker
            drawn = sample_profile(catalog, plan[index], index, seed, hidden_count=hidden_count)
            rendered = await render_profile(drawn, model, catalog, max_attempts=max_attempts, threshold=qc_threshold,
                                            generator=generator, semaphore=semaphore)
            if rendered.render.qc_passed:
                on_profile(rendered)
            else:
                on_failure(failure_record(rendered, qc_threshold))

    await gather_or_cancel(worker() for _ in range(min(concurrency, max(1, len(indices)))))


def _finish_files(paths: "RunPaths", *, already_compact: bool,
                  drawn: list[tuple[str, str, list[str]]]) -> tuple[dict[str, int], dict[int, int], int, list[str]]:
    """Compact profiles.jsonl (unless a finished earlier run left it compact and nothing was added);
    keep only failures that are still failures. Returns the summary data; fills ``drawn`` with
    (phenotype, presenting, hidden domains) of every profile on disk."""

    if not already_compact:
        compact(paths.profiles, "profile_id")
    per_phenotype: Counter[str] = Counter()
    hidden: Counter[int] = Counter()
    first_try = 0
    done: set[str] = set()
    for data in iter_json_lines(paths.profiles):  # raw dicts: a summary needs no validation pass
        done.add(data["profile_id"])
        per_phenotype[data["phenotype"]] += 1
        hidden[len(data["hidden"])] += 1
        drawn.append((data["phenotype"], data["presenting"]["domain"], [d["domain"] for d in data["hidden"]]))
        first_try += data.get("render", {}).get("attempts", 1) <= 1
    failures = {k: v for k, v in latest_by_key(paths.render_failures, RenderFailure, "profile_id").items() if k not in done}
    if failures:
        write_text_atomic(paths.render_failures, "".join(dumps_record(failures[k]) + "\n" for k in sorted(failures)))
    elif paths.render_failures.exists():
        paths.render_failures.unlink()
    return dict(sorted(per_phenotype.items())), dict(sorted(hidden.items())), first_try, sorted(failures)


@dataclass
class GeneratePlan:
    """The profile indices still to make, the phenotype each index draws from, and the live summary."""

    catalog: "Catalog"
    phenotypes: list[str]
    todo: list[int]
    summary: GenerateSummary
    finished_before: bool  # a finished earlier run left profiles.jsonl compact


class GenerateStage:
    """The generate stage (``generate`` in the manifest): profiles sampled and rendered, resumed by id."""

    name = STAGE

    def __init__(self, settings: GenerateSettings, *, force: bool = False):
        self.settings = settings
        self.force = force

    def models(self) -> list[str | None]:
        return [self.settings.generator]

    def plan(self, runner: StageRunner) -> GeneratePlan:
        settings, paths = self.settings, runner.paths
        assert runner.manifest is not None, "the `with` block opened the manifest"
        catalog = runner.catalog
        check_design(catalog, settings.hidden_count)
        spec = resolve_spec(settings.generator, runner.specs)
        check_offline_name(spec.model)
        # a design error: said before key problems
        assert_generator_is_held_out(runner.manifest, settings.generator, spec.model)
        runner.resolve([settings.generator])
        config = stage_config(settings.n, settings.mode, settings.seed, spec, catalog,
                              max_attempts=settings.max_attempts, qc_threshold=settings.qc_threshold,
                              hidden_count=settings.hidden_count)
        finished_before = runner.manifest.stage_status(STAGE) in ("done", "done_with_failures")
        runner.begin(STAGE, config, force=self.force,
                     outputs=[paths.profiles, paths.render_failures, paths.sampling_rates],
                     models={GENERATOR_ROLE: {settings.generator: spec}}, prompts=[config_prompt_name(spec)],
                     seed=settings.seed)
        write_catalog_snapshot(catalog, paths.root)  # later stages read the catalog the profiles came from
        done = done_keys(paths.profiles, "profile_id")
        todo = [i for i in range(settings.n) if profile_id(i) not in done]
        summary = GenerateSummary(n=settings.n, already_done=settings.n - len(todo),
                                  hidden_count=settings.hidden_count)
        return GeneratePlan(catalog=catalog, phenotypes=plan_phenotypes(catalog, settings.n, settings.mode,
                                                                        settings.seed),
                            todo=todo, summary=summary, finished_before=finished_before)

    def run(self, runner: StageRunner, plan: GeneratePlan) -> bool:
        settings, paths, summary = self.settings, runner.paths, plan.summary
        model = runner.pool.get(settings.generator)
        progress = ProgressBar(runner.console, "generate", settings.n, summary.already_done)
        with JsonlWriter(paths.profiles) as profiles_out, JsonlWriter(paths.render_failures) as failures_out:
            def on_profile(profile: Profile) -> None:
                profiles_out.write(profile)
                summary.written_now += 1
                progress.advance()

            def on_failure(record: RenderFailure) -> None:
                failures_out.write(record)
                summary.failed_now += 1
                progress.advance()

            try:
                _, summary.interrupted = runner.run(lambda: _produce(
                    plan.todo, plan.phenotypes, settings.seed, plan.catalog, model, settings.generator,
                    concurrency=settings.concurrency, max_attempts=settings.max_attempts,
                    qc_threshold=settings.qc_threshold, on_profile=on_profile, on_failure=on_failure,
                    hidden_count=settings.hidden_count), progress)
            except IntakeEvalError as error:  # e.g. a fatal provider error: what was written stays, for a resume
                runner.finish(STAGE, status="failed", counts={"written_now": summary.written_now},
                              extra={"error": str(error).splitlines()[0][:300]})
                raise
        if paths.render_failures.exists() and paths.render_failures.stat().st_size == 0:
            paths.render_failures.unlink()
        return summary.interrupted

    def finish(self, runner: StageRunner, plan: GeneratePlan, *, interrupted: bool) -> GenerateSummary:
        paths, summary = runner.paths, plan.summary
        if interrupted:
            runner.finish(STAGE, status="interrupted", counts={"written_now": summary.written_now})
            return summary
        untouched = plan.finished_before and summary.written_now == 0 and summary.failed_now == 0 and not self.force
        drawn: list[tuple[str, str, list[str]]] = []
        summary.per_phenotype, summary.hidden_counts, summary.first_attempt_pass, summary.failed = _finish_files(
            paths, already_compact=untouched, drawn=drawn)
        summary.rates = rate_table(plan.catalog, self.settings.hidden_count, drawn)
        write_text_atomic(paths.sampling_rates, rates_csv(summary.rates))
        runner.finish(STAGE, status="done" if not summary.failed else "done_with_failures", counts=summary.counts())
        return summary


def check_design(catalog: "Catalog", hidden_count: str) -> None:
    """Refuse, before anything is written, a catalog whose sampling design cannot be built or could
    leave a domain short of symptoms (what `phenotypes validate` reports)."""
    problems = check_designs(catalog, (hidden_count,)) + check_symptom_supply(catalog, (hidden_count,))
    if problems:
        count = len(problems)
        raise IntakeEvalError(f"the catalog cannot be sampled with --hidden-count {hidden_count} "
                              f"({count} problem{'s' if count > 1 else ''}):\n  " + "\n  ".join(problems))


def config_prompt_name(spec: "ModelSpec") -> str:
    return OFFLINE_TEMPLATE if spec.is_offline else RENDER_TEMPLATE


def execute_generate(paths: RunPaths, *, n: int, mode: Mode, seed: int, generator: str = DEFAULT_GENERATOR,
                     models_file: ModelsFiles = None, use_cache: bool = True, force: bool = False, console: Any = None,
                     catalog: Catalog | None = None, concurrency: int = DEFAULT_GENERATE_CONCURRENCY,
                     max_attempts: int = MAX_ATTEMPTS, qc_threshold: float = QC_THRESHOLD,
                     hidden_count: str = "seed", kinds: StageKinds) -> GenerateSummary:
    """The generate stage as the CLI runs it: its own runner; an interrupted one returns its summary."""
    settings = GenerateSettings.from_flags(n=n, mode=mode, seed=seed, generator=generator, concurrency=concurrency,
                                           max_attempts=max_attempts, qc_threshold=qc_threshold,
                                           hidden_count=hidden_count)
    return generate_in_folder(paths, GenerateStage(settings, force=force), models_file=models_file,
                              use_cache=use_cache, console=console, catalog=catalog, kinds=kinds)


def generate_in_folder(paths: RunPaths, stage: GenerateStage, *, models_file: ModelsFiles = None,
                       use_cache: bool = True, console: Any = None, catalog: Catalog | None = None,
                       kinds: StageKinds) -> GenerateSummary:
    """A generate stage in its own runner. The leakage guard is asked before the keys (and again under the lock)."""
    generator = stage.settings.generator
    spec = resolve_spec(generator, load_model_specs(models_file))
    if paths.manifest.exists():
        assert_generator_is_held_out(Manifest(paths), generator, spec.model)
    try:
        return run_in_folder(paths, stage, kinds=kinds, models_file=models_file, use_cache=use_cache,
                             console=console, catalog=catalog)
    except StageInterrupted as stop:
        return stop.outcome
