"""`intake-eval merge`: N shard folders of one study (``--shard i/N``) joined into one run folder.

Checks first, writes nothing until every check passed: each folder is a shard (its stages record a
``--shard`` spec), the shards are exactly 1..N of one N (a repeated shard is an overlap, a missing
one a gap), and they share what makes them one study — the same stages with the same configs once
the shard spec is set aside (generate, run, judges, forks, models and prompts included in those
configs), the same profiles.jsonl, the same models, prompts and study config. Then records are
unioned: conversations/ (forks are conversations) and judgments/, latest record per conversation id
and sorted by it, exactly as one folder's compaction leaves them, so the merged files equal a
single-folder run's. A conversation found in two shards, or in a shard its profile does not belong
to, is an overlap; a profile no shard holds a conversation for is a gap. Stage logs (each line
tagged with its shard) and call logs (``calls.jsonl``, unchanged lines) are concatenated in shard
order; prompt snapshots are unioned; profiles, sampling rates and patient QC come from shard 1
(each shard generated the same profiles from the same seed). The response cache is not merged.

The manifest is shard 1's with every stage config unsharded (so its config hashes are a
single-folder run's), counts and usage summed over the shards, each stage's status the shards'
worst, the report stage dropped (``report`` rebuilds it), and ``merged_from`` naming each shard's
folder, spec, config hash, versions and source revision. Everything is written into a temporary
folder beside the target and renamed into place, so a failed merge leaves no half-merged folder.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.manifest import diff_configs, now_iso, package_versions, parse_manifest
from intake_eval.core.records import Usage
from intake_eval.core.shard import Shard, shard_from_config, shard_index, unsharded
from intake_eval.core.store import (
    RunPaths,
    file_hash,
    iter_json_lines,
    stable_hash,
    write_text_atomic,
)
from intake_eval.stage_kinds import REPORT_STAGE  # rebuilt by `report` from the merged records, never merged
from intake_eval.trust.qc_tables import QC_DOMAIN_METRICS, QC_METRICS, QC_POPULATION_METRICS

CALL_LOG = "calls.jsonl"  # a per-call log, when the shards have one: concatenated as it is
STATUS_ORDER = ("failed", "interrupted", "incomplete", "running", "partial", "done")  # worst first
COPIED_FROM_FIRST = ("profiles.jsonl", "sampling_rates.csv", "render_failures.jsonl")


@dataclass
class ShardFolder:
    paths: RunPaths
    manifest: dict[str, Any]
    shard: Shard

    @property
    def label(self) -> str:
        return f"{self.paths.root} (shard {self.shard})"


@dataclass
class MergeResult:
    into: Path
    shards: int
    conversations: int
    judgments: int


def merge_shards(folders: list[Path], into: Path) -> MergeResult:
    """Check the shard folders, then write their union into ``into`` (new or empty)."""
    _check_target(into)
    if not folders:
        raise IntakeEvalError("merge: name the shard folders to merge (SHARD_DIR…)")
    shards = sorted((_load(Path(folder)) for folder in folders), key=lambda s: s.shard.index)
    _check_shard_set(shards)
    _check_same_study(shards)
    work = into.parent / f".{into.name}.merging-{os.getpid()}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    try:
        target = RunPaths(work)
        conversations = _union_records(shards, lambda p: p.conversation_files(), target, check_profile=True)
        judgments = _union_records(shards, lambda p: p.judgment_files(), target, check_profile=False)
        _check_coverage(shards[0], target)
        _copy_shared_files(shards, target)
        _concat_logs(shards, target)
        _write_manifest(shards, target, into)
        if into.exists():
            into.rmdir()  # empty (checked): the merged folder takes its place
        os.replace(work, into)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return MergeResult(into=into, shards=len(shards), conversations=conversations, judgments=judgments)


# ---------------------------------------------------------------- checks

def _check_target(into: Path) -> None:
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise IntakeEvalError(f"--into {into}: exists and is not an empty folder; merge writes only into a new or "
                              "empty folder (it never overwrites a run)")


def _load(folder: Path) -> ShardFolder:
    paths = RunPaths(folder)
    if not paths.manifest.is_file():
        raise IntakeEvalError(f"{folder}: no manifest.json; not a run folder (merge joins folders made with --shard)")
    data = parse_manifest(paths.manifest, paths.manifest.read_text(encoding="utf-8"))
    recorded = (shard_from_config(stage.get("config", {})) for name, stage in data.get("stages", {}).items()
                if name != REPORT_STAGE)
    specs = {spec for spec in recorded if spec is not None}
    if not specs:
        raise IntakeEvalError(f"{folder}: not a shard (no stage records a --shard i/N); merge joins folders made "
                              "with run/judge/study --shard")
    if len(specs) > 1:
        raise IntakeEvalError(f"{folder}: its stages record different shards ({', '.join(sorted(map(str, specs)))})")
    return ShardFolder(paths=paths, manifest=data, shard=specs.pop())


def _check_shard_set(shards: list[ShardFolder]) -> None:
    counts = {s.shard.count for s in shards}
    if len(counts) > 1:
        raise IntakeEvalError("merge: the shards split the study differently: "
                              + ", ".join(s.label for s in shards))
    count = counts.pop()
    seen: dict[int, ShardFolder] = {}
    for shard in shards:
        if shard.shard.index in seen:
            raise IntakeEvalError(f"merge: overlap: shard {shard.shard} is given twice ({seen[shard.shard.index].paths.root} "
                                  f"and {shard.paths.root})")
        seen[shard.shard.index] = shard
    missing = [f"{index}/{count}" for index in range(1, count + 1) if index not in seen]
    if missing:
        raise IntakeEvalError(f"merge: gap: shard {', '.join(missing)} missing; merge needs every shard 1..{count}")


def _comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """What every shard of one study shares: stage configs without the shard spec, models, prompts."""
    study = manifest.get("study") or {}
    return {
        "stages": {name: unsharded(stage.get("config", {})) for name, stage in manifest.get("stages", {}).items()
                   if name != REPORT_STAGE},
        "models": manifest.get("models", {}),
        "prompts": manifest.get("prompts", {}),
        "primary judge": (manifest.get("judges") or {}).get("primary"),
        "study config": study.get("study_config_hash"),
    }


def _check_same_study(shards: list[ShardFolder]) -> None:
    first = shards[0]
    reference = _comparable(first.manifest)
    profiles = _profiles_hash(first)
    for other in shards[1:]:
        theirs = _comparable(other.manifest)
        if set(theirs["stages"]) != set(reference["stages"]):
            apart = sorted(set(theirs["stages"]) ^ set(reference["stages"]))
            raise IntakeEvalError(f"merge: {other.label} and {first.label} ran different stages "
                                  f"({', '.join(apart)}); finish the same stages in every shard")
        if stable_hash(theirs) != stable_hash(reference):
            changes = diff_configs(reference, theirs)
            raise IntakeEvalError(f"merge: {other.label} was made with another configuration than {first.label} "
                                  f"({'; '.join(changes[:3])}{'; …' if len(changes) > 3 else ''})")
        if _profiles_hash(other) != profiles:
            raise IntakeEvalError(f"merge: {other.paths.profiles} differs from {first.paths.profiles}; the shards "
                                  "of one study share the same profiles")


def _profiles_hash(shard: ShardFolder) -> str:
    if not shard.paths.profiles.is_file():
        raise IntakeEvalError(f"{shard.paths.profiles}: missing; every shard holds the study's profiles")
    return file_hash(shard.paths.profiles)


def _check_coverage(first: ShardFolder, target: RunPaths) -> None:
    """A gap: a profile none of the shards holds a conversation for (a shard not run, or cut short)."""
    covered = {str(data.get("profile_id")) for path in target.conversation_files() for data in iter_json_lines(path)}
    count = first.shard.count
    missing = [str(data.get("profile_id")) for data in iter_json_lines(first.paths.profiles)
               if str(data.get("profile_id")) not in covered]
    if missing:
        owners = sorted({f"{shard_index(pid, count)}/{count}" for pid in missing})
        raise IntakeEvalError(f"merge: gap: {len(missing)} profiles have no conversation (e.g. {missing[0]}, shard "
                              f"{', '.join(owners)}); finish those shards (rerun their command) before merging")


# ---------------------------------------------------------------- records

def _union_records(shards: list[ShardFolder], files: Callable[[RunPaths], list[Path]], target: RunPaths, *,
                   check_profile: bool) -> int:
    """Every record file of the shards (same relative path) as one: latest record per conversation
    id within a shard, sorted by id, as compaction writes it. Returns the records written."""
    by_name: dict[str, list[tuple[ShardFolder, Path]]] = {}
    for shard in shards:
        for path in files(shard.paths):
            by_name.setdefault(path.relative_to(shard.paths.root).as_posix(), []).append((shard, path))
    written = 0
    for name, sources in sorted(by_name.items()):
        merged: dict[str, str] = {}
        owner: dict[str, ShardFolder] = {}
        for shard, path in sources:
            latest: dict[str, dict[str, Any]] = {}
            for data in iter_json_lines(path):
                if "conversation_id" in data:
                    latest[str(data["conversation_id"])] = data
            for key, data in latest.items():
                if key in owner:
                    raise IntakeEvalError(f"merge: overlap: {name} holds {key} in {owner[key].label} and in "
                                          f"{shard.label}")
                if check_profile and not shard.shard.holds(str(data.get("profile_id"))):
                    raise IntakeEvalError(f"merge: overlap: {shard.paths.root / name} holds {key}, whose profile "
                                          f"belongs to shard {shard_index(str(data.get('profile_id')), shard.shard.count)}"
                                          f"/{shard.shard.count}, not {shard.shard}")
                owner[key] = shard
                merged[key] = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        out = target.root / name
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", encoding="utf-8") as handle:
            for key in sorted(merged):
                handle.write(merged[key] + "\n")
        written += len(merged)
    return written


def _copy_shared_files(shards: list[ShardFolder], target: RunPaths) -> None:
    first = shards[0].paths
    for name in COPIED_FROM_FIRST:
        if (first.root / name).is_file():
            shutil.copy2(first.root / name, target.root / name)
    if first.qc_dir.is_dir():  # patient QC runs before the shard split: the same in every shard
        shutil.copytree(first.qc_dir, target.qc_dir)
        for table in (QC_METRICS, QC_DOMAIN_METRICS, QC_POPULATION_METRICS):
            if first.metrics(table).is_file():
                target.metrics_dir.mkdir(exist_ok=True)
                shutil.copy2(first.metrics(table), target.metrics(table))
    for shard in shards:  # named by content hash: the same name is the same text
        if shard.paths.prompts_dir.is_dir():
            shutil.copytree(shard.paths.prompts_dir, target.prompts_dir, dirs_exist_ok=True)


def _concat_logs(shards: list[ShardFolder], target: RunPaths) -> None:
    with open(target.stage_log, "w", encoding="utf-8") as log:
        for shard in shards:
            for data in iter_json_lines(shard.paths.stage_log):
                log.write(json.dumps({**data, "shard": str(shard.shard)}, ensure_ascii=False,
                                     separators=(",", ":")) + "\n")
        log.write(json.dumps({"time": now_iso(), "pid": os.getpid(), "event": "merge",
                              "shards": [str(s.paths.root) for s in shards]}) + "\n")
    calls = [shard.paths.root / CALL_LOG for shard in shards if (shard.paths.root / CALL_LOG).is_file()]
    if calls:
        with open(target.root / CALL_LOG, "wb") as out:
            for path in calls:
                content = path.read_bytes()
                out.write(content if not content or content.endswith(b"\n")
                          else content[: content.rfind(b"\n") + 1])


# ---------------------------------------------------------------- manifest

def _summed(values: list[Any]) -> Any:
    """Numbers added, mappings merged key by key, anything else as the first shard has it."""
    first = values[0]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sum(values)
    if all(isinstance(v, dict) for v in values):
        keys = list(dict.fromkeys(k for v in values for k in v))
        return {k: _summed([v[k] for v in values if k in v]) for k in keys}
    return first


def _merged_stage(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """A sharded stage: counts, retries and usage summed, the worst status. A stage every shard ran
    whole (generate, patient QC: before the split) is shard 1's, whose files the merged folder holds."""
    stage = copy.deepcopy(stages[0])
    if shard_from_config(stage.get("config", {})) is None:
        return stage
    stage["config"] = unsharded(stage.get("config", {}))
    stage["config_hash"] = stable_hash(stage["config"])
    statuses = [str(s.get("status", "")) for s in stages]
    stage["status"] = min(statuses, key=lambda s: STATUS_ORDER.index(s) if s in STATUS_ORDER else 0)
    for key in ("counts", "retries"):
        present = [s[key] for s in stages if isinstance(s.get(key), dict)]
        if present:
            stage[key] = _summed(present)
    usage: dict[str, Usage] = {}
    for s in stages:
        for alias, value in (s.get("usage") or {}).items():
            usage[alias] = usage.get(alias, Usage()).add(Usage.model_validate(value))
    stage["usage"] = {alias: value.model_dump() for alias, value in sorted(usage.items())}
    stage.pop("pid", None)
    return stage


