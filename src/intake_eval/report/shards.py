"""Writing the transcript viewer's shards: ``report/conversations/<shard>.js``, each a script registering the
compact conversations (report/viewer) of a block of ``PROFILES_PER_SHARD`` profiles, written a shard at a time
(by forked workers on big runs) into a staging folder swapped in whole, and kept while their inputs'
fingerprint is unchanged.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.fs import as_if_made_by_mkdir, named_os_error
from intake_eval.core.schema import package_version
from intake_eval.core.spill import SpilledRows, SpilledSet
from intake_eval.core.store import stable_hash
from intake_eval.report.viewer import compact_conversation

PROFILES_PER_SHARD = 10


def shard_name(index: int) -> str:
    return f"s{index:05d}"


# Inputs of the shard workers, inherited through fork (copy-on-write) rather than pickled.
_SHARD_INPUT: dict[str, Any] = {}
PARALLEL_MIN_CONVERSATIONS = 2000


def _write_shard_batch(batch: list[tuple[str, list[tuple[str, list[str]]]]]) -> int:
    staging, profiles, index, judges, diagnosis = (
        _SHARD_INPUT[k] for k in ("staging", "profiles", "index", "judges", "diagnosis"))
    judged = [(judge, index.judgments.get(judge, {})) for judge in judges]
    written = 0
    for name, members in batch:  # full records are read back from disk one shard at a time
        payload = {}
        for pid, cids in members:
            profile = profiles.get(pid)  # one look-up per profile, not per conversation
            for cid in cids:
                per_judge = {}
                for judge, locations in judged:
                    at = locations.get(cid)
                    if at is not None:
                        per_judge[judge] = index.read(at)
                payload[cid] = compact_conversation(index.conversation(cid), profile, per_judge, diagnosis.get(cid))
        # check_circular=False: a tree of parsed JSON has no cycles; the encoder skips its id() bookkeeping
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), check_circular=False).replace("</", "<\\/")
        (staging / f"{name}.js").write_text(f"IE_SHARD({json.dumps(name)},{text});\n", encoding="utf-8")
        written += len(payload)
    return written


SHARD_FORMAT = 2  # bump when the shard payload changes, so cached shards are rewritten
FINGERPRINT_FILE = ".fingerprint"


def sources_fingerprint(sources: list[Path], judges: list[str]) -> str:
    """Identifies the inputs of the shards: every source file's size and mtime, the judges' order."""

    stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sources if p.exists()]
    return stable_hash({"files": stats, "judges": judges, "format": SHARD_FORMAT, "per_shard": PROFILES_PER_SHARD,
                        "version": package_version()})


class ShardAssignment(Mapping[str, str]):
    """conversation_id -> shard name, through the conversation's profile (a shard holds whole profiles)."""

    def __init__(self, conversations: Mapping[str, dict[str, Any]], profile_shards: Mapping[str, str]) -> None:
        self._conversations = conversations
        self._profile_shards = profile_shards

    def __getitem__(self, cid: str) -> str:
        return self.of_profile(self._conversations[cid].get("profile_id", ""))

    def of_profile(self, pid: str) -> str:
        """The shard of a profile's conversations."""
        return str(self._profile_shards[pid])

    def __iter__(self) -> Iterator[str]:
        return iter(self._conversations)

    def __len__(self) -> int:
        return len(self._conversations)


Shard = tuple[str, list[tuple[str, list[str]]]]  # (shard name, [(profile id, its conversation ids sorted), …])


def _shards(members: SpilledSet) -> Iterator[Shard]:
    """Shards in order: ``PROFILES_PER_SHARD`` profiles each, profiles sorted, a profile's conversations sorted
    (``members`` holds "profile id NUL conversation id", which sorts by profile, then conversation)."""
    profiles: list[tuple[str, list[str]]] = []
    number = 0
    for member in members.sorted_keys():
        pid, cid = member.split("\x00", 1)
        if not profiles or profiles[-1][0] != pid:
            if len(profiles) == PROFILES_PER_SHARD:
                yield shard_name(number), profiles
                number, profiles = number + 1, []
            profiles.append((pid, []))
        profiles[-1][1].append(cid)
    if profiles:
        yield shard_name(number), profiles


