"""The one place that knows run-folder paths and how records reach disk.

Records are appended one JSON line at a time (a single write of a whole line, flushed), so a
crash or SIGKILL can at worst leave a half line at the end, which readers skip and the next
append repairs. Resume = skip keys already on disk. At the end of a stage a file is compacted:
latest record per key, sorted by key, atomically replaced, so a resumed run's file equals an
uninterrupted one's.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from intake_eval.core.fs import named_os_error, remove_quietly

# readers import the line readers from here too
from intake_eval.core.lines import ReadStats as ReadStats
from intake_eval.core.lines import iter_json_lines as iter_json_lines
from intake_eval.core.lines import iter_json_lines_at as iter_json_lines_at
from intake_eval.core.lines import iter_records as iter_records
from intake_eval.core.no_follow import open_no_follow, refuse_symlink

T = TypeVar("T", bound=BaseModel)

DEFAULT_RUN_DIR = Path("runs/default")


def file_safe(name: str) -> str:
    """Alias → file name: 'together_ai/meta-llama/X' → 'together_ai__meta-llama__X'."""
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", name.replace("/", "__"))
    return safe if set(safe) != {"."} else "_" * len(safe)  # "." / ".." would name this folder or its parent


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def profiles(self) -> Path:
        return self.root / "profiles.jsonl"

    @property
    def render_failures(self) -> Path:
        return self.root / "render_failures.jsonl"

    @property
    def sampling_rates(self) -> Path:
        """Cited, design and realised inclusion rate per phenotype × optional domain (generate)."""
        return self.root / "sampling_rates.csv"

    @property
    def conversations_dir(self) -> Path:
        return self.root / "conversations"

    def conversations(self, clinician: str) -> Path:
        return self.conversations_dir / f"{file_safe(clinician)}.jsonl"

    @property
    def judgments_dir(self) -> Path:
        return self.root / "judgments"

    def judgments(self, judge: str, clinician: str) -> Path:
        return self.judgments_dir / file_safe(judge) / f"{file_safe(clinician)}.jsonl"

    def judge_dir(self, judge: str) -> Path:
        """judgments/<judge>/: one judge's files, one per clinician."""
        return self.judgments_dir / file_safe(judge)

    @property
    def metrics_dir(self) -> Path:
        return self.root / "metrics"

    def metrics(self, name: str) -> Path:
        return self.metrics_dir / f"{name}.csv"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_index(self) -> Path:
        return self.report_dir / "index.html"

    @property
    def report_summary(self) -> Path:
        return self.report_dir / "summary.md"

    @property
    def report_headline(self) -> Path:
        return self.report_dir / "headline.csv"

    @property
    def report_shards_dir(self) -> Path:
        """Transcript-viewer data: conversations/<shard>.js next to index.html (loaded on demand)."""
        return self.report_dir / "conversations"

    @property
    def cache_db(self) -> Path:
        return self.root / "cache.sqlite"

    @property
    def stage_log(self) -> Path:
        """Append-only: one line per stage begin/finish and per invocation (its retries)."""
        return self.root / "stage_log.jsonl"

    @property
    def calls(self) -> Path:
        """Append-only call ledger: every provider request and answer as it happens (llm/ledger.py)."""
        return self.root / "calls.jsonl"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def qc_dir(self) -> Path:
        return self.root / "qc"

    @property
    def annotations_dir(self) -> Path:
        return self.root / "annotations"

    def qc_patient(self, patient: str, mode: str, style: str | None = None) -> Path:
        """Per-probe records of a patient QC run (a behaviour style other than the default has its own file)."""
        suffix = f"_{file_safe(style)}" if style and style != "forthcoming" else ""
        return self.qc_dir / f"patient_{file_safe(patient)}_{mode}{suffix}.jsonl"

    @property
    def annotation_form(self) -> Path:
        return self.annotations_dir / "form.html"

    @property
    def annotation_sheet(self) -> Path:
        return self.annotations_dir / "sheet.csv"

    @property
    def annotation_key(self) -> Path:
        """Item id → judge labels; never given to annotators."""
        return self.annotations_dir / "key.json"

    @property
    def superseded_dir(self) -> Path:
        return self.root / "superseded"

    @property
    def prompts_dir(self) -> Path:
        """The text of every prompt template a stage used, named by content hash (never rewritten)."""
        return self.root / "prompts"

    @property
    def rendered_prompts_dir(self) -> Path:
        """What each role and condition was told, as rendered, named by content hash."""
        return self.prompts_dir / "rendered"

    def conversation_files(self) -> list[Path]:
        return sorted(self.conversations_dir.glob("*.jsonl")) if self.conversations_dir.exists() else []

    def judgment_files(self) -> list[Path]:
        return sorted(self.judgments_dir.glob("*/*.jsonl")) if self.judgments_dir.exists() else []

    def linked_record_files(self) -> list[Path]:
        """Record and log files of this folder that are symbolic links (writes are refused through them)."""
        candidates = [self.profiles, self.render_failures, self.stage_log, self.manifest,
                      *self.conversation_files(), *self.judgment_files()]
        return [path for path in candidates if path.is_symlink()]

    def unreadable_lines(self) -> dict[str, int]:
        """Lines of the input files (profiles, conversations, judgments) readers skip now, per file
        relative to the root: the results are short by those records until their stage redoes them."""
        counts: dict[str, int] = {}
        for path in [self.profiles, *self.conversation_files(), *self.judgment_files()]:
            stats = ReadStats()
            with warnings.catch_warnings():  # each was announced when its stage read it
                warnings.simplefilter("ignore")
                for _ in iter_json_lines(path, stats):
                    pass
            if stats.skipped_corrupt:
                counts[path.relative_to(self.root).as_posix()] = stats.skipped_corrupt
        return counts


