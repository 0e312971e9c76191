"""Repeated trials (`run --trials K`): how much does a clinician's score move between runs?

From ``metrics/conversations.csv`` (one row per conversation × judge, with a ``trial`` column) and
the judgments behind it, per (judge, clinician, condition, patient mode):

- ``between_trial_sd``: the pooled within-profile SD of active coverage across trials,
  sqrt(mean over profiles with ≥ 2 trials of the sample variance, ddof=1).
- ``between_profile_sd``: the SD of the per-profile mean coverage (for contrast).
- ``ci_low``/``ci_high``: 95 % percentile CI of the mean active coverage from the nested bootstrap
  (stats.mean_ci: profiles with replacement, then trials with replacement within each drawn profile),
  drawn with the seed of the headline's interval (metrics/clinicians.csv), so the trials section and
  the headline state one interval for one mean. ``naive_ci_*`` treats every conversation as
  independent, shown for contrast (it is too narrow when trials correlate).
- consistency: over every (profile, hidden domain) slot, ``caught_any`` = caught (asked about and
  disclosed at some turn) in at least one trial, ``caught_all`` = caught in every trial of that
  profile; ``consistency`` = caught_all / caught_any.

Written to ``metrics/trials.csv`` only when some conversation has trial > 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Judgment, Profile
from intake_eval.core.spill import SpilledRows, key_of, parts_of
from intake_eval.core.store import (
    RunPaths,
    iter_records,
)
from intake_eval.metrics.figures import domain_outcomes
from intake_eval.metrics.long_rows import iter_rows, table_columns, table_exists
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import (
    N_BOOTSTRAP,
    between_trial_sd,
    mean_ci,
    naive_bootstrap_ci,
    sample_sd,
)

TRIALS_METRICS = "trials"
BOOTSTRAP_RESAMPLES = N_BOOTSTRAP
COLUMNS = [
    "judge", "clinician", "condition", "patient_mode", "profiles", "trials", "min_trials", "conversations",
    "mean_active_coverage", "between_trial_sd", "between_profile_sd", "ci_low", "ci_high",
    "naive_ci_low", "naive_ci_high", "ci_method",
    "domain_slots", "caught_any", "caught_all", "share_caught_any", "share_caught_all", "consistency",
]


@dataclass
class TrialObservation:
    """One judged conversation: the profile it belongs to, its trial, coverage and per-domain catches."""

    profile_id: str
    trial: int
    active_coverage: float
    caught: dict[str, bool] = field(default_factory=dict)  # hidden domain -> caught in this trial


GroupKey = tuple[str, str, str, str]  # judge, clinician, condition, patient_mode


# ---------------------------------------------------------------- pure figures

def _by_profile(observations: Iterable[TrialObservation]) -> dict[str, list[TrialObservation]]:
    grouped: dict[str, list[TrialObservation]] = defaultdict(list)
    for obs in observations:
        grouped[obs.profile_id].append(obs)
    return {pid: sorted(items, key=lambda o: o.trial) for pid, items in sorted(grouped.items())}


def headline_seed(key: GroupKey) -> str:
    """The seed metrics/clinicians.csv draws this group's coverage interval with (tables.clinicians_rows)."""
    return "clinicians|" + "|".join(key)


def cluster_bootstrap_ci(values_by_profile: list[list[float]], *, seed: str, resamples: int = BOOTSTRAP_RESAMPLES,
                         level: float = 0.95) -> tuple[float, float] | None:
    """The CI of the pooled mean every figure uses (stats.mean_ci): nested when profiles have several trials."""
    groups = {f"{i:09d}": values for i, values in enumerate(values_by_profile) if values}
    estimate = mean_ci(groups, seed=seed, n_boot=resamples, level=level)
    return None if estimate.ci_low is None or estimate.ci_high is None else (estimate.ci_low, estimate.ci_high)


