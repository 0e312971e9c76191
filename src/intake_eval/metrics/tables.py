"""metrics/*.csv (and the long tables' Parquet) from a run folder: the numbers the report and the paper read.

The metrics pass (metrics/collect.py) streams the records once and writes what each table needs to Parquet;
each table then reads only its columns, one judge × clinician arm at a time (one clinician for the agreement
and the cost tables, one judge for the comparisons), so memory holds one arm's columns, not the run. Rows
are taken in (conversation) order within an arm, so an uncompacted record file gives the same tables as a
compacted one. Judgments that are not ok are excluded from every rate and counted.

Files: turn_labels, conversations and domain_events (Parquet, and CSV while they fit a spreadsheet), cells,
domains, trajectories, agreement, clinicians, comparisons, masking, masking_model, intervals (which interval
each figure states), probe_curves, cost, cost_conversations, cost_per_domain.
Every aggregate is per judge (the primary and each cross-check) and per clinician, condition and
patient mode; an undefined value is an empty cell.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from intake_eval.core.records import QUESTION_TYPES
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths
from intake_eval.metrics import registry
from intake_eval.metrics.answers import write_answer_tables
from intake_eval.metrics.arm_rows import arm_rows
from intake_eval.metrics.clinical import (
    RowCollector,
    load_default_catalog,
    write_diagnosis_metrics,
)
from intake_eval.metrics.collect import (
    Collected,
    conversation_columns,
    publish,
)
from intake_eval.metrics.collect import (
    collected as collected_pass,
)
from intake_eval.metrics.columnar import distinct, read_columns, row_count, sorted_rows
from intake_eval.metrics.columnar import sorted_rows_of as _rows
from intake_eval.metrics.comparisons import comparisons_rows
from intake_eval.metrics.cost import COST_BILLED_COLUMNS, cost_billed_rows, cost_tables
from intake_eval.metrics.curves import ALL_DOMAINS, PROBE_CURVE_COLUMNS, curve_rows
from intake_eval.metrics.events import DOMAIN_EVENT_COLUMNS
from intake_eval.metrics.forks import write_capacity_gap
from intake_eval.metrics.gc_pace import fewer_collections
from intake_eval.metrics.intervals import COLUMNS as INTERVAL_COLUMNS
from intake_eval.metrics.intervals import interval_rows
from intake_eval.metrics.judge_agreement import agreement_table
from intake_eval.metrics.masking_model import COLUMNS as MASKING_MODEL_COLUMNS
from intake_eval.metrics.masking_model import masking_model_rows
from intake_eval.metrics.patient_models import PATIENT_MODEL_COLUMNS, patient_model_rows
from intake_eval.metrics.patient_population import write_population_table
from intake_eval.metrics.reading import write_csv, write_csv_rows
from intake_eval.metrics.stats import (
    mean_ci,
    mean_or_none,
)
from intake_eval.metrics.styles import write_style_tables
from intake_eval.metrics.turn_labels import (
    SPREADSHEET_ROWS,
    TURN_LABELS_TABLE,
    TurnLabelRows,
)

GROUP = ("judge", "clinician", "condition", "patient_mode")
CONVERSATION_COLUMNS = tuple(conversation_columns())  # the shipped declarations' layout
Arm = tuple[str, str]  # (judge, clinician): the unit the tables read at a time


# ---------------------------------------------------------------- reading the pass's tables


def _group_key(row: dict[str, Any]) -> tuple:
    return tuple(row[name] for name in GROUP)


def _group_dict(key: tuple) -> dict[str, Any]:
    return dict(zip(GROUP, key))


def _arms(collected: Collected) -> list[Arm]:
    return [(str(judge), str(clinician)) for judge, clinician in distinct(collected.conversations, ["judge", "clinician"])]


def _ok(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in rows if row["status"] == "ok"]


def _coverage_estimate(rows: list[dict[str, Any]], seed: str) -> dict[str, Any]:
    """Mean active coverage with its interval, n, n_profiles and ci_method: the declared headline aggregate."""
    coverage = registry.by_name()["active_coverage_rate"]
    assert coverage.aggregate is not None, "active coverage declares its headline aggregate"
    return coverage.aggregate.summarise(coverage.name, rows, seed)


def repeated_trials(ok_rows: list[dict[str, Any]]) -> bool:
    """Does some profile have more than one scored conversation of one arm (by one judge)? Then every
    interval is the nested bootstrap (stats.mean_ci decides the same way, group by group)."""
    seen: set[tuple] = set()
    for row in ok_rows:
        key = (*_group_key(row), row["profile_id"])
        if key in seen:
            return True
        seen.add(key)
    return False


def cells_rows(ok_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for row in ok_rows:
        groups[(*_group_key(row), row["phenotype"])].append(row)
    out = []
    for key in sorted(groups):
        rows = groups[key]
        out.append({**_group_dict(key[:-1]), "phenotype": key[-1], "alignment": rows[0]["alignment"],
                    **_coverage_estimate(rows, "cells|" + "|".join(map(str, key))),
                    "mean_bleed_rate": mean_or_none([r["bleed_rate"] for r in rows])})
    return out


def _walk(path: Path, arm: Arm, group: Sequence[str], columns: Sequence[str]) -> Iterator[tuple[tuple, list[tuple]]]:
    """One arm's rows group by group (``group`` columns, sorted), each group's rows in conversation order."""
    rows = sorted_rows(path, [*group, *columns], (*group, "conversation_id"), where={"judge": arm[0], "clinician": arm[1]})
    width = len(group)
    for key, members in itertools.groupby(rows, key=lambda row: row[:width]):
        yield key, [row[width:] for row in members]


def domains_rows(collected: Collected, arm: Arm) -> list[dict[str, Any]]:
    """Per domain: rates over the conversations where it was hidden; the active-coverage rate with the
    interval every figure uses (stats.mean_ci over profiles, nested with trials)."""
    out = []
    for (condition, mode, domain), rows in _walk(collected.domain_events, arm, ("condition", "patient_mode", "domain"),
                                                 ("profile_id", "actively_covered", "bled", "first_asked_turn",
                                                  "first_disclosure_unasked")):
        key = (*arm, condition, mode, domain)
        surfaced: dict[str, list[float]] = defaultdict(list)
        for profile, covered, _bled, _asked, _leaked in rows:
            surfaced[profile].append(float(covered))
        n = len(rows)
        estimate = mean_ci(surfaced, seed="domains|" + "|".join(map(str, key)))
        out.append({**_group_dict(key[:-1]), "domain": domain, "n": n,
                    "active_coverage_rate": sum(row[1] for row in rows) / n,
                    "bleed_rate": sum(row[2] for row in rows) / n,
                    "asked_rate": sum(row[3] is not None for row in rows) / n,
                    "leak_rate": sum(row[4] for row in rows) / n,
                    "active_coverage_ci_low": estimate.ci_low, "active_coverage_ci_high": estimate.ci_high,
                    "ci_method": estimate.method})
    return out


def trajectories_rows(collected: Collected, arm: Arm) -> list[dict[str, Any]]:
    """Mean cumulative coverage per turn with its 95 % CI (stats.mean_ci: profiles, nested with trials), and the question mix."""
    out = []
    for (condition, mode, turn), rows in _walk(collected.turns, arm, ("condition", "patient_mode", "turn"),
                                               ("profile_id", "coverage", "question_type")):
        key = (*arm, condition, mode, turn)
        by_profile: dict[str, list[float]] = defaultdict(list)
        counts = dict.fromkeys(QUESTION_TYPES, 0)
        for profile, coverage, qtype in rows:
            if coverage is not None:
                by_profile[profile].append(coverage)
            if qtype is not None:
                counts[qtype] += 1
        if not by_profile and not any(qtype is not None for _p, _c, qtype in rows):
            continue  # neither a coverage point nor a question at this turn
        estimate = mean_ci(by_profile, seed="trajectory-band|" + "|".join(map(str, key[1:])))
        asked = sum(counts.values())
        out.append({**_group_dict(key[:-1]), "turn": turn, "n": estimate.n,
                    "mean_cumulative_coverage": estimate.mean, "mean_cumulative_coverage_ci_low": estimate.ci_low,
                    "mean_cumulative_coverage_ci_high": estimate.ci_high, "ci_method": estimate.method,
                    **{f"share_{q}": (counts[q] / asked if asked else None) for q in QUESTION_TYPES}})
    return out


def clinicians_rows(arm_rows: list[dict[str, Any]], spend: dict[tuple, list[Any]]) -> list[dict[str, Any]]:
    """One arm's rows per (condition, patient mode); ``spend``: (clinician, condition, patient mode) →
    [conversation failures, clinician tokens, clinician dollars] over the arm's conversations."""
    groups: dict[tuple, list] = defaultdict(list)
    for row in arm_rows:
        groups[_group_key(row)].append(row)
    out = []
    for key in sorted(groups):
        rows = groups[key]
        ok = [r for r in rows if r["status"] == "ok"]
        costs = [r["judge_cost_usd"] for r in rows]
        failures, tokens, dollars = spend.get(key[1:], (0, 0, 0.0))
        out.append({
            **_group_dict(key), "judge_mode": rows[0]["judge_mode"], "judged": len(rows),
            **registry.summarise(ok, "clinicians|" + "|".join(map(str, key))),
            "conversation_failures": failures,
            "judge_errors": sum(1 for r in rows if r["status"] == "judge_error"),
            "judge_provider_errors": sum(1 for r in rows if r["status"] not in ("ok", "judge_error")),
            "judge_tokens": sum(r["judge_prompt_tokens"] + r["judge_completion_tokens"] for r in rows),
            "judge_tokens_per_conversation": mean_or_none([r["judge_prompt_tokens"] + r["judge_completion_tokens"] for r in rows]),
            "judge_cost_usd": sum(c for c in costs if c is not None) if all(c is not None for c in costs) else None,
            "clinician_tokens": tokens,
            "clinician_cost_usd": dollars,
        })
    return out


