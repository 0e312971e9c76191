"""`intake-eval qc-patient`: does the simulated patient obey the disclosure rule?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import (
    DEFAULT_RUN_DIR,
    ForceOption,
    ModelsOption,
    PromptsOption,
    NoCacheOption,
    RunDirOption,
)


def qc_patient(
    patient: Annotated[list[str], typer.Option(
        "--patient", help="Patient model: alias, provider id or offline/patient. Repeat to check several on the same "
        "profiles, each reported on its own.", show_default=False)],
    patient_mode: Annotated[str, typer.Option("--patient-mode", help="prompted (one prompt with the disclosure rule) or tracked (state-tracked).")] = "prompted",
    patient_style: Annotated[list[str] | None, typer.Option(
        "--patient-style", help="How the patient speaks (forthcoming, guarded, terse, verbose-tangential, vague-recall); "
        "repeat to check several, each reported on its own.", show_default=False)] = None,
    judge: Annotated[str, typer.Option("--judge", help="Judge that reads the patient's replies.")] = "offline/judge",
    tracker: Annotated[str | None, typer.Option("--tracker", help="Tracked mode: the model that decides which domains a question unlocks (default: the patient model).", show_default=False)] = None,
    n: Annotated[int, typer.Option("--n", help="Profiles to probe (round-robin over phenotypes).", min=1)] = 10,
    probes: Annotated[Path | None, typer.Option("--probes", help="Probe file (default: configs/qc_probes.yaml).", show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Probes in flight at once.", min=1)] = 8,
    max_leak_rate: Annotated[float | None, typer.Option("--max-leak-rate", help="Fail (exit 2) when the leak rate on open invitations is above this share (0–1).", min=0.0, max=1.0, show_default=False)] = None,
    min_recall: Annotated[float | None, typer.Option("--min-recall", help="Fail (exit 2) when disclosure recall on direct questions is below this share (0–1).", min=0.0, max=1.0, show_default=False)] = None,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    models: ModelsOption = None,
    prompts: PromptsOption = None,
    no_cache: NoCacheOption = False,
    force: ForceOption = False,
) -> None:
    """Probe the patient outside any interview and report disclosure recall, leak rate and invention rate.

    For each profile (from the run's profiles.jsonl): a direct question per hidden domain (must
    disclose), open invitations such as "tell me more" (must reveal no hidden domain) and questions
    about domains the profile lacks (must deny). Each probe is a fresh exchange after the opening.
    Writes qc/patient_<alias>_<mode>[_<style>].jsonl (one record per probe), metrics/patient_qc.csv,
    metrics/patient_qc_domains.csv (per domain) and metrics/patient_qc_population.csv (how the patient
    spoke: words per reply against the style's target, MATTR, early resolution, repeated phrasing).
    --max-leak-rate and --min-recall turn it into a gate.
    """
    from intake_eval.commands.common import console
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.patient_styles import check_styles
    from intake_eval.trust.stage import QCSettings
    from intake_eval.trust.probes import DEFAULT_PROBES

    if len(set(patient)) != len(patient):
        raise IntakeEvalError("--patient: the same patient model is given twice")
    err = console()
    failed = 0
    for alias, style in ((alias, style) for alias in patient for style in check_styles(patient_style or [])):
        settings = QCSettings.from_flags(patient=alias, mode=patient_mode, judge=judge, tracker=tracker, n=n,
                                         probes=probes or DEFAULT_PROBES, concurrency=concurrency, style=style)
        failed += _qc_one(settings, run_dir=run_dir, models=models, no_cache=no_cache, force=force, err=err,
                          max_leak_rate=max_leak_rate, min_recall=min_recall)
    if failed:
        raise typer.Exit(1)


def _qc_one(settings, *, run_dir: Path, models, no_cache: bool, force: bool, err, max_leak_rate: float | None,
            min_recall: float | None) -> int:
    """One style's patient QC: run, print the rates and the population measures, gate; the failed probes."""
    from rich.console import Console
    from rich.table import Table

    from intake_eval.commands.common import print_fitted, print_money
    from intake_eval.core import numbers
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds
    from intake_eval.trust.patient_qc import qc_gate
    from intake_eval.trust.population_table import population_table
    from intake_eval.trust.stage import execute_qc

    patient, patient_mode, judge = settings.patient, settings.mode, settings.judge
    result = execute_qc(RunPaths(run_dir), settings, models_file=models, use_cache=not no_cache, force=force, console=err,
                        kinds=stage_kinds())
    assert result is not None, "an interrupted QC stage raises instead of returning"
    table = Table(title=f"Patient QC — {patient} ({patient_mode}, {settings.style}), judged by {judge}, "
                        f"{result.profiles} profiles", title_justify="left")
    for column in ("metric", "rate", "95% CI (Wilson)", "count", "errors", "wanted"):
        text = column in ("metric", "wanted")  # text wraps; numbers keep their width (print_fitted)
        table.add_column(column, justify="left" if text else "right", no_wrap=not text)
    wanted = {"disclosure_recall": "high (100%)", "leak_rate": "low (0%)", "invention_rate": "low (0%)"}
    for row in result.rows():
        rate, ci = numbers.pct(row["rate"]), numbers.ci(row["ci_low"], row["ci_high"]) or numbers.DASH
        table.add_row(row["metric"], rate, ci, f"{row['successes']}/{row['n']}", str(row["errors"]), wanted[row["metric"]])
    print_fitted(Console(), table)
    print_fitted(Console(), population_table(result.population, f"How the patient spoke ({settings.style})"))
    err.print(f"wrote {result.records_path} and {result.metrics_path}")
    print_money(err, run_dir)
    if max_leak_rate is not None or min_recall is not None:
        qc_gate(result, max_leak_rate, min_recall=min_recall)
    failed = sum(result.errors.values())
    if failed:
        err.print(f"[red]{failed} probes failed[/] (patient or judge errors, excluded from the rates; see "
                  f"{result.records_path}); run the same command again to retry them.")
    return failed