def consistency_counts(by_profile: dict[str, list[TrialObservation]]) -> tuple[int, int, int]:
    """(domain slots, caught in ≥ 1 trial, caught in every trial) over (profile, hidden domain)."""
    slots = any_count = all_count = 0
    for observations in by_profile.values():
        domains = sorted({d for obs in observations for d in obs.caught})
        for domain in domains:
            flags = [obs.caught.get(domain, False) for obs in observations]
            slots += 1
            any_count += any(flags)
            all_count += all(flags)
    return slots, any_count, all_count


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def trial_figures(observations: list[TrialObservation], *, seed: str = "") -> dict[str, Any]:
    """All figures for one (judge, clinician, condition, mode) group."""
    by_profile = _by_profile(observations)
    values = [[obs.active_coverage for obs in items] for items in by_profile.values()]
    pooled = [v for group in values for v in group]
    estimate = mean_ci({pid: [obs.active_coverage for obs in items] for pid, items in by_profile.items()}, seed=seed)
    naive = naive_bootstrap_ci(pooled, seed=seed)
    slots, any_count, all_count = consistency_counts(by_profile)
    return {
        "profiles": len(by_profile),
        "trials": max((len(v) for v in values), default=0),
        "min_trials": min((len(v) for v in values), default=0),
        "conversations": len(pooled),
        "mean_active_coverage": sum(pooled) / len(pooled) if pooled else None,
        "between_trial_sd": between_trial_sd(values),
        "between_profile_sd": sample_sd([sum(v) / len(v) for v in values if v]),
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "naive_ci_low": naive[0] if naive else None,
        "naive_ci_high": naive[1] if naive else None,
        "ci_method": estimate.method,
        "domain_slots": slots,
        "caught_any": any_count,
        "caught_all": all_count,
        "share_caught_any": _ratio(any_count, slots),
        "share_caught_all": _ratio(all_count, slots),
        "consistency": _ratio(all_count, any_count),
    }


# ---------------------------------------------------------------- reading the run folder

def _float(value: str | None) -> float | None:
    if value is None or value.strip() == "":
        return None
    try:
        return float(value)
    except ValueError:
        return None


_READ = ("conversation_id", "judge", "clinician", "profile_id", "active_coverage_rate", "status", "condition",
         "patient_mode", "trial", "caught_domains", "missed_domains")


def _iter_metric_rows(path: Path) -> Iterator[dict[str, str]]:
    missing = {"conversation_id", "judge", "clinician", "profile_id", "active_coverage_rate"} - set(table_columns(path) or ())
    if missing:
        raise IntakeEvalError(f"{path}: missing column(s) {', '.join(sorted(missing))}; rerun `intake-eval report`")
    yield from iter_rows(path, _READ)  # the Parquet file when the CSV is past a spreadsheet's size


def _trial_of(row: dict[str, str]) -> int:
    value = (row.get("trial") or "").strip()
    if value:
        try:
            return int(float(value))
        except ValueError:
            pass
    tail = row["conversation_id"].rsplit(".", 1)[-1]  # conversation ids end with .t{trial}
    return int(tail[1:]) if tail.startswith("t") and tail[1:].isdigit() else 0


def _caught_by_conversation(paths: RunPaths, judge: str, clinician: str, wanted: set[str],
                            hidden: dict[str, list[str]]) -> dict[str, dict[str, bool]]:
    """Per conversation: hidden domain -> actively covered (asked about and disclosed at some turn)."""

    caught: dict[str, dict[str, bool]] = {}
    for judgment in iter_records(paths.judgments(judge, clinician), Judgment):
        if judgment.conversation_id in wanted and judgment.ok:
            domains = hidden.get(judgment.profile_id) or sorted({d for t in judgment.turns for d in t.domains})
            outcomes = domain_outcomes(judgment, domains)
            caught[judgment.conversation_id] = {o.domain: o.actively_covered for o in outcomes}
    return caught


def _hidden_by_profile(paths: RunPaths) -> dict[str, list[str]]:
    return {p.profile_id: p.hidden_domains for p in iter_records(paths.profiles, Profile)}


def collect_observations(paths: RunPaths) -> dict[GroupKey, list[TrialObservation]]:
    """Stream metrics/conversations.csv (+ judgments) into observations grouped per clinician × judge."""
    rows, _repeated = _spilled_rows(paths)
    try:
        return dict(_observations(paths, rows))
    finally:
        rows.close()


