"""`intake-eval generate`: simulated patient profiles (profiles.jsonl) from the phenotype catalog."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from intake_eval.generate.sampling import Mode

from intake_eval.commands.common import (
    DEFAULT_RUN_DIR,
    CatalogOption,
    ForceOption,
    ModelsOption,
    PromptsOption,
    NoCacheOption,
    RunDirOption,
)


def generate(
    n: Annotated[int, typer.Option("--n", help="Number of profiles (the study: 108 = 6 per phenotype).")] = 108,
    stratified: Annotated[bool, typer.Option(
        "--stratified/--weighted", help="stratified: equal coverage of the 18 phenotypes, in a seeded shuffled "
        "order. weighted: phenotypes drawn by their population weight (clinical-population prior).")] = True,
    seed: Annotated[int, typer.Option("--seed", help="Seed for every draw; the same seed gives byte-identical profiles.")] = 0,
    generator: Annotated[str, typer.Option(
        "--generator", help="Model that writes each domain's first-person phenomenology: offline/generator "
        "(templates, instant) or any alias / provider id (the study: qwen3-235b). It may not play any other role "
        "in this run.")] = "offline/generator",
    explain: Annotated[bool, typer.Option(
        "--explain", help="Walk one profile through the six stages on the terminal (what was drawn and why); "
        "writes nothing.")] = False,
    index: Annotated[int, typer.Option("--index", help="With --explain: which profile index to walk through.")] = 0,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Profiles rendered at once (and generator calls in flight).")] = 8,
    max_attempts: Annotated[int, typer.Option(
        "--max-attempts", help="Render rounds per domain before a profile is reported as a render failure.")] = 3,
    qc_threshold: Annotated[float, typer.Option(
        "--qc-threshold", help="Fuzzy-match score (0-100) each sampled symptom must reach in the rendered text.")] = 85.0,
    catalog_dir: CatalogOption = None,
    hidden_count: Annotated[str, typer.Option(
        "--hidden-count", metavar="seed|literature",
        help="seed: 4-5 hidden domains, optional ones drawn by conditional Poisson sampling with inclusion "
        "probabilities proportional to the cited rates. literature: each optional domain at exactly its cited "
        "rate, so the count varies (at least one hidden). `intake-eval phenotypes rates` shows both.")] = "seed",
    no_cache: NoCacheOption = False,
    force: ForceOption = False,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
    prompts: PromptsOption = None,
) -> None:
    """Generate simulated patient profiles: 1 presenting + 4-5 hidden comorbid domains each.

    Six seeded stages per profile: (1) phenotype, (2) domain set by the phenotype's sampling design
    (known inclusion probabilities: `intake-eval phenotypes rates`), (3) severity per domain from
    its prior, (4) symptoms (severity-biased count, diagnostic minimum, no symptom in two domains,
    none that describes a hidden domain), (5) demographics and 2-3 life-context seeds with
    prerequisites enforced, (6) the generator renders each domain in the first person and QC checks
    every symptom appears (verbatim or a close paraphrase) and that no hidden domain is detectable
    in the presenting domain's text; failed renders are retried, and a profile that never passes
    goes to render_failures.jsonl, not profiles.jsonl.

    Writes RUN_DIR/profiles.jsonl and RUN_DIR/sampling_rates.csv (cited, design and realised rate
    of every phenotype × optional domain). Rerun the same command to resume after an interruption;
    a changed configuration is refused (use --force to start over, or another --run-dir).

    Example: intake-eval generate --n 108 --stratified --seed 7
    """
    from intake_eval.catalog.load import load_catalog
    from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR
    from intake_eval.commands.common import console, print_money
    from intake_eval.core.store import RunPaths
    from intake_eval.generate.settings import GenerateSettings

    mode: Mode = "stratified" if stratified else "weighted"
    settings = GenerateSettings.from_flags(n=n, mode=mode, seed=seed, generator=generator, concurrency=concurrency,
                                           max_attempts=max_attempts, qc_threshold=qc_threshold,
                                           hidden_count=hidden_count)
    catalog = load_catalog(Path(catalog_dir) if catalog_dir is not None else DEFAULT_CATALOG_DIR)
    if explain:
        _explain(catalog, n=n, mode=mode, seed=seed, index=index, generator=generator, models_file=models,
                 max_attempts=max_attempts, qc_threshold=qc_threshold, hidden_count=hidden_count)
        return
    out = console()
    from intake_eval.generate.stage import GenerateStage, generate_in_folder
    from intake_eval.stage_kinds import stage_kinds

    summary = generate_in_folder(RunPaths(Path(run_dir)), GenerateStage(settings, force=force), models_file=models,
                                 use_cache=not no_cache, console=out, catalog=catalog, kinds=stage_kinds())
    _print_summary(out, RunPaths(Path(run_dir)), catalog, summary)
    print_money(out, Path(run_dir))
    if summary.interrupted:
        raise typer.Exit(130)
    if summary.failed:
        raise typer.Exit(1)  # profiles left to make: a rerun retries them


def _print_summary(out: Any, paths: Any, catalog: Any, summary: Any) -> None:
    from rich.table import Table

    if summary.interrupted:
        out.print(f"[yellow]interrupted[/] after {summary.written_now} new profiles; rerun the same command to resume")
        return
    table = Table(title=f"profiles in {paths.profiles}", title_justify="left")
    for column in ("phenotype", "alignment", "profiles"):
        table.add_column(column, justify="right" if column == "profiles" else "left")
    for pheno_id, pheno in catalog.phenotypes.items():
        table.add_row(pheno_id, pheno.alignment, str(summary.per_phenotype.get(pheno_id, 0)))
    table.add_row("[bold]total[/]", "", f"[bold]{summary.on_disk}[/] of {summary.n}")
    out.print(table)
    hidden = ", ".join(f"{count} hidden: {number}" for count, number in summary.hidden_counts.items()) or "none"
    out.print(f"hidden-domain counts: {hidden}")
    _print_rates(out, paths, summary)
    first = summary.first_attempt_pass / summary.on_disk if summary.on_disk else 0.0
    out.print(f"QC pass rate: {summary.qc_pass_rate:.1%} of profiles ({first:.1%} on the first attempt); "
              f"{summary.written_now} written now, {summary.already_done} already on disk")
    if summary.failed:
        shown = ", ".join(summary.failed[:10]) + (" …" if len(summary.failed) > 10 else "")
        out.print(f"[red]{len(summary.failed)} profile(s) never passed QC[/] ({shown}); details in "
                  f"{paths.render_failures}. Rerun to retry them, or raise --max-attempts.")


def _print_rates(out: Any, paths: Any, summary: Any) -> None:
    """Two lines on the sampling design: what it is, and how far the realised rates are from it."""
    rows = [row for row in summary.rates if row["realised"] != ""]
    if summary.hidden_count == "seed":
        out.print("sampling design: 4-5 hidden; optional domains by conditional Poisson sampling, inclusion "
                  "probability proportional to the cited rate (capped at 1)")
    else:
        out.print("sampling design: literature; each optional domain at its cited rate (at least one hidden)")
    if rows:
        from scipy.stats import binom  # type: ignore[import-untyped]  # scipy ships no type information

        inside = 0
        for row in rows:
            low, high = binom.interval(0.99, int(row["n_eligible"]), float(row["design"]))
            inside += low <= int(row["n_included"]) <= high
        gaps = [abs(float(row["realised"]) - float(row["design"])) for row in rows]
        out.print(f"realised vs design: {inside} of {len(rows)} phenotype × domain rates inside their 99% binomial "
                  f"range; mean |realised − design| {sum(gaps) / len(gaps):.3f}; table: {paths.sampling_rates}")


def _explain(catalog: Any, *, n: int, mode: Mode, seed: int, index: int, generator: str, models_file: Any,
             max_attempts: int, qc_threshold: float, hidden_count: str = "seed") -> None:
    """The study's "build sample profile" walkthrough: each stage's draws for one profile."""
    import asyncio

    from rich.console import Console
    from rich.panel import Panel

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.generate.render import render_profile
    from intake_eval.generate.sampling import (
        STAGE_TITLES,
        Trace,
        explain_plan,
        plan_phenotypes,
        sample_profile,
    )
    from intake_eval.llm.pool import ModelPool
    from intake_eval.llm.registry import load_model_specs, preflight
    from intake_eval.simulated import OfflineParticipants

    if not 0 <= index < n:
        raise IntakeEvalError(f"--index {index} is outside 0..{n - 1} (--n {n})")
    trace = Trace()
    plan = plan_phenotypes(catalog, n, mode, seed)
    explain_plan(catalog, plan, mode, index, trace)
    drawn = sample_profile(catalog, plan[index], index, seed, trace, hidden_count=hidden_count)
    with ModelPool(load_model_specs(models_file), cache_path=None, use_cache=False, offline=OfflineParticipants(catalog)) as pool:
        preflight([pool.spec(generator)])
        profile = asyncio.run(render_profile(drawn, pool.get(generator), catalog, max_attempts=max_attempts,
                                             threshold=qc_threshold, generator=generator, trace=trace))
    out = Console()
    out.print(f"[bold]{profile.profile_id}[/] (seed {seed}, {mode}, n={n})")
    for stage, title in STAGE_TITLES.items():
        body = "\n".join(f"• {line}" for line in trace.steps.get(stage, []))
        out.print(Panel(body or "(nothing drawn)", title=f"stage {stage} · {title}", title_align="left"))
    for draw in [profile.presenting] + profile.hidden:
        role = "presenting" if draw is profile.presenting else "hidden"
        out.print(Panel(draw.phenomenology or "(empty)", title=f"{draw.domain} · {role} · {draw.severity}",
                        title_align="left"))
    verdict = "[green]passed[/]" if profile.render.qc_passed else f"[red]failed[/]: {profile.render.failure}"
    out.print(f"QC {verdict} after {profile.render.attempts} round(s); nothing was written")