def _clinician_spend(collected: Collected) -> dict[tuple, list[Any]]:
    """(clinician, condition, patient mode) → [failed conversations, clinician tokens, clinician dollars],
    summed in conversation order."""
    spend: dict[tuple, list[Any]] = defaultdict(lambda: [0, 0, 0.0])
    columns = ("clinician", "condition", "patient_mode", "status", "clinician_tokens", "clinician_cost")
    for (clinician,) in distinct(collected.meta, ["clinician"]):
        for _clinician, condition, mode, status, tokens, dollars in _rows(collected.meta, columns,
                                                                          {"clinician": clinician}):
            tally = spend[(clinician, condition, mode)]
            tally[0] += status != "ok"
            tally[1] += tokens
            tally[2] += dollars
    return spend


def masking_rows(ok_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for row in ok_rows:
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


def probe_curve_rows(collected: Collected, arm: Arm) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One arm's (not yet asked, still probing) curve rows (metrics/curves.py)."""
    where = {"judge": arm[0], "clinician": arm[1]}
    asked: dict[tuple, list[tuple[int, bool]]] = defaultdict(list)
    probing: dict[tuple, list[tuple[int, bool]]] = defaultdict(list)
    for condition, mode, domain, first_asked, last in sorted_rows(
            collected.domain_events, ("condition", "patient_mode", "domain", "first_asked_turn", "last_turn"),
            ("conversation_id",), where=where):
        unit = (first_asked, True) if first_asked is not None else (last, False)
        asked[(*arm, condition, mode, ALL_DOMAINS)].append(unit)
        asked[(*arm, condition, mode, domain)].append(unit)
    for condition, mode, closure, last in sorted_rows(collected.units, ("condition", "patient_mode",
                                                                         "premature_closure", "last_turn"),
                                                      ("conversation_id",), where=where):
        probing[(*arm, condition, mode, ALL_DOMAINS)].append((closure, True) if closure is not None else (last, False))
    return curve_rows(asked, probing)


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

    with fewer_collections():  # the pass's garbage goes by reference counting; see metrics/gc_pace.py
        return _write_metrics(paths, kinds)


def _write_metrics(paths: RunPaths, kinds: StageKinds) -> dict[str, Path]:
    diagnosis = RowCollector(paths, load_default_catalog(paths))
    turn_labels = TurnLabelRows(paths)

    def also(*seen: Any) -> None:
        diagnosis.add(*seen)
        turn_labels.add(*seen)

    try:
        with collected_pass(paths, also=also) as collected:
            return _write_tables(paths, kinds, collected, diagnosis, turn_labels)
    except BaseException:
        turn_labels.discard()  # no partial Parquet file is left beside the tables
        diagnosis.close()  # its spill files go too
        raise


def write_long_csv(source: Path, target: Path, columns: Sequence[str]) -> Path:
    """A long table's CSV, sorted by (judge, conversation), while it fits a spreadsheet; beyond, Parquet only
    (an older, shorter CSV is removed: it would disagree). Returns the table's main file."""
    if row_count(source) > SPREADSHEET_ROWS:
        target.unlink(missing_ok=True)
        return target.with_suffix(".parquet")
    return write_csv_rows(target, columns, sorted_rows(source, columns, ("judge", "conversation_id"), "judge"))


class _ArmTables:
    """The tables built one judge × clinician arm at a time, each arm's rows appended in arm order."""

    NAMES = ("cells", "domains", "trajectories", "clinicians", "masking", "masking_model", "patient_models")

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {name: [] for name in self.NAMES}
        self.not_yet_asked: list[dict[str, Any]] = []
        self.still_probing: list[dict[str, Any]] = []
        self.repeated = False
        self.patients: set[str] = set()

    def add(self, collected: Collected, arm: Arm, spend: dict[tuple, list[Any]], pooled: bool) -> None:
        rows = arm_rows(collected, arm)
        ok = _ok(rows)
        self.repeated = self.repeated or repeated_trials(ok)
        self.rows["cells"] += cells_rows(ok)
        self.rows["clinicians"] += clinicians_rows(rows, spend)
        self.rows["masking"] += masking_rows(ok)
        self.rows["masking_model"] += masking_model_rows(ok)
        if pooled:
            self.rows["patient_models"] += patient_model_rows(ok, several=True)
        del rows, ok
        self.rows["domains"] += domains_rows(collected, arm)
        self.rows["trajectories"] += trajectories_rows(collected, arm)
        asked, probing = probe_curve_rows(collected, arm)
        self.not_yet_asked += asked
        self.still_probing += probing


def _several_patient_models(collected: Collected) -> bool:
    statuses = read_columns(collected.conversations, ["status", "patient"])
    return len(set(statuses["patient"][statuses["status"] == "ok"].tolist())) > 1


def _write_tables(paths: RunPaths, kinds: StageKinds, collected: Collected, diagnosis: RowCollector,
                  turn_labels: TurnLabelRows) -> dict[str, Path]:
    written = {}
    written["conversations"] = write_long_csv(collected.conversations, paths.metrics("conversations"),
                                              conversation_columns())
    pooled = _several_patient_models(collected)
    spend = _clinician_spend(collected)
    arm_tables = _ArmTables()
    for arm in _arms(collected):
        arm_tables.add(collected, arm, spend, pooled)
    columns = {"cells": TABLE_COLUMNS["cells"], "domains": TABLE_COLUMNS["domains"],
               "trajectories": TABLE_COLUMNS["trajectories"], "clinicians": clinician_columns(),
               "masking": TABLE_COLUMNS["masking"], "masking_model": MASKING_MODEL_COLUMNS}
    for name, table_columns in columns.items():
        written[name] = write_csv(paths.metrics(name), table_columns, arm_tables.rows[name])
    written["agreement"] = write_csv(paths.metrics("agreement"), TABLE_COLUMNS["agreement"], agreement_table(collected))
    judges = [str(judge) for (judge,) in distinct(collected.conversations, ["judge"])]
    written["comparisons"] = write_csv(paths.metrics("comparisons"), TABLE_COLUMNS["comparisons"],
                                       [row for judge in judges for row in comparisons_rows(collected, judge)])
    written["intervals"] = write_csv(paths.metrics("intervals"), INTERVAL_COLUMNS,
                                     interval_rows(arm_tables.repeated, pooled_patients=pooled))
    written["domain_events"] = write_long_csv(collected.domain_events, paths.metrics("domain_events"),
                                              DOMAIN_EVENT_COLUMNS)
    written["probe_curves"] = write_csv(paths.metrics("probe_curves"), PROBE_CURVE_COLUMNS,
                                        [*arm_tables.not_yet_asked, *arm_tables.still_probing])
    for name, (cost_columns, cost_rows) in cost_tables(collected, judges).items():
        written[name] = write_csv_rows(paths.metrics(name), cost_columns, cost_rows)
    written["cost_billed"] = write_csv(paths.metrics("cost_billed"), COST_BILLED_COLUMNS, cost_billed_rows(paths, kinds))
    if arm_tables.rows["patient_models"]:  # a run with several patient models: the breakdown beside the pooled headline
        written["patient_models"] = write_csv(paths.metrics("patient_models"), PATIENT_MODEL_COLUMNS,
                                              arm_tables.rows["patient_models"])
    published = publish(collected, paths)  # conversations.parquet, domain_events.parquet
    if not paths.metrics("conversations").exists():
        written["conversations"] = published["conversations"]
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
