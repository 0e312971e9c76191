"""metrics/*.csv from a run folder: the numbers the report and the paper read.

Records stream from disk one at a time; what is kept per (conversation, judge) is a metrics row,
per-domain outcomes, the coverage trajectory and the paired-label units (no transcripts). The
latest record per conversation wins, so an uncompacted file (a crash mid-stage) gives the same
tables as a compacted one. Judgments that are not ok are excluded from every rate and counted.

Files: turn_labels (Parquet, and CSV while it fits a spreadsheet: metrics/turn_labels.py), conversations, cells, domains, trajectories, agreement, clinicians, comparisons, masking, masking_model,
intervals (which interval each figure states),
domain_events, probe_curves, cost, cost_conversations, cost_per_domain.
Every aggregate is per judge (the primary and each cross-check) and per clinician, condition and
patient mode; an undefined value is an empty cell.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.records import QUESTION_TYPES
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import (
    RunPaths,
)
from intake_eval.metrics import registry
from intake_eval.metrics.agreement import (
    CompactUnits,
    PairedLabels,
    agreement_rows,
)
from intake_eval.metrics.answers import write_answer_tables
from intake_eval.metrics.clinical import (
    RowCollector,
    load_default_catalog,
    write_diagnosis_metrics,
)
from intake_eval.metrics.collect import Collected, collect
from intake_eval.metrics.cost import COST_BILLED_COLUMNS, cost_billed_rows, cost_tables
from intake_eval.metrics.curves import PROBE_CURVE_COLUMNS, probe_curve_rows
from intake_eval.metrics.events import DOMAIN_EVENT_COLUMNS, domain_event_rows
from intake_eval.metrics.forks import write_capacity_gap
from intake_eval.metrics.intervals import COLUMNS as INTERVAL_COLUMNS
from intake_eval.metrics.intervals import interval_rows
from intake_eval.metrics.masking_model import COLUMNS as MASKING_MODEL_COLUMNS
from intake_eval.metrics.masking_model import masking_model_rows
from intake_eval.metrics.patient_models import PATIENT_MODEL_COLUMNS, patient_model_rows, several_patient_models
from intake_eval.metrics.patient_population import write_population_table
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import (
    add_holm,
    mean_ci,
    mean_or_none,
    paired_comparison,
    paired_difference_ci,
)
from intake_eval.metrics.styles import write_style_tables
from intake_eval.metrics.turn_labels import TURN_LABELS_TABLE, TurnLabelRows

GROUP = ("judge", "clinician", "condition", "patient_mode")
_CONVERSATION_FACTS = ("conversation_id", "judge", "judge_mode", "clinician", "phenotype", "profile_id", "condition",
                       "patient_mode", "trial", "alignment", "n_hidden", "status")
_CONVERSATION_BOOKKEEPING = ("caught_domains", "missed_domains", "bled_domains", "judge_calls", "judge_prompt_tokens",
                             "judge_completion_tokens", "judge_cost_usd", "judge_errors")


def conversation_columns() -> list[str]:
    """metrics/conversations.csv: the conversation's facts, the declared metrics (registry.METRICS) and the
    judge's bookkeeping, each generation of columns after those published before it."""
    return [*_CONVERSATION_FACTS, *registry.conversation_metric_columns(1, 1), *_CONVERSATION_BOOKKEEPING,
            *registry.conversation_metric_columns(2, 2), "judge_cached_prompt_tokens",
            *registry.conversation_metric_columns(3, 3), "patient", *registry.conversation_metric_columns(4)]


CONVERSATION_COLUMNS = tuple(conversation_columns())  # the shipped declarations' layout


# ---------------------------------------------------------------- tables


def _group_key(row: dict[str, Any]) -> tuple:
    return tuple(row[name] for name in GROUP)


def _group_dict(key: tuple) -> dict[str, Any]:
    return dict(zip(GROUP, key))


