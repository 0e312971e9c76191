"""`intake-eval export RUN_DIR --format parquet|hf --out DIR`: the run as a dataset."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer


class ExportFormat(str, Enum):
    parquet = "parquet"
    hf = "hf"


def export(
    run_dir: Path = typer.Argument(..., help="The run folder to export (it is only read)."),
    out: Path = typer.Option(..., "--out", help="Folder to write the dataset to; must be empty or absent."),
    fmt: ExportFormat = typer.Option(ExportFormat.parquet, "--format", case_sensitive=False,
                                     help="parquet: one Parquet file per table; hf: the same plus a dataset card "
                                          "(README.md) the Hugging Face hub and datasets.load_dataset read."),
    license_id: str = typer.Option("cc-by-4.0", "--license", help="Licence identifier stated in the dataset card."),
    force: bool = typer.Option(False, "--force", help="Export into a non-empty --out: the old folder is kept as "
                                                      "<out>.superseded-<UTC time>, never overwritten."),
) -> None:
    """Export a run folder as a dataset: profiles, turns (one row per conversation turn), labels (one row per
    conversation × judge × turn × domain) and every metrics table, as zstd Parquet; with --format hf also a
    dataset card with the methods text, each table's fields, the licence and the study configuration.

    Needs pyarrow: pip install 'intake-eval[export]'. API endpoints and key names are never exported.
    """
    from intake_eval.commands.common import console
    from intake_eval.export.build import export_run

    result = export_run(run_dir, out, fmt.value, license_id, force)
    say = console()
    for table in result.tables:
        say.print(f"{table.file}: {table.rows:,} rows", markup=False, highlight=False)
    if result.superseded is not None:
        say.print(f"the previous export is kept as {result.superseded}", markup=False)
    typer.echo(str(result.out))