def _batches(shards: Iterator[Shard], size: int = 8) -> Iterator[list[Shard]]:
    batch: list[Shard] = []
    for shard in shards:
        batch.append(shard)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def write_shards(target: Path, profiles: Mapping[str, dict[str, Any]], conversations: Mapping[str, dict[str, Any]],
                 index: Any, judges: list[str], progress: Callable[[int], None] | None = None,
                 fingerprint: str | None = None, diagnosis: Mapping[str, dict[str, Any]] | None = None) -> ShardAssignment:
    """Write conversations/<shard>.js files (in parallel on big runs); returns conversation_id -> shard name.

    ``conversations`` only needs each conversation's ``profile_id``; the full conversation and judgment
    records (``judges``' only, in that order) are read back through ``index`` (``load.RecordIndex``)
    one shard at a time, and the shards' membership is walked from ``index.store`` (``spill``), so
    memory does not grow with the run.
    With a ``fingerprint`` equal to the one stored beside the shards, the shards on disk are
    already these inputs' and are kept (a rerun of the report on an unchanged run is quick).
    ``diagnosis`` is ``diagnosis_facts`` of metrics/diagnosis.csv (formulation mapping per conversation).
    Two reports writing at once each build their own folder and swap it in; the last one wins."""
    members = SpilledSet(index.store)
    for cid, conv in conversations.items():
        members.add(f"{conv.get('profile_id', '')}\x00{cid}")
    profile_shards = SpilledRows(index.store)
    for name, shard_profiles in _shards(members):
        for pid, _ in shard_profiles:
            profile_shards.put(pid, name)
    index.store.commit()  # the shard workers read through their own connections
    assignment = ShardAssignment(conversations, profile_shards)
    stamp = target / FINGERPRINT_FILE
    try:
        unchanged = bool(fingerprint) and stamp.read_text(encoding="utf-8") == fingerprint
    except OSError:  # no shards yet, or another report is swapping them right now
        unchanged = False
    if unchanged:
        if progress:
            progress(len(conversations))
        return assignment
    import tempfile

    target.parent.mkdir(parents=True, exist_ok=True)
    staging = as_if_made_by_mkdir(
        Path(tempfile.mkdtemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)))
    try:
        _SHARD_INPUT.update(staging=staging, profiles=profiles, index=index, judges=list(judges),
                            diagnosis=diagnosis or {})
        try:
            # Every object alive now (the modules, pandas, matplotlib…) is set aside from the cyclic collector:
            # its full passes would walk them all again and again while the shards' short-lived JSON trees
            # come and go (1.5 s of CPU at 10^4 conversations, measured); cycles made meanwhile are still found.
            # Forked workers inherit it (and their pages stay shared: the collector writes no header of them).
            gc.freeze()
            batches = _batches(_shards(members))
            workers = min(os.cpu_count() or 1, 8)
            if len(conversations) >= PARALLEL_MIN_CONVERSATIONS and workers > 1 and "fork" in _start_methods():
                import multiprocessing

                with multiprocessing.get_context("fork").Pool(workers) as pool, named_os_error(target):
                    for written in pool.imap_unordered(_write_shard_batch, batches):
                        if progress:
                            progress(written)
            else:
                for batch in batches:
                    with named_os_error(target):  # a full disk names the shard folder
                        written = _write_shard_batch(batch)
                    if progress:
                        progress(written)
        finally:
            gc.unfreeze()
            _SHARD_INPUT.clear()
        if fingerprint:
            with named_os_error(target):
                (staging / FINGERPRINT_FILE).write_text(fingerprint, encoding="utf-8")
        _swap_in(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return assignment


def _swap_in(staging: Path, target: Path, attempts: int = 20) -> None:
    """Rename ``staging`` to ``target``, moving an existing ``target`` aside first. Safe against another
    report doing the same at once: whoever renames last wins, and a folder that vanished or reappeared
    meanwhile is simply retried (never a half-written folder, never a traceback)."""
    import tempfile

    for _ in range(attempts):
        try:
            os.rename(staging, target)  # fails if target exists and is not empty
            return
        except FileNotFoundError:
            if not staging.exists():
                return  # nothing left to swap in (cannot happen unless someone removed it)
            continue
        except OSError:
            pass
        trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        try:
            os.replace(target, trash / "shards")  # move the current folder aside (atomic)
        except FileNotFoundError:
            pass  # the other report moved it aside first: retry the rename
        except OSError:
            pass
        shutil.rmtree(trash, ignore_errors=True)
    # Still losing the race after many tries: the other report's complete folder stays in place.


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()