def _coverage_estimate(rows: list[dict[str, Any]], seed: str) -> dict[str, Any]:
    """Mean active coverage with its interval, n, n_profiles and ci_method: the declared headline aggregate."""
    coverage = registry.by_name()["active_coverage_rate"]
    assert coverage.aggregate is not None, "active coverage declares its headline aggregate"
    return coverage.aggregate.summarise(coverage.name, rows, seed)


def _ok_rows(collected: Collected) -> list[dict[str, Any]]:
    return [row for row in collected.rows.values() if row["status"] == "ok"]


def repeated_trials(collected: Collected) -> bool:
    """Does some profile have more than one scored conversation of one arm (by one judge)? Then every
    interval is the nested bootstrap (stats.mean_ci decides the same way, group by group)."""
    seen: set[tuple] = set()
    for row in _ok_rows(collected):
        key = (*_group_key(row), row["profile_id"])
        if key in seen:
            return True
        seen.add(key)
    return False


def cells_rows(collected: Collected) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for row in _ok_rows(collected):
        groups[(*_group_key(row), row["phenotype"])].append(row)
    out = []
    for key in sorted(groups):
        rows = groups[key]
        out.append({**_group_dict(key[:-1]), "phenotype": key[-1], "alignment": rows[0]["alignment"],
                    **_coverage_estimate(rows, "cells|" + "|".join(map(str, key))),
                    "mean_bleed_rate": mean_or_none([r["bleed_rate"] for r in rows])})
    return out


def domains_rows(collected: Collected) -> list[dict[str, Any]]:
    """Per domain: rates over the conversations where it was hidden; the active-coverage rate with the
    interval every figure uses (stats.mean_ci over profiles, nested with trials)."""
    tallies: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    surfaced: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, outcomes in collected.outcomes.items():
        row = collected.rows[key]
        for outcome in outcomes:
            group = (*_group_key(row), outcome.domain)
            tally = tallies[group]
            tally[0] += 1
            tally[1] += outcome.actively_covered
            tally[2] += outcome.bled
            tally[3] += outcome.first_asked_turn is not None
            tally[4] += outcome.leaked
            surfaced[group][row["profile_id"]].append(float(outcome.actively_covered))
    out = []
    for key, (n, covered, bled, asked, leaked) in sorted(tallies.items()):
        estimate = mean_ci(surfaced[key], seed="domains|" + "|".join(map(str, key)))
        out.append({**_group_dict(key[:-1]), "domain": key[-1], "n": n, "active_coverage_rate": covered / n,
                    "bleed_rate": bled / n, "asked_rate": asked / n, "leak_rate": leaked / n,
                    "active_coverage_ci_low": estimate.ci_low, "active_coverage_ci_high": estimate.ci_high,
                    "ci_method": estimate.method})
    return out


def trajectories_rows(collected: Collected) -> list[dict[str, Any]]:
    """Mean cumulative coverage per turn with its 95 % CI (stats.mean_ci: profiles, nested with trials), and the question mix."""
    by_profile: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    mix: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(QUESTION_TYPES, 0))
    for key, points in collected.trajectories.items():
        row = collected.rows[key]
        group = _group_key(row)
        for turn, coverage in points:
            if coverage is not None:
                by_profile[(*group, turn)][row["profile_id"]].append(coverage)
        for turn, qtype in collected.qtypes[key].items():
            mix[(*group, turn)][qtype] += 1
    out = []
    for key in sorted(set(by_profile) | set(mix)):
        estimate = mean_ci(by_profile.get(key, {}), seed="trajectory-band|" + "|".join(map(str, key[1:])))
        counts = mix.get(key, dict.fromkeys(QUESTION_TYPES, 0))
        asked = sum(counts.values())
        out.append({**_group_dict(key[:-1]), "turn": key[-1], "n": estimate.n,
                    "mean_cumulative_coverage": estimate.mean, "mean_cumulative_coverage_ci_low": estimate.ci_low,
                    "mean_cumulative_coverage_ci_high": estimate.ci_high, "ci_method": estimate.method,
                    **{f"share_{q}": (counts[q] / asked if asked else None) for q in QUESTION_TYPES}})
    return out


