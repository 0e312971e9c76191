"""Transcript-viewer data: per-conversation JSON in script shards loaded on demand.

Browsers block fetch() from file://, so each shard is a script that registers its data through a
global callback: ``report/conversations/<shard>.js`` = ``IE_SHARD("<shard>", {...})``. A shard
holds every conversation of a block of profiles (all clinicians, every judge), so the drilldown
row of one profile needs one small file. The page inlines only a compact index.

A conversation with a post-intake formulation carries it compactly (``compact_formulation``),
with each diagnosis's catalog domain from metrics/diagnosis.csv's ``mapping`` column and, per judge,
the hidden domains it named without their being actively surfaced (``unearned_domains``).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from intake_eval.core.fs import as_if_made_by_mkdir, named_os_error
from intake_eval.core.schema import package_version
from intake_eval.core.spill import SpilledRows, SpilledSet
from intake_eval.core.store import stable_hash

PROFILES_PER_SHARD = 10

# Per (conversation, judge, hidden domain) outcome over the whole conversation.
ACTIVE, BLEED, ASKED, MISSED = "active", "bleed", "asked", "missed"
OUTCOME_CODE = {ACTIVE: 3, BLEED: 2, ASKED: 1, MISSED: 0}


def hidden_domains(conv: dict[str, Any], profile: dict[str, Any] | None) -> list[str]:
    if profile:
        return [draw["domain"] for draw in profile.get("hidden", [])]
    return []


def label_code(label: dict[str, Any]) -> int:
    """A turn's label of one domain as a number: asked (1) + 2 × disclosed (2)."""
    return (1 if label.get("asked_about") else 0) + (2 if label.get("disclosed") else 0)


def outcome_of(codes_seen: int) -> str:
    """A domain's outcome over the conversation from the bit set of its turns' ``label_code``s
    (bit ``1 << code``): active = some turn asked + disclosed; else bleed = disclosed without ask;
    else asked; else missed."""
    if codes_seen & 0b1000:
        return ACTIVE
    return BLEED if codes_seen & 0b0100 else ASKED if codes_seen & 0b0010 else MISSED


def domain_outcomes(judgment: dict[str, Any] | None, hidden: list[str]) -> dict[str, str] | None:
    """Each hidden domain's outcome (``outcome_of``); None when the judgment is missing or not ok."""
    if not judgment or judgment.get("status", "ok") != "ok":
        return None
    out = {}
    for domain in hidden:
        seen = 0
        for turn in judgment.get("turns", []):
            label = turn.get("domains", {}).get(domain)
            if label:
                seen |= 1 << label_code(label)
        out[domain] = outcome_of(seen)
    return out


def bleed_flags(signature: str, n_hidden: int) -> str:
    """Per hidden domain '1' when some turn disclosed it without asking (bleed, as metrics count it),
    from ``load.slim_judgment``'s label signature (code 2 = disclosed, not asked). A domain caught
    later bled all the same: the drill-down marks it on top of its ✓."""
    flags = ["0"] * n_hidden
    for turn in signature.split("\x1e") if signature else []:
        codes = turn.rsplit("\x1f", 1)[-1]
        for i, code in enumerate(codes[:n_hidden]):
            if code == "2":
                flags[i] = "1"
    return "".join(flags)


def outcome_codes(outcomes: dict[str, str] | None, hidden: list[str]) -> str:
    """Drill-down squares as a string: one digit (OUTCOME_CODE) per hidden domain; '' if not judged."""
    return "" if outcomes is None else "".join(str(OUTCOME_CODE[outcomes[d]]) for d in hidden)


def compact_judgment(judgment: dict[str, Any], hidden: list[str]) -> dict[str, Any]:
    """Labels per turn as {domain: [asked 0/1, disclosed 0/1, reasoning]} (hot loop: kept plain)."""
    turns = []
    raw_turns = judgment.get("turns") or []
    if any(a.get("turn", 0) > b.get("turn", 0) for a, b in zip(raw_turns, raw_turns[1:])):
        raw_turns = sorted(raw_turns, key=lambda t: t.get("turn", 0))
    for turn in raw_turns:
        labels = turn.get("domains") or {}
        cells = {}
        for domain in hidden:
            label = labels.get(domain)
            if label is not None:
                cells[domain] = [1 if label.get("asked_about") else 0, 1 if label.get("disclosed") else 0,
                                 label.get("reasoning", "")]
        turns.append({"t": turn.get("turn", 0), "q": turn.get("question_type", "other"),
                      "f": 0 if turn.get("patient_faithful", True) is False else 1, "r": turn.get("reasoning", ""),
                      "d": cells})
    return {"status": judgment.get("status", "ok"), "errors": (judgment.get("errors") or [])[:5], "turns": turns,
            "model": judgment.get("judge_model", "")}


ERROR_SHOWN, ANSWER_SHOWN = 300, 400  # characters of a failed formulation's error / answer in a shard


DIAGNOSIS_FACT_COLUMNS = ("conversation_id", "judge", "mapping", "unearned_domains", "principal_domain", "principal_hit")


