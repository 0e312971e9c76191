"""Read a run folder for the report: manifest, metrics CSVs (refreshed when stale) and the records.

Records are streamed once (latest per key, like ``store.latest_by_key``) and only compact summaries
are kept: per profile what the page shows, per conversation its ids, arm, status and patient spend,
per judgment its status, the drill-down outcome of each hidden domain and a short label signature
(for the agreement hotspots), plus where the full record sits on disk (``RecordIndex``). They are
kept in a SQLite file (``core.spill``: a hidden folder inside the folder the command writes, given as
``spill_in``), not as Python objects, and read back through the same Mapping interface; ``RunData.close``
removes that file. The viewer shards read full records back
one shard at a time, so memory stays flat as runs grow.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.lines import parse_line
from intake_eval.core.manifest import parse_manifest
from intake_eval.core.spill import (
    SpilledLocations,
    SpilledRows,
    SpilledSet,
    SpillStore,
)
from intake_eval.core.store import (
    ReadStats,
    RunPaths,
    iter_json_lines,
    iter_json_lines_at,
)
from intake_eval.metrics.answers import write_answer_tables
from intake_eval.metrics.tables import write_metrics
from intake_eval.metrics.trials import write_trial_metrics
from intake_eval.report.metric_tables import MetricTables, table_file
from intake_eval.report.slim_records import slim_conversation, slim_judgment, slim_profile
from intake_eval.stage_kinds import REPORT_STAGE, stage_kinds

METRIC_TABLES = ("conversations", "cells", "domains", "trajectories", "agreement", "clinicians", "comparisons", "masking",
                 "masking_model", "intervals")
OPTIONAL_TABLES = ("answers", "safety", "diagnosis", "capacity_gap", "trials", "patient_qc", "patient_qc_domains",
                   "annotation_agreement", "styles", "style_pairs", "patient_population", "patient_qc_population",
                   "patient_models")


@dataclass
class RunData:
    paths: RunPaths
    manifest: dict[str, Any]
    profiles: Mapping[str, dict[str, Any]]  # profile_id -> slim profile dict (``slim_profile``; SpilledRows)
    conversations: Mapping[str, dict[str, Any]]  # conversation_id -> slim conversation (``slim_conversation``; SpilledRows)
    judgments: Mapping[str, Mapping[str, dict[str, Any]]]  # judge -> conversation_id -> slim judgment (``slim_judgment``)
    tables: Mapping[str, Any] = field(default_factory=dict)  # name -> pandas DataFrame (MetricTables: read lazily)
    notes: list[str] = field(default_factory=list)  # what is missing / stale, said plainly
    primary_judge: str | None = None  # the judge the report's numbers follow (set by build_report: --judge)
    index: RecordIndex | None = None  # where the full conversation / judgment records are (viewer shards)

    @property
    def judges(self) -> list[str]:
        return list(self.judgments)

    def close(self) -> None:
        if self.index is not None:
            self.index.close()


class RecordIndex:
    """Where each latest full record sits: (file number, byte offset, length) in files opened at load time.

    Records are read back with ``os.pread`` (no shared file position, so forked shard workers can
    read concurrently), from the very files that were indexed even if a stage compacts them meanwhile.
    It owns the ``SpillStore`` that holds the locations and the report's slim rows; ``close`` removes it."""

    def __init__(self, store: SpillStore) -> None:
        self.store = store
        self.paths: list[Path] = []
        self.fds: list[int] = []
        self.conversations = SpilledLocations(self.store)
        self.judgments: dict[str, SpilledLocations] = {}

    def add_file(self, path: Path) -> int:
        self.paths.append(path)
        self.fds.append(os.open(path, os.O_RDONLY))
        return len(self.fds) - 1

    def read(self, at: tuple[int, int, int]) -> dict[str, Any]:
        number, offset, length = at
        return parse_record(os.pread(self.fds[number], length, offset))

    def conversation(self, cid: str) -> dict[str, Any]:
        return self.read(self.conversations[cid])

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        self.store.close()


def parse_record(line: bytes) -> dict[str, Any]:
    """A record line read back (one ``json.loads`` already accepted) as ``json.loads`` parses it (core/lines)."""
    return cast(dict[str, Any], parse_line(line))


def read_manifest(paths: RunPaths) -> dict[str, Any]:
    if not paths.manifest.exists():
        return {}
    try:
        text = paths.manifest.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise IntakeEvalError(f"{paths.manifest}: manifest is unreadable ({exc.__class__.__name__})") from None
    return parse_manifest(paths.manifest, text)


def damage_note(path: Path, stats: ReadStats) -> str:
    """One banner line for a file with skipped lines: how many, and that the results are short by them."""
    parts = [f"{stats.skipped_corrupt} unreadable line(s) skipped"] if stats.skipped_corrupt else []
    parts += ["a half-written last line ignored"] if stats.truncated_tail else []
    return (f"{path}: {' and '.join(parts)}; the results are short by those records (rerun the stage that "
            "writes it to redo them)")


