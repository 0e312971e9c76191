"""A run folder in Python: typed records and pandas DataFrames.

    import intake_eval
    run = intake_eval.load_run("runs/demo")
    run.metrics["clinicians"].plot.bar(x="arm", y="mean_active_coverage")
    run.turn_labels.groupby("arm")["asked_about"].mean()

Records (``run.records.profiles``, ``.conversations``, ``.judgments``) are the pydantic models of
core/records.py, latest record per key, read when first asked for. DataFrames are the metrics CSVs
(refreshed first when a record file is newer than them): ``run.conversations`` (one row per
conversation × judge), ``run.turn_labels`` (one row per conversation × judge × turn × domain) and
``run.metrics[name]`` for every metrics/<name>.csv (a long table too big for a spreadsheet is kept as
metrics/<name>.parquet only and read from it); ``run.dataset(name)`` opens a Parquet table lazily.
Every table with clinician, condition and patient_mode columns also has ``arm`` ("clinician · condition ·
patient mode"): the unit every figure is computed per. Group by it, not by clinician alone, which would pool a clinician's arms (its
spontaneous intakes with their nudged forks, "minimal+review@closure", or two conditions). pandas is
imported on first use only, so ``import intake_eval`` stays light.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Conversation, Judgment, Profile
from intake_eval.core.store import RunPaths, latest_by_key
from intake_eval.metrics.columnar import parquet_path
from intake_eval.metrics.tables import write_metrics
from intake_eval.metrics.turn_labels import TURN_LABELS_TABLE
from intake_eval.report.load import metrics_stale, refresh_metrics
from intake_eval.stage_kinds import stage_kinds


class RunRecords:
    """The run's records as pydantic models, sorted by their ids."""

    def __init__(self, paths: RunPaths) -> None:
        self._paths = paths

    @cached_property
    def profiles(self) -> list[Profile]:
        if not self._paths.profiles.exists():
            return []
        return sorted(latest_by_key(self._paths.profiles, Profile, "profile_id").values(), key=lambda p: p.profile_id)

    @cached_property
    def conversations(self) -> list[Conversation]:
        found: dict[str, Conversation] = {}
        for path in self._paths.conversation_files():
            found.update(latest_by_key(path, Conversation, "conversation_id"))
        return [found[key] for key in sorted(found)]

    @cached_property
    def judgments(self) -> list[Judgment]:
        found: dict[tuple[str, str], Judgment] = {}
        for path in self._paths.judgment_files():
            for judgment in latest_by_key(path, Judgment, "conversation_id").values():
                found[(judgment.judge, judgment.conversation_id)] = judgment
        return [found[key] for key in sorted(found)]


ARM_COLUMNS = ("clinician", "condition", "patient_mode")


def with_arm(frame: Any) -> Any:
    """The frame with an ``arm`` column (clinician · condition · patient mode) when it has the three columns."""
    if "arm" in frame.columns or not all(column in frame.columns for column in ARM_COLUMNS):
        return frame
    arm = frame[list(ARM_COLUMNS)].astype(str).agg(" · ".join, axis=1) if len(frame) else frame["clinician"].astype(str)
    return frame.assign(arm=arm)


class MetricsTables(Mapping):
    """The metrics tables of a folder as a read-only mapping; a table is read on first access (turn_labels
    of a large study is big, and most uses need one or two tables). A table with a CSV is read from it; a
    long table kept as Parquet only (too long for a spreadsheet) is read from its Parquet file."""

    def __init__(self, folder: Path) -> None:
        self._paths: dict[str, Path] = {}
        for suffix in ("parquet", "csv"):  # a name's CSV, when there is one, wins over its Parquet file
            self._paths.update({path.stem: path for path in (sorted(folder.glob(f"*.{suffix}")) if folder.is_dir() else [])})
        self._paths = dict(sorted(self._paths.items()))
        self._read: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._read:
            import pandas as pd  # type: ignore[import-untyped]  # pandas-stubs is not installed

            path = self._paths[name]  # KeyError for an unknown table, as a dict does
            frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
            self._read[name] = with_arm(frame)
        return self._read[name]

    def __contains__(self, name: object) -> bool:
        return name in self._paths  # without reading the table

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __repr__(self) -> str:
        return f"MetricsTables({sorted(self._paths)})"


class Run:
    """One run folder: ``records`` (typed), ``conversations``, ``turn_labels`` and ``metrics`` (DataFrames)."""

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        self.path = paths.root
        self.records = RunRecords(paths)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, tables={sorted(self.metrics)})"

    @cached_property
    def metrics(self) -> Mapping[str, Any]:
        """metrics/<name>.csv → DataFrame, for every CSV in the folder (each read when first used)."""
        return MetricsTables(self.paths.metrics_dir)

    def table(self, name: str) -> Any:
        try:
            return self.metrics[name]
        except KeyError:
            raise IntakeEvalError(f"{self.paths.metrics(name)}: no such metrics table "
                                  f"(have: {', '.join(sorted(self.metrics)) or 'none'})") from None

    @property
    def conversations(self) -> Any:
        """One row per conversation × judge: the per-conversation metrics (metrics/conversations.csv)."""
        return self.table("conversations")

    @property
    def turn_labels(self) -> Any:
        """One row per conversation × judge × turn × domain (metrics/turn_labels.csv, or .parquet when only that)."""
        return self.table(TURN_LABELS_TABLE)

    def dataset(self, name: str) -> Any:
        """metrics/<name>.parquet as a lazy ``pyarrow.dataset.Dataset``: filter and pick columns before anything
        is read (``run.dataset("turn_labels").to_table(columns=[...], filter=...)``), for tables too large
        for a DataFrame."""
        import pyarrow.dataset  # type: ignore[import-untyped]  # pyarrow ships no type information

        path = parquet_path(self.paths.metrics(name))
        if not path.exists():
            raise IntakeEvalError(f"{path}: no such Parquet table (the long tables have one: {TURN_LABELS_TABLE})")
        return pyarrow.dataset.dataset(path, format="parquet")


def load_run(path: str | Path, *, refresh: bool = True) -> Run:
    """Open a run folder. With ``refresh`` the metrics CSVs are rewritten first when missing or older
    than the records (as `intake-eval report` does)."""
    paths = RunPaths(Path(path))
    if not paths.root.is_dir():
        raise IntakeEvalError(f"{paths.root}: no such run folder")
    if refresh and paths.judgment_files():
        if metrics_stale(paths):
            refresh_metrics(paths)
        elif not paths.metrics(TURN_LABELS_TABLE).exists():  # metrics written before the long-form labels existed
            write_metrics(paths, stage_kinds())
    return Run(paths)
