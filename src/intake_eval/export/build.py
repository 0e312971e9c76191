"""``export_run``: a run folder as a dataset folder, written beside the target and moved into place
whole, so a failed export leaves no half dataset and an existing one is never overwritten: a
non-empty ``--out`` is refused, or with ``force`` kept as ``<out>.superseded-<UTC time>``.

Reads the run folder only (nothing is recorded in it). Tables: profiles, turns and labels from the
records (``rows``), and every metrics table (metrics/*.csv, or its .parquet when a stage wrote one)
as metrics/<name>.parquet; metrics/turn_labels is the labels table (with the judges' reasoning) and is
not written twice. ``export.json`` lists what was written; ``--format hf`` adds the dataset card.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from intake_eval.core.schema import package_version
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.store import RunPaths, write_text_atomic
from intake_eval.export.card import ExportedTable, dataset_card, declared_fields, without_secrets
from intake_eval.export.columns import LABELS, METRICS_FOLDER, PROFILES, TURNS, Table, metric_meaning
from intake_eval.export.parquet import copy_csv, copy_parquet, pyarrow_modules, write_rows
from intake_eval.export.rows import label_rows, profile_rows, turn_rows
from intake_eval.metrics.turn_labels import TURN_LABELS_TABLE
from intake_eval.report.load import load_run, metrics_stale, read_manifest
from intake_eval.report.methods import collect_methods
from intake_eval.report.methods_section import methods_markdown

FORMATS = ("parquet", "hf")
DEFAULT_LICENSE = "cc-by-4.0"
EXPORT_INDEX = "export.json"
CARD = "README.md"


@dataclass
class ExportResult:
    out: Path
    tables: list[ExportedTable] = field(default_factory=list)
    superseded: Path | None = None


def _checked_out(paths: RunPaths, out: Path, force: bool) -> None:
    root, target = paths.root.resolve(), out.resolve()
    if target == root or root in target.parents or target in root.parents:
        raise IntakeEvalError(f"--out {out}: is inside (or holds) the run folder {paths.root}; choose a folder "
                              "outside it (the export writes nothing into the run)")
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise IntakeEvalError(f"--out {out}: is a file or a symlink; choose a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise IntakeEvalError(f"--out {out}: is not empty; choose an empty folder, or pass --force to keep the old "
                              f"one as {out.name}.superseded-<time> and write anew")


def _checked_run(paths: RunPaths) -> dict[str, Any]:
    if not paths.manifest.exists():
        raise IntakeEvalError(f"{paths.root}: not a run folder (no manifest.json); pass a folder made by "
                              "`intake-eval run`, `study` or `demo`")
    if paths.judgment_files() and metrics_stale(paths):
        raise IntakeEvalError(f"{paths.metrics_dir}: metrics are missing or older than the records; run "
                              f"`intake-eval report --run-dir {paths.root}` first so the export's tables agree")
    return read_manifest(paths)


def _record_table(folder: Path, table: Table, rows: Callable[[], Any]) -> ExportedTable:
    written = write_rows(folder / table.file, table, rows())
    return ExportedTable(table.name, table.file, written, table.about, declared_fields(table))


def _metric_sources(paths: RunPaths) -> dict[str, Path]:
    """metrics table name → its file; a Parquet file wins over a CSV of the same table."""
    found: dict[str, Path] = {}
    for suffix in (".csv", ".parquet"):
        for path in sorted(paths.metrics_dir.glob(f"*{suffix}")):
            if path.stem != TURN_LABELS_TABLE:
                found[path.stem] = path
    return dict(sorted(found.items()))


def _metric_table(folder: Path, name: str, source: Path) -> ExportedTable:
    pa, _parquet, _csv = pyarrow_modules()
    file = f"{METRICS_FOLDER}/{name}.parquet"
    copy = copy_parquet if source.suffix == ".parquet" else copy_csv
    try:
        rows, schema = copy(source, folder / file)
    except pa.ArrowInvalid as error:
        raise IntakeEvalError(f"{source}: unreadable as a table ({str(error).splitlines()[0]})") from None
    about = f"metrics/{source.name} of the run (DESIGN.md and the project README define each metric)."
    fields = [(column.name, str(column.type), metric_meaning(column.name)) for column in schema]
    return ExportedTable(f"metrics_{name}", file, rows, about, fields)


def _methods_lines(paths: RunPaths, staging: Path) -> list[str] | None:
    if not paths.conversation_files():
        return None
    data = load_run(paths, spill_in=staging, refresh=False)  # its spill is gone before staging moves
    data.manifest = without_secrets(data.manifest)  # the methods' model table shows extra parameters
    try:
        return methods_markdown(collect_methods(data))
    finally:
        data.close()


def _write_tables(paths: RunPaths, folder: Path) -> list[ExportedTable]:
    tables = [_record_table(folder, PROFILES, lambda: profile_rows(paths)),
              _record_table(folder, TURNS, lambda: turn_rows(paths))]
    if paths.judgment_files():
        tables.append(_record_table(folder, LABELS, lambda: label_rows(paths)))
    (folder / METRICS_FOLDER).mkdir()
    tables += [_metric_table(folder, name, source) for name, source in _metric_sources(paths).items()]
    return tables


def _index(tables: list[ExportedTable], manifest: dict[str, Any], fmt: str, license_id: str) -> str:
    return json.dumps({
        "format": fmt, "license": license_id, "run_name": manifest.get("run_name"),
        "config_hash": manifest.get("config_hash"), "intake_eval": package_version(),
        "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tables": [{"name": t.name, "file": t.file, "rows": t.rows} for t in tables],
    }, indent=2) + "\n"


def _move_into_place(staging: Path, out: Path) -> Path | None:
    superseded = None
    if out.is_dir() and any(out.iterdir()):
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        superseded, suffix = out.with_name(f"{out.name}.superseded-{stamp}"), 1
        while superseded.exists():  # two exports within a second: both old folders are kept
            suffix += 1
            superseded = out.with_name(f"{out.name}.superseded-{stamp}-{suffix}")
        out.rename(superseded)
    elif out.is_dir():
        out.rmdir()
    staging.rename(out)
    return superseded


def export_run(run_dir: Path, out: Path, fmt: str, license_id: str = DEFAULT_LICENSE,
               force: bool = False) -> ExportResult:
    if fmt not in FORMATS:
        raise IntakeEvalError(f"--format {fmt}: unknown; choose one of {', '.join(FORMATS)}")
    paths = RunPaths(run_dir)
    manifest = _checked_run(paths)
    _checked_out(paths, out, force)
    pyarrow_modules()  # the install hint before any work
    out = out.absolute()  # `--out .` has a name to stage beside
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)  # a previous export of this process id that died
    staging.mkdir()
    try:
        tables = _write_tables(paths, staging)
        write_text_atomic(staging / EXPORT_INDEX, _index(tables, manifest, fmt, license_id))
        if fmt == "hf":
            write_text_atomic(staging / CARD, dataset_card(tables, manifest, license_id, _methods_lines(paths, staging)))
        superseded = _move_into_place(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ExportResult(out, tables, superseded)