def _latest(path: Path, key: str, damage: list[str] | None = None) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    stats = ReadStats()
    for data in iter_json_lines(path, stats):
        if key in data:
            latest[str(data[key])] = data
    if damage is not None and (stats.skipped_corrupt or stats.truncated_tail):
        damage.append(damage_note(path, stats))
    return latest


def _scan(path: Path, key: str, index: RecordIndex, damage: list[str] | None):
    """(key, record, (file, offset, length)) per good line, in file order; damage noted like ``_latest``."""
    stats = ReadStats()
    if not path.exists():
        return
    number_in_index = index.add_file(path)
    for data, start, length in iter_json_lines_at(path, stats):
        if key in data:
            yield str(data[key]), data, (number_in_index, start, length)
    if damage is not None and (stats.skipped_corrupt or stats.truncated_tail):
        damage.append(damage_note(path, stats))


def load_records(paths: RunPaths, damage: list[str] | None = None, *, spill_in: Path | None
                 ) -> tuple[SpilledRows, SpilledRows, dict[str, SpilledRows], RecordIndex]:
    """Latest record per key of every file, as slim summaries plus a ``RecordIndex`` of the full records,
    all held in the index's ``SpillStore`` (in ``spill_in``, see ``load_run``); ``damage`` collects a sentence
    per file with skipped lines."""
    index = RecordIndex(SpillStore("report", spill_in))
    try:
        profiles = SpilledRows(index.store)
        for pid, data, _ in _scan(paths.profiles, "profile_id", index, damage):
            profiles.put(pid, slim_profile(data))
        conversations = SpilledRows(index.store)
        for path in paths.conversation_files():
            for cid, data, at in _scan(path, "conversation_id", index, damage):
                conversations.put(cid, slim_conversation(data))
                index.conversations[cid] = at
        judgments: dict[str, SpilledRows] = {}
        for path in paths.judgment_files():
            for cid, data, at in _scan(path, "conversation_id", index, damage):  # a later line supersedes
                profile = profiles.get(conversations.get(cid, {}).get("profile_id", ""), {})
                hidden = [d["domain"] for d in profile.get("hidden", [])]
                judge = str(data.get("judge") or path.parent.name)
                if judge not in judgments:
                    judgments[judge] = SpilledRows(index.store)
                    index.judgments[judge] = SpilledLocations(index.store)
                judgments[judge].put(cid, slim_judgment(data, hidden))
                index.judgments[judge][cid] = at
        index.store.commit()  # visible to the forked shard workers' own connections
    except BaseException:
        index.close()
        raise
    return profiles, conversations, judgments, index


def order_judges(judgments: Mapping[str, Sized], manifest: dict[str, Any], prefer: str | None) -> list[str]:
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
    """Tables missing (neither CSV nor Parquet), or older than a judgment/conversation/profile file they
    are computed from."""
    files = [table_file(paths, name) for name in METRIC_TABLES]
    if any(path is None for path in files):
        return True
    # The per-conversation table, as each of its files was written (its CSV and its Parquet file): the older counts.
    written = [path for path in (paths.metrics("conversations"), paths.metrics("conversations").with_suffix(".parquet"))
               if path.exists()]
    built = min(path.stat().st_mtime for path in written)
    sources = [paths.profiles, *paths.conversation_files(), *paths.judgment_files()]
    return any(src.exists() and src.stat().st_mtime > built for src in sources)


def refresh_metrics(paths: RunPaths) -> None:
    if not paths.judgment_files():
        if paths.conversation_files():  # failed and cut answers are counted before anything is judged
            write_answer_tables(paths)
        return
    if not metrics_stale(paths):
        return

    write_metrics(paths, stage_kinds())
    write_trial_metrics(paths)  # metrics/trials.csv only when the run repeats trials


def read_tables(paths: RunPaths, notes: list[str]) -> MetricTables:
    """The metrics tables, each read when first used (``metric_tables.MetricTables``); a missing
    headline table is noted."""
    tables = MetricTables(paths, METRIC_TABLES + OPTIONAL_TABLES, notes)
    if paths.judgment_files():
        notes.extend(f"metrics/{name}.csv is missing" for name in METRIC_TABLES if name not in tables)
    return tables


