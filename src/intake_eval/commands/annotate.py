"""`intake-eval annotate export|import`: validate a judge against human annotators."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, ForceOption, RunDirOption

app = typer.Typer(
    help=(
        "Validate a judge against people: `export` a blinded annotation pack (offline HTML form + CSV sheet) "
        "of judged turns; `import` the filled CSVs to get judge-vs-human and human-vs-human Cohen's κ."
    ),
    no_args_is_help=True,
)


@app.command("export")
def export(
    n: Annotated[int, typer.Option("--n", help="Items (turn × domain) in the pack.", min=1)] = 40,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge whose labels are validated (needed when the run has several).", show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the stratified sample.")] = 0,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    force: ForceOption = False,
) -> None:
    """Write annotations/form.html, annotations/sheet.csv and the hidden annotations/key.json.

    Items are sampled across clinicians, question types and label values (stratified, seeded);
    annotators see neither the judge's labels nor which clinician spoke.
    """
    from intake_eval.commands.common import console
    from intake_eval.core.store import RunLock, RunPaths
    from intake_eval.trust.annotate import export_pack

    paths = RunPaths(run_dir)
    if not paths.root.is_dir():
        from intake_eval.core.errors import IntakeEvalError

        raise IntakeEvalError(f"--run-dir {run_dir}: no such run folder")
    with RunLock(paths):
        result = export_pack(paths, n=n, judge=judge, seed=seed, force=force)
    out = console()
    short = f" (only {result.available} judged items were available)" if result.items < n else ""
    out.print(f"annotation pack {result.pack_id}: {result.items} items from judge {result.judge}, "
              f"{result.strata} strata{short}")
    out.print(f"  give annotators: {result.files[0]}  (or {result.files[1]})")
    out.print(f"  keep to yourself: {result.files[2]}  (the judge's labels)")
    out.print(f"  then: intake-eval annotate import FILLED.csv … --run-dir {run_dir}")


@app.command("import")
def import_(
    files: Annotated[list[Path], typer.Argument(help="Filled CSVs (item_id, annotator, asked_about, disclosed, question_type).", show_default=False)],
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
) -> None:
    """Judge-vs-human Cohen's κ and raw agreement per label, and human-vs-human κ on shared items.

    Writes metrics/annotation_agreement.csv and prints the table.
    """
    from rich.console import Console
    from rich.table import Table

    from intake_eval.core.store import RunPaths
    from intake_eval.trust.annotate import import_annotations

    rows, target = import_annotations(RunPaths(run_dir), list(files))
    table = Table(title="Agreement with human annotators", title_justify="left")
    for column in ("comparison", "rater a", "rater b", "label", "n", "agreement", "κ", "κ 95% CI"):
        table.add_column(column, justify="right" if column in ("n", "agreement", "κ") else "left")
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    for row in rows:
        ci = "—" if row["kappa_ci_low"] is None else f"[{row['kappa_ci_low']:.2f}, {row['kappa_ci_high']:.2f}]"
        table.add_row(row["comparison"], row["rater_a"], row["rater_b"], row["label"], str(row["n"]),
                      fmt(row["agreement"]), fmt(row["kappa"]), ci)
    Console(width=140).print(table)
    Console(stderr=True).print(f"wrote {target}")