# ---------------------------------------------------------------- JSONL

def dumps_record(record: BaseModel | dict[str, Any]) -> str:
    data = record.model_dump(mode="json") if isinstance(record, BaseModel) else record
    return json.dumps(data, ensure_ascii=False, sort_keys=False, separators=(",", ":"))


def _repair_tail(path: Path) -> None:
    """Drop a half-written last line (from a crash) so the next append starts on a fresh line.

    The exclusive lock waits for appends in flight (each holds a shared lock while it writes), so
    a line another process is still writing is never mistaken for a crash's half line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with os.fdopen(open_no_follow(path, os.O_RDWR, "record file"), "rb+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        cut = data.rfind(b"\n") + 1
        handle.truncate(cut)


class JsonlWriter:
    """Appends whole lines with one os.write each: concurrent tasks never interleave half-lines."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        refuse_symlink(path, "record file")
        _repair_tail(path)
        self._fd = open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "record file")

    def write(self, record: BaseModel | dict[str, Any]) -> None:
        data = (dumps_record(record) + "\n").encode("utf-8")
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            with named_os_error(self.path):
                written = os.write(self._fd, data)
                while written < len(data):  # a short write (signal, full disk) must not leave half a line
                    written += os.write(self._fd, data[written:])
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def append_record(path: Path, record: BaseModel | dict[str, Any]) -> None:
    with JsonlWriter(path) as writer:
        writer.write(record)


def latest_by_key(path: Path, model: type[T], key: str) -> dict[str, T]:
    """Latest record per key (a retried failure is superseded by its later success)."""
    latest: dict[str, T] = {}
    for record in iter_records(path, model):
        latest[getattr(record, key)] = record
    return latest


def done_keys(path: Path, key: str, ok_only: bool = True) -> set[str]:
    """Keys of valid records already finished on disk (status 'ok' unless ok_only is False)."""
    latest: dict[str, bool] = {}
    for data in iter_json_lines(path):
        if key in data:
            latest[str(data[key])] = data.get("status", "ok") == "ok"
    return {k for k, ok in latest.items() if ok or not ok_only}


def compact(path: Path, key: str) -> int:
    """Rewrite a JSONL file as its latest valid record per key, sorted by key, atomically. Returns count.

    Only where each latest line sits is kept in memory (its offset and length); the lines are read back
    one at a time while writing, so memory does not grow with the records' text."""
    if not path.exists():
        return 0
    refuse_symlink(path, "record file")
    latest: dict[str, tuple[int, int]] = {}
    for data, start, length in iter_json_lines_at(path):
        if key in data:
            latest[str(data[key])] = (start, length)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with named_os_error(path), open(path, "rb") as source, open(tmp, "w", encoding="utf-8") as handle:
            for k in sorted(latest):
                start, length = latest[k]
                line = os.pread(source.fileno(), length, start)
                handle.write(json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")) + "\n")
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)  # the original file is untouched; the next compaction starts over
        raise
    return len(latest)


def drop_records(path: Path, unwanted: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite a JSONL file without the records ``unwanted`` picks (atomically); returns how many went."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for data in iter_json_lines(path):
        if unwanted(data):
            dropped += 1
        else:
            kept.append(dumps_record(data) + "\n")
    if dropped:
        write_text_atomic(path, "".join(kept))
    return dropped


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with named_os_error(path):
            tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise


# ---------------------------------------------------------------- hashing

def stable_hash(data: Any) -> str:
    """sha256 of canonical JSON: the config hash and cache keys use this, never hash()."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
