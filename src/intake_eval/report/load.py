"""Read a run folder for the report: manifest, metrics CSVs (refreshed when stale) and the records.

Records are streamed as plain JSON dicts (latest per key, like ``store.latest_by_key``) and kept
in a compact form: 10,000 conversations × 2 judges fit in memory comfortably and load in seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.errors import IntakeEvalError
from intake_eval.store import ReadStats, RunPaths, iter_json_lines

METRIC_TABLES = ("conversations", "cells", "domains", "trajectories", "agreement", "clinicians", "comparisons", "masking")
OPTIONAL_TABLES = ("safety", "diagnosis", "trials", "patient_qc", "patient_qc_domains", "annotation_agreement")


@dataclass
class RunData:
    paths: RunPaths
    manifest: dict[str, Any]
    profiles: dict[str, dict[str, Any]]  # profile_id -> profile dict
    conversations: dict[str, dict[str, Any]]  # conversation_id -> conversation dict
    judgments: dict[str, dict[str, dict[str, Any]]]  # judge -> conversation_id -> judgment dict
    tables: dict[str, Any] = field(default_factory=dict)  # name -> pandas DataFrame
    notes: list[str] = field(default_factory=list)  # what is missing / stale, said plainly
    primary_judge: str | None = None  # the judge the report's numbers follow (set by build_report: --judge)

    @property
    def judges(self) -> list[str]:
        return list(self.judgments)


def read_manifest(paths: RunPaths) -> dict[str, Any]:
    if not paths.manifest.exists():
        return {}
    try:
        data = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise IntakeEvalError(f"{paths.manifest}: manifest is unreadable ({exc.__class__.__name__})") from None
    from intake_eval import SCHEMA_VERSION

    version = data.get("schema_version", 0) if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:  # an older (or newer) layout: its numbers would be read wrongly
        raise IntakeEvalError(
            f"{paths.manifest}: run folder has schema_version {version}, this intake-eval reads {SCHEMA_VERSION}; "
            "report it with the matching intake-eval version")
    return data


def _latest(path: Path, key: str, damage: list[str] | None = None) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    stats = ReadStats()
    for data in iter_json_lines(path, stats):
        if key in data:
            latest[str(data[key])] = data
    if damage is not None and (stats.skipped_corrupt or stats.truncated_tail):
        parts = [f"{stats.skipped_corrupt} corrupt line(s) skipped"] if stats.skipped_corrupt else []
        parts += ["a half-written last line ignored"] if stats.truncated_tail else []
        damage.append(f"{path}: {' and '.join(parts)}; rerun the stage that writes it to redo those records")
    return latest


def load_records(paths: RunPaths, damage: list[str] | None = None) -> tuple[dict, dict, dict]:
    """Latest record per key of every file; ``damage`` collects a sentence per file with skipped lines."""
    profiles = _latest(paths.profiles, "profile_id", damage)
    conversations: dict[str, dict[str, Any]] = {}
    for path in paths.conversation_files():
        conversations.update(_latest(path, "conversation_id", damage))
    judgments: dict[str, dict[str, dict[str, Any]]] = {}
    for path in paths.judgment_files():
        for cid, data in _latest(path, "conversation_id", damage).items():
            judgments.setdefault(str(data.get("judge") or path.parent.name), {})[cid] = data
    return profiles, conversations, judgments


def order_judges(judgments: dict[str, dict], manifest: dict[str, Any], prefer: str | None) -> list[str]:
    """Primary judge first: --judge if given, else the first judge the judge stage was run with."""
    available = list(judgments)
    if prefer is not None:
        if prefer not in available:
            names = ", ".join(available) or "none"
            raise IntakeEvalError(f"--judge {prefer}: no judgments by that judge in this run (judges here: {names})")
        return [prefer] + [j for j in sorted(available) if j != prefer]
    declared = []
    primary = (manifest.get("judges") or {}).get("primary")  # set by `judge` and `study`: the first --judge
    if primary:
        declared.append(str(primary))
    stages = manifest.get("stages") or {}
    config = (stages.get("judge") or {}).get("config") or {}
    listed = config.get("judges") or config.get("judge") or []
    declared += [listed] if isinstance(listed, str) else list(listed)
    declared += [name.split(":", 1)[1] for name in stages if name.startswith("judge:")]
    ordered = list(dict.fromkeys(j for j in declared if j in available))
    ordered += sorted((j for j in available if j not in ordered), key=lambda j: (-len(judgments[j]), j))
    return ordered


def metrics_stale(paths: RunPaths) -> bool:
    """CSVs missing, or older than a judgment/conversation/profile file they are computed from."""
    target = paths.metrics("conversations")
    if not target.exists():
        return True
    built = target.stat().st_mtime
    sources = [paths.profiles, *paths.conversation_files(), *paths.judgment_files()]
    return any(src.exists() and src.stat().st_mtime > built for src in sources)


def refresh_metrics(paths: RunPaths) -> None:
    if not paths.judgment_files() or not metrics_stale(paths):
        return
    from intake_eval.metrics_tables import write_metrics
    from intake_eval.trials import write_trial_metrics

    write_metrics(paths)
    write_trial_metrics(paths)  # metrics/trials.csv only when the run repeats trials


def read_tables(paths: RunPaths, notes: list[str]) -> dict[str, Any]:
    import pandas as pd

    tables: dict[str, Any] = {}
    for name in METRIC_TABLES + OPTIONAL_TABLES:
        path = paths.metrics(name)
        if not path.exists():
            if name in METRIC_TABLES and paths.judgment_files():
                notes.append(f"metrics/{name}.csv is missing")
            continue
        try:
            tables[name] = pd.read_csv(path, keep_default_na=True)
        except (ValueError, OSError) as exc:  # pandas' EmptyDataError/ParserError are ValueErrors
            notes.append(f"metrics/{name}.csv is unreadable ({exc.__class__.__name__}); left out")
    return tables


def load_run(paths: RunPaths, *, refresh: bool = True) -> RunData:
    if not paths.root.exists():
        raise IntakeEvalError(f"{paths.root}: no such run folder; pass --run-dir or run `intake-eval generate` first")
    manifest = read_manifest(paths)
    damage: list[str] = []
    profiles, conversations, judgments = load_records(paths, damage)
    if not conversations:
        raise IntakeEvalError(
            f"{paths.root}: no conversations yet (conversations/*.jsonl); run `intake-eval run --clinician ALIAS` first"
        )
    notes: list[str] = list(damage)  # damaged files first: the counts below are short by those records
    if refresh:
        refresh_metrics(paths)
    tables = read_tables(paths, notes)
    data = RunData(paths, manifest, profiles, conversations, judgments, tables, notes)
    data.notes.extend(missing_notes(data))
    return data


def missing_notes(data: RunData) -> list[str]:
    """Plain sentences about what this run does not have yet."""
    notes = []
    if not data.judgments:
        notes.append("no judgments yet: run `intake-eval judge --judge ALIAS`; only transcripts are shown")
    finished = {cid for cid, conv in data.conversations.items() if conv.get("status", "ok") == "ok"}
    failed = len(data.conversations) - len(finished)
    if failed:
        notes.append(f"{failed} of {len(data.conversations)} conversations failed (model errors); they are counted, not scored")
    for judge, done in data.judgments.items():
        missing = len(finished - set(done))
        if missing:
            notes.append(f"judge {judge}: {missing} of {len(finished)} finished conversations not judged yet")
    unknown = {c["profile_id"] for c in data.conversations.values()} - set(data.profiles)
    if unknown:
        notes.append(f"{len(unknown)} profiles referenced by conversations are missing from profiles.jsonl")
    arms: dict[str, set[str]] = {}
    for conv in data.conversations.values():
        arms.setdefault(conv.get("clinician", "?"), set()).add(conv["profile_id"])
    for clinician, seen in sorted(arms.items()):
        missing = len(set(data.profiles) - seen)
        if missing and data.profiles:
            notes.append(f"clinician {clinician}: {missing} of {len(data.profiles)} profiles have no conversation yet")
    for stage, info in sorted(data.manifest.get("stages", {}).items()):
        # The report stage is "running" while this very report is being written.
        if stage != "report" and isinstance(info, dict) and info.get("status") == "running":
            notes.append(f"stage {stage} is still running (or was interrupted); numbers may change")
    return notes
