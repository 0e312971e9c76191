"""Usage as a fact of the run folder: the pieces every stage kind sums its records' usage with.

Every record carries the usage of the calls that made it, so a sum over the latest record per key
counts every invocation and every kill exactly once. Which records a stage has and how their usage
is laid out is the stage's own (its ``StageKind``, core/stage_kinds.py); these sums are the *records'
cost* (what the kept results would cost to reproduce) of the manifest, ``status`` and the report;
what providers *billed* (and what a budget counts) is the call ledger's (core/calls.py). Also here:
the HTTP retry totals of the stage log, and the aliases a manifest stage registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from intake_eval.core.records import Usage
from intake_eval.core.store import RunPaths, iter_json_lines

# Conversation usage roles → whose calls they are (the clinician's own context makes the formulation).
CLINICIAN_ROLES = ("clinician", "formulation")


def latest_lines(paths: Iterable, key: str) -> dict[str, dict[str, Any]]:
    """The latest raw record per key across files (what compaction keeps)."""
    latest: dict[str, dict[str, Any]] = {}
    for path in paths:
        for data in iter_json_lines(path):
            if isinstance(data, dict) and isinstance(data.get(key), str):
                latest[data[key]] = data
    return latest


def usage_of(raw: Any) -> Usage:
    """A record's usage dict as Usage; anything malformed counts as no usage (never a crash)."""
    try:
        return Usage.model_validate(raw) if isinstance(raw, dict) else Usage()
    except ValueError:
        return Usage()


def add_usage(total: dict[str, Usage], alias: str, usage: Usage) -> None:
    """Add one usage to a per-alias total in place."""
    total[alias] = total.get(alias, Usage()).add(usage)


def add_retry_stats(a: Mapping[str, Any], b: Mapping[str, Any], sign: int = 1) -> dict[str, Any]:
    """Sum (or, with sign -1, difference) of two RetryStats dicts."""
    out: dict[str, Any] = {}
    for key in ("calls", "attempts", "retries", "failures", "waited_s"):
        out[key] = round(a.get(key, 0) + sign * b.get(key, 0), 3) if key == "waited_s" else a.get(key, 0) + sign * b.get(key, 0)
    reasons = {**a.get("by_reason", {})}
    for reason, count in b.get("by_reason", {}).items():
        reasons[reason] = reasons.get(reason, 0) + sign * count
    out["by_reason"] = {reason: count for reason, count in sorted(reasons.items()) if count}
    return out


def subtract_retry_stats(now: Mapping[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    return add_retry_stats(now, before, sign=-1)


def retry_totals(paths: RunPaths, aliases: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """HTTP attempts and retries per alias over every invocation on the run folder (from the stage log)."""
    wanted = set(aliases) if aliases is not None else None
    totals: dict[str, dict[str, Any]] = {}
    for entry in iter_json_lines(paths.stage_log):
        if entry.get("event") == "retries" and isinstance(entry.get("retries"), dict):
            for alias, stats in entry["retries"].items():
                if (wanted is None or alias in wanted) and isinstance(stats, dict):
                    totals[alias] = add_retry_stats(totals.get(alias, {}), stats)
    return dict(sorted(totals.items()))


def stage_aliases(stage: Mapping[str, Any]) -> list[str]:
    """Every model alias a manifest stage registered."""
    aliases = [alias for role in ((stage.get("config") or {}).get("models") or {}).values() for alias in role]
    aliases += [alias for role in (stage.get("additive_models") or {}).values() for alias in role]
    return sorted(set(aliases))


def count_ok(lines: Mapping[str, Mapping[str, Any]]) -> int:
    """How many of the latest records per key finished ok (a record without a status is ok)."""
    return sum(1 for data in lines.values() if data.get("status", "ok") == "ok")