def load_run(paths: RunPaths, *, spill_in: Path | None, refresh: bool = True) -> RunData:
    """``spill_in``: the output folder the command is writing (the report's report/, an export's staging
    folder), where the per-conversation rows are spilled; None only for a reader that writes nothing
    (the system temporary folder)."""
    if not paths.root.exists():
        raise IntakeEvalError(f"{paths.root}: no such run folder; pass --run-dir or run `intake-eval generate` first")
    manifest = read_manifest(paths)
    if refresh and paths.conversation_files():
        refresh_metrics(paths)  # before the records are held: the peak is the larger of the two, not their sum
    damage: list[str] = []
    profiles, conversations, judgments, index = load_records(paths, damage, spill_in=spill_in)
    if not conversations:
        index.close()
        raise IntakeEvalError(
            f"{paths.root}: no conversations yet (conversations/*.jsonl); run `intake-eval run --clinician ALIAS` first"
        )
    notes: list[str] = list(damage)  # damaged files first: the counts below are short by those records
    data = RunData(paths, manifest, profiles, conversations, judgments, {}, notes, index=index)
    try:
        data.tables = read_tables(paths, notes)
        data.notes.extend(missing_notes(data))
    except BaseException:
        data.close()
        raise
    return data


def spill_store(data: RunData) -> SpillStore:
    """Where per-conversation working sets of the report go (the run's own store, held until ``close``)."""
    if data.index is None:
        data.index = RecordIndex(SpillStore("report", data.paths.report_dir))
    return data.index.store


def in_key_order(mapping: Mapping[str, Any]) -> Callable[[str], Any]:
    """``mapping.get`` for keys asked in ascending order: a spilled table is walked once in key order beside the
    caller's own walk (no query per key); a plain mapping is asked directly."""
    if not isinstance(mapping, SpilledRows):
        return mapping.get
    pending = mapping.sorted_items()
    current: list[Any] = [None, None]  # the walk's next (key, value); key None once it is done

    def advance() -> None:
        current[0], current[1] = next(pending, (None, None))

    advance()

    def get(key: str) -> Any:
        while current[0] is not None and current[0] < key:
            advance()
        return current[1] if current[0] == key else None

    return get


def missing_notes(data: RunData) -> list[str]:
    """Plain sentences about what this run does not have yet (counted in one pass per question, no
    per-conversation set held in memory)."""
    notes = []
    if not data.judgments:
        notes.append("no judgments yet: run `intake-eval judge --judge ALIAS`; only transcripts are shown")
    finished = sum(1 for conv in data.conversations.values() if conv.get("status", "ok") == "ok")
    failed = len(data.conversations) - finished
    if failed:
        notes.append(f"{failed} of {len(data.conversations)} conversations failed (model errors); they are counted, not scored")
    for judge, done in data.judgments.items():
        judged = in_key_order(done)
        missing = sum(1 for cid, conv in items_in_key_order(data.conversations)
                      if conv.get("status", "ok") == "ok" and judged(cid) is None)
        if missing:
            notes.append(f"judge {judge}: {missing} of {finished} finished conversations not judged yet")
    unknown = {c["profile_id"] for c in data.conversations.values() if c["profile_id"] not in data.profiles}
    if unknown:
        notes.append(f"{len(unknown)} profiles referenced by conversations are missing from profiles.jsonl")
    for clinician, seen in _profiles_seen(data).items():
        missing = len(data.profiles) - seen
        if missing and data.profiles:
            notes.append(f"clinician {clinician}: {missing} of {len(data.profiles)} profiles have no conversation yet")
    for stage, info in sorted(data.manifest.get("stages", {}).items()):
        # The report stage is "running" while this very report is being written.
        if stage != REPORT_STAGE and isinstance(info, dict) and info.get("status") == "running":
            notes.append(f"stage {stage} is still running (or was interrupted); numbers may change")
    return notes


def items_in_key_order(mapping: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(key, value) in ascending key order (what ``in_key_order`` walks beside)."""
    return mapping.sorted_items() if isinstance(mapping, SpilledRows) else iter(sorted(mapping.items()))


def _profiles_seen(data: RunData) -> dict[str, int]:
    """clinician → how many of profiles.jsonl's profiles it has a conversation of, clinicians sorted."""
    pairs = SpilledSet(spill_store(data))  # "clinician NUL profile id": sorts by clinician, then profile
    clinicians: set[str] = set()
    for conv in data.conversations.values():
        clinician = conv.get("clinician", "?")
        clinicians.add(clinician)
        if conv["profile_id"] in data.profiles:
            pairs.add(f"{clinician}\x00{conv['profile_id']}")
    seen = dict.fromkeys(sorted(clinicians), 0)
    for pair in pairs.sorted_keys():
        seen[pair.split("\x00", 1)[0]] += 1
    return seen


def domain_labels(data: RunData) -> dict[str, str]:
    """domain id → the label the profiles give it (the catalog's wording), for every domain drawn."""
    labels: dict[str, str] = {}
    for profile in data.profiles.values():
        for draw in [profile.get("presenting", {})] + profile.get("hidden", []):
            if draw.get("domain"):
                labels.setdefault(draw["domain"], draw.get("label") or draw["domain"].replace("_", " "))
    return labels
