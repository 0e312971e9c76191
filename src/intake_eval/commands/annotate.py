"""`intake-eval annotate export|import`: validate a judge against human annotators."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, ForceOption, RunDirOption

app = typer.Typer(
    help=(
        "Validate a judge against people: `export` a blinded annotation pack (offline HTML form + CSV sheet) "
        "of judged turns; `import` the filled CSVs to get judge-vs-human and human-vs-human Cohen's κ "
        "(and, for an `export --for-calibration` pack, active coverage corrected for judge error)."
    ),
    no_args_is_help=True,
)


@app.command("export")
def export(
    n: Annotated[int, typer.Option("--n", help="Items (turn × domain) in the pack; with --for-calibration, conversations per arm.", min=1)] = 40,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge whose labels are validated (needed when the run has several).", show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the stratified sample.")] = 0,
    for_calibration: Annotated[bool, typer.Option("--for-calibration", help="Sample whole conversations uniformly at random, --n per arm (clinician × condition × patient mode), every turn × hidden domain of each: `import` then corrects active coverage for judge error.")] = False,
    ci_width: Annotated[float, typer.Option("--ci-width", help="With --for-calibration: the full width of the 95% CI to plan the number of labelled conversations for.")] = 0.10,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    force: ForceOption = False,
) -> None:
    """Write annotations/form.html, annotations/sheet.csv and the hidden annotations/key.json.

    Items are sampled across clinicians, question types and label values (stratified, seeded);
    annotators see neither the judge's labels nor which clinician spoke. With --for-calibration
    whole conversations are sampled at random per arm, and the number of labelled conversations
    a target CI width needs is printed.
    """
    from intake_eval.commands.common import console, print_money
    from intake_eval.core.store import RunPaths
    from intake_eval.core.run_lock import RunLock
    from intake_eval.trust.annotate import export_pack

    paths = RunPaths(run_dir)
    if not paths.root.is_dir():
        from intake_eval.core.errors import IntakeEvalError

        raise IntakeEvalError(f"--run-dir {run_dir}: no such run folder")
    if for_calibration:
        _export_calibration(paths, n, judge, seed, ci_width, force, run_dir)
        return
    with RunLock(paths):
        result = export_pack(paths, n=n, judge=judge, seed=seed, force=force)
    out = console()
    short = f" (only {result.available} judged items were available)" if result.items < n else ""
    out.print(f"annotation pack {result.pack_id}: {result.items} items from judge {result.judge}, "
              f"{result.strata} strata{short}")
    out.print(f"  give annotators: {result.files[0]}  (or {result.files[1]})")
    out.print(f"  keep to yourself: {result.files[2]}  (the judge's labels)")
    out.print(f"  then: intake-eval annotate import FILLED.csv … --run-dir {run_dir}")
    print_money(out, paths)


def _export_calibration(paths, n: int, judge: str | None, seed: int, ci_width: float, force: bool, run_dir) -> None:
    from rich.table import Table

    from intake_eval.commands.common import console, print_money
    from intake_eval.core import numbers
    from intake_eval.core.run_lock import RunLock
    from intake_eval.trust.calibration import (
        PLANNING_DISAGREEMENTS,
        arm_name,
        export_calibration_pack,
    )

    with RunLock(paths):
        result = export_calibration_pack(paths, per_arm=n, judge=judge, seed=seed, ci_width=ci_width, force=force)
    out = console()
    out.print(f"calibration pack {result.pack_id}: {result.conversations} conversations ({result.items} items: every "
              f"clinician turn × hidden domain) from judge {result.judge}, sampled at random per arm")
    table = Table(title=f"Labelled conversations needed for a 95% CI of width {ci_width:.2f} (±{ci_width / 2:.3f})",
                  title_justify="left")
    for column in ("arm", "judged", "sampled", "judge mean", "judge SD", "items/conv.",
                   *(f"if {e:.0%} disagree" for e in PLANNING_DISAGREEMENTS)):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for plan in result.plans:
        needs = ["not reachable" if k is None else f"all {plan.conversations} are too few" if k > plan.conversations
                 else f"{k} ({round(k * plan.items_per_conversation)} items)"
                 for k in (plan.needed[e] for e in PLANNING_DISAGREEMENTS)]
        table.add_row(arm_name(plan.arm), str(plan.conversations), str(plan.sampled), numbers.pct(plan.judge_mean),
                      numbers.points(plan.judge_sd).lstrip("+"), numbers.decimal(plan.items_per_conversation, 0), *needs)
    from rich.console import Console

    Console(width=160).print(table)
    out.print("  'if x% disagree': judge and annotator call x% of the (conversation, hidden domain) outcomes "
              "differently; 'not reachable': the judge's own spread over the judged conversations is wider than the target; "
              "more conversations are needed, not more labels")
    out.print(f"  give annotators: {result.files[0]}  (or {result.files[1]}); every item of a conversation must be "
              "labelled for it to count")
    out.print(f"  keep to yourself: {result.files[2]}  (the judge's labels)")
    out.print(f"  then: intake-eval annotate import FILLED.csv … --run-dir {run_dir}  (writes metrics/calibrated.csv)")
    print_money(out, paths)


@app.command("import")
def import_(
    files: Annotated[list[Path], typer.Argument(help="Filled CSVs (item_id, annotator, asked_about, disclosed, question_type).", show_default=False)],
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
) -> None:
    """Judge-vs-human Cohen's κ and raw agreement per label, and human-vs-human κ on shared items.

    Writes metrics/annotation_agreement.csv and prints the table; for a --for-calibration pack also
    metrics/calibrated.csv (active coverage corrected for judge error, beside the judge-only figure).
    """
    from rich.console import Console
    from rich.table import Table

    from intake_eval.commands.common import console, print_money
    from intake_eval.core import numbers
    from intake_eval.core.store import RunPaths
    from intake_eval.trust.annotate import import_annotations

    rows, target = import_annotations(RunPaths(run_dir), list(files))
    table = Table(title="Agreement with human annotators", title_justify="left")
    for column in ("comparison", "rater a", "rater b", "label", "n", "agreement", "κ", "κ 95% CI"):
        table.add_column(column, justify="right" if column in ("n", "agreement", "κ") else "left")
    for row in rows:
        ci = numbers.interval(row["kappa_ci_low"], row["kappa_ci_high"]) or numbers.DASH
        table.add_row(row["comparison"], row["rater_a"], row["rater_b"], row["label"], str(row["n"]),
                      numbers.pct(row["agreement"]), numbers.kappa(row["kappa"]), ci)
    Console(width=140).print(table)
    Console(stderr=True).print(f"wrote {target}")
    from intake_eval.trust.calibration import import_calibration, is_calibration_pack

    if is_calibration_pack(RunPaths(run_dir)):
        _print_calibration(*import_calibration(RunPaths(run_dir), list(files)))
    print_money(console(), run_dir)


def _print_calibration(rows, target) -> None:
    from rich.console import Console
    from rich.table import Table

    from intake_eval.core import numbers

    table = Table(title="Active coverage corrected for judge error (prediction-powered, 95% CI)", title_justify="left")
    for column in ("clinician · condition · mode", "phenotype", "labelled / judged", "judge only", "humans only",
                   "calibrated", "judge bias"):
        table.add_column(column, justify="left" if column.startswith(("clinician", "phenotype")) else "right")

    def cell(row, prefix: str) -> str:
        mean = numbers.pct(row[f"{prefix}_mean"])
        return f"{mean} {numbers.ci(row[f'{prefix}_ci_low'], row[f'{prefix}_ci_high'])}".strip()

    for row in rows:
        bias = numbers.points(row["judge_bias"])
        table.add_row(f"{row['clinician']} · {row['condition']} · {row['patient_mode']}", row["phenotype"] or "all",
                      f"{row['n_labelled']} / {row['n_conversations']}", cell(row, "judge"), cell(row, "human"),
                      cell(row, "calibrated"), bias)
    Console(width=160).print(table)
    Console(stderr=True).print(f"wrote {target}")
