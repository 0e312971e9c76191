"""Usage and spend as facts of the run folder: summed from the records on disk.

Every record carries the usage of the calls that made it (profiles: the generator's; conversations:
per role, formulation included; judgments: the judge's; patient-QC probes: patient and judge), so
a sum over the latest record per key counts every invocation and every kill exactly once. These
sums are the *records' cost* (what the kept results would cost to reproduce) of the manifest, ``status``
and the report; what providers *billed* (and what a budget counts) is the call ledger's (core/calls.py).
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


def _add(total: dict[str, Usage], alias: str, usage: Usage) -> None:
    total[alias] = total.get(alias, Usage()).add(usage)


def belongs_to(stage_name: str, data: Mapping[str, Any]) -> bool:
    """Whether a conversation record is the run stage's (an intake) or a given fork stage's."""
    fork = data.get("fork") if isinstance(data.get("fork"), Mapping) else None
    if stage_name.startswith("fork:"):
        _, at, nudge = (stage_name.split(":", 2) + ["", ""])[:3]
        return fork is not None and fork.get("at") == at and fork.get("nudge") == nudge
    return fork is None


def conversation_usage(paths: RunPaths, clinicians: Iterable[str], owners: Mapping[str, str],
                       stage_name: str = "run") -> dict[str, Usage]:
    """Per alias over the conversations of ``clinicians`` that belong to ``stage_name`` (the intakes, or one
    fork stage's forks); ``owners`` maps patient/tracker roles to aliases."""
    total: dict[str, Usage] = {}
    for data in latest_lines([paths.conversations(alias) for alias in clinicians], "conversation_id").values():
        if not belongs_to(stage_name, data):
            continue
        clinician = str(data.get("clinician", ""))
        for role, raw in (data.get("usage") or {}).items():
            _add(total, clinician if role in CLINICIAN_ROLES else owners.get(role, role), usage_of(raw))
    return dict(sorted(total.items()))


def usage_by_role(paths: RunPaths, clinicians: Iterable[str]) -> dict[str, Usage]:
    """Per conversation role (clinician, formulation, patient, tracker) over the conversations."""
    total: dict[str, Usage] = {}
    for data in latest_lines([paths.conversations(alias) for alias in clinicians], "conversation_id").values():
        for role, raw in (data.get("usage") or {}).items():
            _add(total, role, usage_of(raw))
    return dict(sorted(total.items()))


def judgment_usage(paths: RunPaths, label: str) -> Usage:
    files = sorted(paths.judge_dir(label).glob("*.jsonl")) if paths.judge_dir(label).is_dir() else []
    total = Usage()
    for data in latest_lines(files, "conversation_id").values():
        total = total.add(usage_of(data.get("usage")))
    return total


def profile_usage(paths: RunPaths) -> Usage:
    total = Usage()
    for source in (paths.profiles, paths.render_failures):
        for data in latest_lines([source], "profile_id").values():
            total = total.add(usage_of((data.get("render") or {}).get("usage") if source == paths.profiles
                                     else data.get("usage")))
    return total


def probe_usage(paths: RunPaths, patient: str, mode: str, owners: Mapping[str, str]) -> dict[str, Usage]:
    """Per alias over one judge's patient-QC probes (``owners["judge"]`` names the judge)."""
    total: dict[str, Usage] = {}
    for data in latest_lines([paths.qc_patient(patient, mode)], "key").values():
        if data.get("judge") != owners.get("judge"):
            continue
        for role, raw in (data.get("usage") or {}).items():
            _add(total, owners.get(role, role), usage_of(raw))
    return dict(sorted(total.items()))


def stage_usage(paths: RunPaths, name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
    """The usage of one manifest stage, by model alias, from its records on disk."""
    config = stage.get("config") or {}
    if name == "generate":
        return {str(config.get("generator", "generator")): profile_usage(paths)}
    if name == "run" or name.startswith("fork:"):
        clinicians = sorted((stage.get("additive_models") or {}).get("clinician", {}))
        roles = (config.get("models") or {})
        patient = next(iter(roles.get("patient") or {}), str(config.get("patient", "patient")))
        tracker = next(iter(roles.get("tracker") or {}), str(config.get("tracker") or patient))
        return conversation_usage(paths, clinicians, {"patient": patient, "tracker": tracker}, name)
    if name.startswith("judge:"):
        return {str(config.get("alias", name.removeprefix("judge:"))): judgment_usage(paths, name.removeprefix("judge:"))}
    if name.startswith("qc-patient "):
        owners = {"patient": str(config.get("patient", "patient")), "judge": str(config.get("judge", "judge"))}
        return probe_usage(paths, owners["patient"], str(config.get("mode", "prompted")), owners)
    return {}


def records_cost_by_alias(paths: RunPaths, manifest: Mapping[str, Any]) -> dict[str, Usage]:
    """Per model alias over every stage: what the kept records cost (the records' cost figure)."""
    total: dict[str, Usage] = {}
    for name, stage in (manifest.get("stages") or {}).items():
        if isinstance(stage, Mapping):
            for alias, usage in stage_usage(paths, name, stage).items():
                _add(total, alias, usage)
    return dict(sorted(total.items()))


def run_folder_spend(paths: RunPaths, manifest: Mapping[str, Any]) -> tuple[float, bool]:
    """Dollars the records of every stage cost, and whether every price was known."""
    dollars, known = 0.0, True
    for name, stage in (manifest.get("stages") or {}).items():
        if isinstance(stage, Mapping):
            for usage in stage_usage(paths, name, stage).values():
                dollars += usage.cost_usd
                known = known and usage.cost_known
    return round(dollars, 8), known



def records_done(paths: RunPaths, name: str, stage: Mapping[str, Any]) -> int | None:
    """How many records of a stage are finished ok on disk now (None for stages without records)."""
    def ok(lines: dict[str, dict[str, Any]]) -> int:
        return sum(1 for data in lines.values() if data.get("status", "ok") == "ok")

    if name == "generate":
        return len(latest_lines([paths.profiles], "profile_id"))
    if name == "run" or name.startswith("fork:"):
        clinicians = sorted((stage.get("additive_models") or {}).get("clinician", {}))
        lines = latest_lines([paths.conversations(alias) for alias in clinicians], "conversation_id")
        return ok({key: data for key, data in lines.items() if belongs_to(name, data)})
    if name.startswith("judge:"):
        folder = paths.judge_dir(name.removeprefix("judge:"))
        return ok(latest_lines(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [], "conversation_id"))
    return None


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