def _spilled_rows(paths: RunPaths) -> tuple[SpilledRows, bool]:
    """The scored rows of metrics/conversations on disk (core/spill.SpilledRows: position in the table → row,
    beside its group), and whether some row has a trial > 0."""
    source = paths.metrics("conversations")
    if not table_exists(source):
        raise IntakeEvalError(f"{source}: no conversation metrics yet; run `intake-eval judge` and `intake-eval report` first")
    rows = SpilledRows.alone("trial-rows", paths.metrics_dir)
    repeated = False
    try:
        for position, row in enumerate(_iter_metric_rows(source)):
            coverage = _float(row.get("active_coverage_rate"))
            if coverage is None or (row.get("status") or "ok") != "ok":
                continue  # judge error / failed conversation: excluded like everywhere else
            key = (row["judge"], row["clinician"], row.get("condition") or "", row.get("patient_mode") or "")
            trial = _trial_of(row)
            repeated = repeated or trial > 0
            rows.put(f"{position:015d}", (row["conversation_id"], row["profile_id"], trial, coverage,
                                          _caught_columns(row)), group=key_of(*key))
    except BaseException:
        rows.close()
        raise
    return rows, repeated


def _observations(paths: RunPaths, rows: SpilledRows) -> Iterator[tuple[GroupKey, list[TrialObservation]]]:
    """The spilled rows as observations, one group at a time in sorted group order (one group is held)."""
    hidden: dict[str, list[str]] | None = None
    for key, items in _groups(rows):
        caught = {cid: flags for cid, _, _, _, flags in items if flags is not None}
        if len(caught) < len(items):  # an older conversations.csv without caught/missed columns
            hidden = _hidden_by_profile(paths) if hidden is None else hidden
            caught = _caught_by_conversation(paths, key[0], key[1], {cid for cid, *_ in items}, hidden)
        yield key, [TrialObservation(pid, trial, cov, caught.get(cid, {})) for cid, pid, trial, cov, _ in items]


def _groups(rows: SpilledRows) -> Iterator[tuple[GroupKey, list[tuple]]]:
    """The spilled rows group by group (sorted), each group's rows in table order."""
    group: str | None = None
    members: list[tuple] = []
    for joined, _position, row in rows.grouped_items():
        if joined != group:
            if group is not None:
                yield _group_key(group), members
            group, members = joined, []
        members.append(row)
    if group is not None:
        yield _group_key(group), members


def _group_key(joined: str) -> GroupKey:
    judge, clinician, condition, mode = parts_of(joined)
    return judge, clinician, condition, mode


def _caught_columns(row: dict[str, str]) -> dict[str, bool] | None:
    """Per-domain catches from the caught_domains / missed_domains columns (None when absent)."""
    if "caught_domains" not in row or "missed_domains" not in row:
        return None
    split = lambda text: [d for d in (text or "").split(";") if d]
    return {**{d: False for d in split(row["missed_domains"])}, **{d: True for d in split(row["caught_domains"])}}


def has_trials(groups: dict[GroupKey, list[TrialObservation]]) -> bool:
    return any(obs.trial > 0 for items in groups.values() for obs in items)


def write_trial_metrics(paths: RunPaths) -> Path | None:
    """Write metrics/trials.csv when the run has repeated trials; returns its path (None otherwise,
    and a stale trials.csv is removed).

    Called by the metrics writer / report after metrics/conversations.csv is written.
    """
    target = paths.metrics(TRIALS_METRICS)
    rows, repeated = _spilled_rows(paths)
    try:
        if not repeated:
            target.unlink(missing_ok=True)  # derived data: never leave a stale table from an earlier run
            return None
        records = []
        for key, observations in _observations(paths, rows):  # one group's observations at a time
            judge, clinician, condition, mode = key
            figures = trial_figures(observations, seed=headline_seed(key))
            records.append({"judge": judge, "clinician": clinician, "condition": condition, "patient_mode": mode,
                            **figures})
        return write_csv(target, COLUMNS, records)
    finally:
        rows.close()