def _write_manifest(shards: list[ShardFolder], target: RunPaths, into: Path) -> None:
    data = copy.deepcopy(shards[0].manifest)
    data["stages"] = {name: _merged_stage([s.manifest["stages"][name] for s in shards])
                      for name in data.get("stages", {}) if name != REPORT_STAGE}
    data["config_hash"] = stable_hash({k: v.get("config_hash") for k, v in sorted(data["stages"].items())})
    data["run_name"] = into.name
    data["created"] = now_iso()
    known: dict[str, Any] = {}
    for shard in shards:
        known.update(shard.manifest.get("structured_output") or {})
    if known:
        data["structured_output"] = known
    study = data.get("study")
    if isinstance(study, dict):
        study.pop("shard", None)
        study.pop("last_run", None)
        study["history"] = [{**entry, "shard": str(s.shard)} for s in shards
                            for entry in (s.manifest.get("study") or {}).get("history", [])]
    data["merged_from"] = [{
        "shard": str(s.shard), "path": str(s.paths.root.resolve()), "run_name": s.manifest.get("run_name"),
        "created": s.manifest.get("created"), "updated": s.manifest.get("updated"),
        "config_hash": s.manifest.get("config_hash"), "source": s.manifest.get("source"),
        "versions": s.manifest.get("versions"),
        "stages": {name: {"status": stage.get("status"), "usage": stage.get("usage", {})}
                   for name, stage in sorted(s.manifest.get("stages", {}).items())},
    } for s in shards]
    data["updated"] = now_iso()
    data["versions"] = package_versions()  # the merging intake-eval; each shard's are in merged_from
    write_text_atomic(target.manifest, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