def agreement_table(collected: Collected) -> list[dict[str, Any]]:
    by_judge: dict[str, dict[str, CompactUnits]] = defaultdict(dict)
    for (judge, conversation_id), units in collected.units.items():
        by_judge[judge][conversation_id] = units
    out = []
    for judge_a, judge_b in itertools.combinations(sorted(by_judge), 2):
        pairs = PairedLabels.empty()
        for conversation_id in sorted(by_judge[judge_a].keys() & by_judge[judge_b].keys()):
            pairs.add_compact(by_judge[judge_a][conversation_id], by_judge[judge_b][conversation_id])
        for row in agreement_rows(pairs):
            out.append({"judge_a": judge_a, "judge_b": judge_b, "conversations": pairs.conversations,
                        **row.__dict__})
    return out


def clinicians_rows(collected: Collected) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for row in collected.rows.values():
        groups[_group_key(row)].append(row)
    failures: dict[tuple, int] = defaultdict(int)
    clinician_spend: dict[tuple, list[float]] = defaultdict(lambda: [0, 0.0])
    for meta in collected.conversations.values():
        group = (meta["clinician"], meta["condition"], meta["patient_mode"])
        failures[group] += meta["status"] != "ok"
        clinician_spend[group][0] += meta["tokens"]
        clinician_spend[group][1] += meta["cost"]
    out = []
    for key in sorted(groups):
        rows = groups[key]
        ok = [r for r in rows if r["status"] == "ok"]
        costs = [r["judge_cost_usd"] for r in rows]
        out.append({
            **_group_dict(key), "judge_mode": rows[0]["judge_mode"], "judged": len(rows),
            **registry.summarise(ok, "clinicians|" + "|".join(map(str, key))),
            "conversation_failures": failures.get(key[1:], 0),
            "judge_errors": sum(1 for r in rows if r["status"] == "judge_error"),
            "judge_provider_errors": sum(1 for r in rows if r["status"] not in ("ok", "judge_error")),
            "judge_tokens": sum(r["judge_prompt_tokens"] + r["judge_completion_tokens"] for r in rows),
            "judge_tokens_per_conversation": mean_or_none([r["judge_prompt_tokens"] + r["judge_completion_tokens"] for r in rows]),
            "judge_cost_usd": sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None,
            "clinician_tokens": clinician_spend.get(key[1:], [0, 0.0])[0],
            "clinician_cost_usd": clinician_spend.get(key[1:], [0, 0.0])[1],
        })
    return out