def diagnosis_facts(table, into: MutableMapping[str, dict[str, Any]] | None = None) -> MutableMapping[str, dict[str, Any]]:
    """metrics/diagnosis.csv → conversation_id → {"map": [[slot, name, icd10, domain | None, method], …],
    "unearned": {judge: [domain, …]}, "core": the phenotype's principal domain, "hit": whether the principal
    diagnosis maps to it} (judges whose row was scored; mapping and principal hit are the same for every judge).
    Written into ``into`` (e.g. ``spill.SpilledRows``, so a long table holds no dict per conversation) or a new dict."""
    out: MutableMapping[str, dict[str, Any]] = {} if into is None else into
    needed = DIAGNOSIS_FACT_COLUMNS
    if table is None or not set(needed) <= set(table.columns):
        return out
    for cid, judge, mapping, unearned, core, hit in zip(*(table[c] for c in needed)):
        if not isinstance(mapping, str) or not mapping:
            continue  # judgment not ok or formulation not scored: nothing mapped from this row
        facts = out.get(str(cid)) or {"map": None, "unearned": {}}
        if facts["map"] is None:
            try:
                facts["map"] = [[m.get("slot", ""), m.get("name", ""), m.get("icd10", ""), m.get("domain"),
                                 m.get("method", "")] for m in json.loads(mapping)]
            except (ValueError, AttributeError):
                out[str(cid)] = facts
                continue
            facts.update(core=str(core), hit=str(hit).lower() == "true")
        facts["unearned"][str(judge)] = [d for d in unearned.split(";") if d] if isinstance(unearned, str) else []
        out[str(cid)] = facts
    return out


def compact_formulation(record: dict[str, Any] | None, facts: dict[str, Any] | None) -> dict[str, Any] | None:
    """The formulation for the viewer: status ``s`` (+ error ``e``, truncated answer ``a`` when it failed);
    if ok, chief complaint ``cc``, problems ``pr``, diagnoses ``dx`` ([slot, name, icd10, domain, method];
    domain None until the run's diagnosis.csv maps them), risk level ``risk`` and evidence ``ev``,
    repaired ``rep``, unearned domains per judge ``u``, the phenotype's principal domain ``core`` and
    whether the principal diagnosis maps to it ``hit``."""
    if not record:
        return None
    out: dict[str, Any] = {"s": str(record.get("status", "invalid"))}
    if record.get("error"):
        out["e"] = str(record["error"])[:ERROR_SHOWN]
    if record.get("answer"):
        out["a"] = str(record["answer"])[:ANSWER_SHOWN]
    body = record.get("formulation")
    if out["s"] != "ok" or not isinstance(body, dict):
        if out["s"] == "ok":
            out.update(s="invalid", e="the record says ok but holds no formulation")
        return out
    refs = [("principal", body.get("principal_diagnosis"))]
    refs += [(f"differential[{i}]", ref) for i, ref in enumerate(body.get("differential") or [])]
    listed = [[slot, str(ref.get("name", "")), str(ref.get("icd10", "")), None, ""]
              for slot, ref in refs if isinstance(ref, dict)]
    facts = facts or {}
    out.update(rep=1 if record.get("repaired") else 0, cc=str(body.get("chief_complaint", "")),
               pr=[str(p) for p in (body.get("problems") or [])], dx=facts.get("map") or listed,
               risk=str(body.get("risk_level", "")), ev=str(body.get("risk_evidence", "")),
               u=facts.get("unearned", {}))
    if "core" in facts:
        out.update(core=facts["core"], hit=1 if facts["hit"] else 0)
    return out


def compact_conversation(conv: dict[str, Any], profile: dict[str, Any] | None,
                         judgments: dict[str, dict[str, Any]], diagnosis: dict[str, Any] | None = None) -> dict[str, Any]:
    hidden = hidden_domains(conv, profile)
    labels = {draw["domain"]: draw.get("label") or draw["domain"] for draw in (profile or {}).get("hidden", [])}
    presenting = (profile or {}).get("presenting", {})
    demo = (profile or {}).get("demographics", {})
    return {
        "id": conv["conversation_id"],
        "clinician": conv.get("clinician", ""),
        "clinician_model": conv.get("clinician_model", ""),
        "patient": conv.get("patient", ""),
        "profile_id": conv.get("profile_id", ""),
        "phenotype": conv.get("phenotype", ""),
        "alignment": (profile or {}).get("alignment", ""),
        "condition": conv.get("condition", ""),
        "patient_mode": conv.get("patient_mode", ""),
        "trial": conv.get("trial", 0),
        "status": conv.get("status", "ok"),
        "termination": conv.get("termination", ""),
        "error": conv.get("error"),
        "presenting": presenting.get("label") or presenting.get("domain", ""),
        "presenting_domain": presenting.get("domain", ""),
        "who": ", ".join(str(x) for x in (demo.get("name"), demo.get("age"), demo.get("sex"), demo.get("occupation")) if x),
        "hidden": hidden,
        "labels": labels,
        "opening": conv.get("opening", ""),
        # x: the roles whose answer was cut at the token cap (only on such turns)
        "turns": [{"t": t.get("turn"), "c": t.get("clinician", ""), "p": t.get("patient", ""),
                   **({"x": list(t["truncated"])} if t.get("truncated") else {})}
                  for t in conv.get("turns", [])],
        "judges": {judge: compact_judgment(j, hidden) for judge, j in judgments.items()},
        "formulation": compact_formulation(conv.get("formulation"), diagnosis),
    }


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
