"""Shards: one study split over run folders (and machines) by a stable hash of the profile id.

``Shard(index, count)`` is ``--shard i/N`` (1 ≤ i ≤ N). A profile belongs to shard
``sha256(profile_id) mod N + 1``: the same on every machine and Python process (never ``hash()``),
so N folders planned from the same profiles.jsonl hold disjoint conversations that together cover
every profile. The spec enters the stage configs (``as_config``), so a folder started as one shard
refuses to resume as another; ``intake-eval merge`` joins the N folders into one run.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from intake_eval.core.errors import IntakeEvalError

SHARD_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")

# The key a shard's spec has in every stage config it determines (merge drops it to compare shards).
SHARD_KEY = "shard"


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, profile_id: str) -> bool:
        return shard_index(profile_id, self.count) == self.index

    def as_config(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}


def shard_index(profile_id: str, count: int) -> int:
    """The 1-based shard a profile belongs to among ``count``."""
    digest = hashlib.sha256(profile_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str | None, flag: str = "--shard") -> Shard | None:
    """'2/3' → Shard(2, 3); anything else is one line naming the flag."""
    if text is None:
        return None
    match = SHARD_SPEC.fullmatch(text)
    if match is None:
        raise IntakeEvalError(f"{flag} {text}: expected i/N, e.g. 2/3 (shard i of N, 1 ≤ i ≤ N)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise IntakeEvalError(f"{flag} {text}: shard i/N needs 1 ≤ i ≤ N (got i={index}, N={count})")
    return Shard(index, count)


def shard_from_config(config: dict) -> Shard | None:
    """The shard a stage config records, if any."""
    spec = config.get(SHARD_KEY) if isinstance(config, dict) else None
    if not isinstance(spec, dict):
        return None
    return Shard(int(spec["index"]), int(spec["count"]))


def unsharded(config: dict) -> dict:
    """A stage config without its shard spec: what every shard of one study shares."""
    return {key: value for key, value in config.items() if key != SHARD_KEY}


def recorded_shard(manifest: dict) -> Shard | None:
    """The shard a run folder's stages record (the first found: a folder is one shard or none)."""
    for stage in (manifest.get("stages") or {}).values():
        found = shard_from_config(stage.get("config", {})) if isinstance(stage, dict) else None
        if found is not None:
            return found
    return None