def comparisons_rows(collected: Collected, metrics: Iterable[str] = ("active_coverage_rate", "bleed_rate")) -> list[dict[str, Any]]:
    """Paired tests between every two clinicians on the profiles both were run on (trials averaged for
    the tests; A − B with its CI from stats.paired_difference_ci, nested with trials). Every test of one
    judge is one family: its p-values are Holm-adjusted together (``*_holm``)."""
    per_clinician: dict[tuple, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for metric in metrics:
        for row in _ok_rows(collected):
            if row[metric] is None:
                continue
            scope = (row["judge"], row["condition"], row["patient_mode"], metric)
            per_clinician[scope][row["clinician"]].setdefault(row["profile_id"], []).append(float(row[metric]))
    out = []
    for scope in sorted(per_clinician):
        clinicians = per_clinician[scope]
        for a, b in itertools.combinations(sorted(clinicians), 2):
            values_a = {p: sum(v) / len(v) for p, v in clinicians[a].items()}
            values_b = {p: sum(v) / len(v) for p, v in clinicians[b].items()}
            seed = "|".join((*scope, a, b))
            result = paired_comparison(values_a, values_b, seed=seed)
            interval = paired_difference_ci(clinicians[a], clinicians[b], seed=f"difference|{seed}")
            out.append({"judge": scope[0], "condition": scope[1], "patient_mode": scope[2], "metric": scope[3],
                        "clinician_a": a, "clinician_b": b, **result.__dict__,
                        "difference_ci_low": interval.ci_low, "difference_ci_high": interval.ci_high,
                        "ci_method": interval.method})
    add_holm(out, ("wilcoxon_p", "permutation_p"), family=("judge",))
    return out


def masking_rows(collected: Collected) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for row in _ok_rows(collected):
        groups[(*_group_key(row), row["alignment"] or "unknown")].append(row)
    out = []
    for key in sorted(groups):
        out.append({**_group_dict(key[:-1]), "alignment": key[-1],
                    **_coverage_estimate(groups[key], "masking|" + "|".join(map(str, key))),
                    "mean_bleed_rate": mean_or_none([r["bleed_rate"] for r in groups[key]])})
    aligned = {tuple(r[g] for g in GROUP): r["mean_active_coverage"] for r in out if r["alignment"] == "aligned"}
    for row in out:
        reference = aligned.get(tuple(row[g] for g in GROUP))
        row["difference_vs_aligned"] = (row["mean_active_coverage"] - reference
                                        if row["alignment"] == "masked" and reference is not None
                                        and row["mean_active_coverage"] is not None else None)
    return out


_GROUP_COLUMNS = list(GROUP)
_ESTIMATE = ["mean_active_coverage", "mean_active_coverage_ci_low", "mean_active_coverage_ci_high", "n", "n_profiles",
             "ci_method"]
TABLE_COLUMNS: dict[str, list[str]] = {
    "cells": [*_GROUP_COLUMNS, "phenotype", "alignment", *_ESTIMATE, "mean_bleed_rate"],
    "domains": [*_GROUP_COLUMNS, "domain", "n", "active_coverage_rate", "bleed_rate", "asked_rate", "leak_rate",
                "active_coverage_ci_low", "active_coverage_ci_high", "ci_method"],
    "trajectories": [*_GROUP_COLUMNS, "turn", "n", "mean_cumulative_coverage", *(f"share_{q}" for q in QUESTION_TYPES),
                     "mean_cumulative_coverage_ci_low", "mean_cumulative_coverage_ci_high", "ci_method"],
    "agreement": ["judge_a", "judge_b", "conversations", "label", "n", "raw_agreement", "kappa", "prevalence_a", "prevalence_b"],
    "comparisons": ["judge", "condition", "patient_mode", "metric", "clinician_a", "clinician_b", "n_pairs", "n_nonzero",
                    "mean_a", "mean_b", "mean_difference", "wilcoxon_statistic", "wilcoxon_p", "permutation_p",
                    "permutation_exact", "difference_ci_low", "difference_ci_high", "ci_method", "wilcoxon_p_holm",
                    "permutation_p_holm"],
    "masking": [*_GROUP_COLUMNS, "alignment", *_ESTIMATE, "mean_bleed_rate", "difference_vs_aligned"],
}


_CLINICIAN_BOOKKEEPING = ["conversation_failures", "judge_errors", "judge_provider_errors", "judge_tokens",
                          "judge_tokens_per_conversation", "judge_cost_usd", "clinician_tokens", "clinician_cost_usd"]


def clinician_columns() -> list[str]:
    """metrics/clinicians.csv: the arm, the declared aggregates (registry.METRICS) and the arm's bookkeeping,
    each generation of columns after those published before it."""
    return [*_GROUP_COLUMNS, "judge_mode", "judged", *registry.summary_columns(1, 1), *_CLINICIAN_BOOKKEEPING,
            *registry.summary_columns(2)]


def write_metrics(paths: RunPaths, kinds: StageKinds) -> dict[str, Path]:
    """Compute every table from the run folder and write metrics/<name>.csv (and the long tables' Parquet).
    Returns name → path. ``kinds`` reads each stage's records for the records' cost column of cost_billed.csv."""

    diagnosis = RowCollector(paths, load_default_catalog(paths))
    turn_labels = TurnLabelRows(paths)

    def also(*seen: Any) -> None:
        diagnosis.add(*seen)
        turn_labels.add(*seen)

    try:
        return _write_tables(paths, kinds, collect(paths, also=also), diagnosis, turn_labels)
    except BaseException:
        turn_labels.discard()  # no partial Parquet file is left beside the tables
        raise


def _write_tables(paths: RunPaths, kinds: StageKinds, collected: Collected, diagnosis: RowCollector,
                  turn_labels: TurnLabelRows) -> dict[str, Path]:
    # Each table is built, written and dropped in turn: only one table's rows are held beside the collected
    # figures (the long ones, conversations and domain_events, have a row per judgment or more).
    builders: dict[str, Callable[[], tuple[Sequence[str], list[dict[str, Any]]]]] = {
        "conversations": lambda: (conversation_columns(), [collected.rows[key] for key in sorted(collected.rows)]),
        "cells": lambda: (TABLE_COLUMNS["cells"], cells_rows(collected)),
        "domains": lambda: (TABLE_COLUMNS["domains"], domains_rows(collected)),
        "trajectories": lambda: (TABLE_COLUMNS["trajectories"], trajectories_rows(collected)),
        "agreement": lambda: (TABLE_COLUMNS["agreement"], agreement_table(collected)),
        "clinicians": lambda: (clinician_columns(), clinicians_rows(collected)),
        "comparisons": lambda: (TABLE_COLUMNS["comparisons"], comparisons_rows(collected)),
        "masking": lambda: (TABLE_COLUMNS["masking"], masking_rows(collected)),
        "masking_model": lambda: (MASKING_MODEL_COLUMNS, masking_model_rows(_ok_rows(collected))),
        "intervals": lambda: (INTERVAL_COLUMNS, interval_rows(
            repeated_trials(collected), pooled_patients=several_patient_models(_ok_rows(collected)))),
        "domain_events": lambda: (DOMAIN_EVENT_COLUMNS, domain_event_rows(collected.rows, collected.outcomes,
                                                                          collected.last_turns)),
        "probe_curves": lambda: (PROBE_CURVE_COLUMNS, probe_curve_rows(collected.rows, collected.outcomes,
                                                                       collected.last_turns)),
    }
    written = {}
    for name, build in builders.items():
        columns, rows = build()
        written[name] = write_csv(paths.metrics(name), columns, rows)
        del rows
    for name, (columns, rows) in cost_tables(collected.conversations, collected.rows, collected.outcomes).items():
        written[name] = write_csv(paths.metrics(name), columns, rows)
    written["cost_billed"] = write_csv(paths.metrics("cost_billed"), COST_BILLED_COLUMNS, cost_billed_rows(paths, kinds))
    by_patient = patient_model_rows(_ok_rows(collected))
    if by_patient:  # a run with several patient models: the breakdown beside the pooled headline
        written["patient_models"] = write_csv(paths.metrics("patient_models"), PATIENT_MODEL_COLUMNS, by_patient)
    written[TURN_LABELS_TABLE] = turn_labels.write(paths)  # .parquet, and .csv while it fits a spreadsheet
    # safety.csv (+ diagnosis.csv when conversations carry formulations), see metrics/clinical.py
    written.update(write_diagnosis_metrics(paths, collector=diagnosis))
    written.update(write_answer_tables(paths))  # refused, empty and cut answers, failed conversations included
    capacity = write_capacity_gap(paths)  # could-it-ask forks, when the run has them
    if capacity is not None:
        written["capacity_gap"] = capacity
    written.update(write_style_tables(paths))  # by patient behaviour style, when the run has several
    written.update(write_population_table(paths))  # how the patients spoke, per patient model and style
    return written
