"""The report's numbers, read from metrics/*.csv (one source of numbers) for the primary judge.

Every number shown in the HTML, the Markdown and the terminal comes from the dicts built here,
so the three always agree with each other and with the CSVs. The only numbers not in a metrics
CSV are the patient's token spend (from the conversation records) and the drill-down squares
(active / bleed / asked only / missed per hidden domain), which need the judge's labels; "active"
there is the metrics module's "actively covered" (the tests check it against caught_domains).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from intake_eval.core.records import QUESTION_TYPES
from intake_eval.core.spill import SpilledRows, SpilledSet
from intake_eval.metrics import registry
from intake_eval.metrics.intervals import declared_intervals
from intake_eval.report.load import RunData, spill_store

Arm = tuple[str, str, str]  # (clinician, condition, patient_mode)


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None if value is None else float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _int(value: Any) -> int:
    number = _num(value)
    return int(number) if number is not None else 0


def arm_of(row: dict[str, Any]) -> Arm:
    return (str(row.get("clinician", "")), str(row.get("condition", "minimal")), str(row.get("patient_mode", "prompted")))


def arm_labels(keys: list[Arm]) -> dict[Arm, str]:
    vary_condition = len({k[1] for k in keys}) > 1
    vary_mode = len({k[2] for k in keys}) > 1
    return {key: " · ".join([key[0]] + ([key[1]] if vary_condition else []) + ([f"{key[2]} patient"] if vary_mode else []))
            for key in keys}


def table_rows(data: RunData, name: str, judge: str | None = None) -> list[dict[str, Any]]:
    """Rows of metrics/<name>.csv as dicts (NaN → None), optionally for one judge."""
    table = data.tables.get(name)
    if table is None or not len(table):
        return []
    if judge is not None and "judge" in table.columns:
        table = table[table["judge"].astype(str) == judge]
    rows = table.astype(object).where(table.notna(), None).to_dict("records")
    return rows


def conversation_coverage(data: RunData, judge: str | None) -> Mapping[str, float | None]:
    """conversation_id → active coverage by ``judge``, reading only the three columns it needs of the long
    metrics/conversations table, a batch of rows at a time; held in the run's spill store (a later row of a
    conversation wins)."""
    wanted = ("conversation_id", "judge", "active_coverage_rate")
    batches = getattr(data.tables, "column_batches", None)
    frames = batches("conversations", wanted) if batches is not None else [data.tables.get("conversations")]
    coverage = SpilledRows(spill_store(data))
    for table in frames:
        if table is None or not len(table) or not {"conversation_id", "active_coverage_rate"} <= set(table.columns):
            continue
        if judge is not None and "judge" in table.columns:
            table = table[table["judge"].astype(str) == judge]
        for cid, value in zip(table["conversation_id"], table["active_coverage_rate"]):
            coverage.put(str(cid), _num(value))
    spill_store(data).commit()
    return coverage


def _patient_spend(data: RunData) -> dict[Arm, tuple[int, float, bool]]:
    spend: dict[Arm, list] = {}
    for conv in data.conversations.values():
        usage = (conv.get("usage") or {}).get("patient") or {}
        entry = spend.setdefault(arm_of(conv), [0, 0.0, True])
        entry[0] += int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        entry[1] += float(usage.get("cost_usd", 0.0))
        entry[2] = entry[2] and bool(usage.get("cost_known", True))
    return {arm: (t, c, k) for arm, (t, c, k) in spend.items()}


def headline(data: RunData, arms: list[Arm], labels: dict[Arm, str], primary: str | None) -> list[dict[str, Any]]:
    """clinicians.csv rows of the primary judge, plus spend summed over every judge and the patient."""
    every_judge = table_rows(data, "clinicians")
    mine = {arm_of(r): r for r in every_judge if primary is not None and str(r["judge"]) == primary}
    judge_spend: dict[Arm, list] = {}
    for row in every_judge:
        entry = judge_spend.setdefault(arm_of(row), [0, 0.0, True])
        entry[0] += _int(row.get("judge_tokens"))
        cost = _num(row.get("judge_cost_usd"))
        entry[1] += cost or 0.0
        entry[2] = entry[2] and cost is not None
    patient = _patient_spend(data)
    done = data.judgments.get(primary, {}) if primary else {}
    counts = _arm_counts(data, done)
    answers = {arm_of(r): r for r in table_rows(data, "answers")}
    out = []
    for arm in arms:
        row = mine.get(arm, {})
        n_conversations, failures, not_judged = counts.get(arm, (0, 0, 0))
        p_tokens, p_cost, p_known = patient.get(arm, (0, 0.0, True))
        j_tokens, j_cost, j_known = judge_spend.get(arm, (0, 0.0, True))
        c_tokens, c_cost = _int(row.get("clinician_tokens")), _num(row.get("clinician_cost_usd")) or 0.0
        out.append({
            "arm": labels[arm], "clinician": arm[0], "condition": arm[1], "patient_mode": arm[2],
            "n_conversations": n_conversations, "n_scored": _int(row.get("n")), "n_profiles": _int(row.get("n_profiles")),
            **headline_metric_values(row),
            "failures": _int(row.get("conversation_failures")) if row else failures,
            "judge_errors": _int(row.get("judge_errors")) + _int(row.get("judge_provider_errors")),
            "not_judged": not_judged,
            "tokens": c_tokens + p_tokens + j_tokens, "cost_usd": c_cost + p_cost + j_cost,
            "cost_known": p_known and j_known,
            "spend_detail": f"clinician {c_tokens:,} tok ${c_cost:,.2f} · patient {p_tokens:,} tok ${p_cost:,.2f} · "
                            f"judges {j_tokens:,} tok ${j_cost:,.2f}",
            **answer_cells(answers.get(arm, {})),
        })
    return out


def _arm_counts(data: RunData, done: Mapping[str, Any]) -> dict[Arm, tuple[int, int, int]]:
    """arm → (conversations, failed ones, finished ones the primary judge has not judged), in one pass."""
    counts: dict[Arm, list[int]] = {}
    for conv in data.conversations.values():
        entry = counts.setdefault(arm_of(conv), [0, 0, 0])
        entry[0] += 1
        if conv.get("status", "ok") != "ok":
            entry[1] += 1
        elif conv["conversation_id"] not in done:
            entry[2] += 1
    return {arm: (n, failed, not_judged) for arm, (n, failed, not_judged) in counts.items()}


def headline_metric_values(row: dict[str, Any]) -> dict[str, Any]:
    """The declared headline metrics (metrics/registry) of one clinicians.csv row, by their headline keys."""
    return {column.key: _int(row.get(column.column)) if column.count else _num(row.get(column.column))
            for column in registry.headline_columns()}


def answer_cells(row: dict[str, Any]) -> dict[str, Any]:
    """The headline's answers column (metrics/answers.csv): the clinician's conversations failed on an
    answer without visible text, and the share of its answers cut at the token cap."""
    return {"no_text": _int(row.get("clinician_refused")) + _int(row.get("clinician_empty_answer")),
            "refused": _int(row.get("clinician_refused")), "empty": _int(row.get("clinician_empty_answer")),
            "cut": _int(row.get("clinician_truncated")), "cut_share": _num(row.get("clinician_truncated_share"))}


def answer_banner(data: RunData) -> list[str]:
    """One line per clinician arm whose answers were refused, empty or cut (empty when none were)."""
    lines = []
    for row in table_rows(data, "answers"):
        cells = answer_cells(row)
        arm = str(row["clinician"]) + ("" if (row["condition"], row["patient_mode"]) == ("minimal", "prompted")
                                       else f" ({row['condition']}, {row['patient_mode']} patient)")
        parts = []
        if cells["no_text"]:
            parts.append(f"{cells['no_text']} of {_int(row.get('conversations'))} conversations failed on an answer "
                         f"without visible text ({cells['refused']} refused, {cells['empty']} empty): counted, not scored")
        if cells["cut"]:
            parts.append(f"{cells['cut']} of {_int(row.get('clinician_answers'))} clinician answers "
                         f"({(cells['cut_share'] or 0):.0%}) were cut at the token cap and kept")
        patient_cut = _int(row.get("patient_truncated"))
        if patient_cut:
            parts.append(f"{patient_cut} patient answers ({(_num(row.get('patient_truncated_share')) or 0):.0%}) were cut")
        if _int(row.get("failed_truncated")):
            parts.append(f"{_int(row.get('failed_truncated'))} conversations failed under --on-truncation fail")
        if parts:
            lines.append(f"{arm}: " + "; ".join(parts))
    return lines


def matrix(data: RunData, arms: list[Arm], labels: dict[Arm, str], primary: str | None) -> dict[str, Any]:
    cells: dict[tuple[str, Arm], dict] = {}
    alignment: dict[str, str] = {}
    for row in table_rows(data, "cells", primary):
        cells[(str(row["phenotype"]), arm_of(row))] = row
        alignment[str(row["phenotype"])] = str(row.get("alignment") or "")
    phenotypes = sorted({p for p, _ in cells})
    overall = {}
    for p in phenotypes:  # difficulty: conversation-weighted mean over every clinician
        pairs = [(_num(r["mean_active_coverage"]), _int(r["n"])) for (q, _), r in cells.items() if q == p]
        total = sum(n for v, n in pairs if v is not None)
        overall[p] = sum(v * n for v, n in pairs if v is not None) / total if total else None
    phenotypes.sort(key=lambda p: (overall[p] if overall[p] is not None else 2.0, p))  # hardest first
    values = [[_num(cells[(p, a)]["mean_active_coverage"]) if (p, a) in cells else None for a in arms] for p in phenotypes]
    counts = [[_int(cells[(p, a)]["n"]) if (p, a) in cells else None for a in arms] for p in phenotypes]
    masking_rows = {(arm_of(r), str(r["alignment"])): r for r in table_rows(data, "masking", primary)}
    models = {arm_of(r): r for r in table_rows(data, "masking_model", primary)}  # metrics/masking_model.py
    masking = []
    for arm in arms:
        entry: dict[str, Any] = {"arm": labels[arm]}
        for kind in ("masked", "aligned"):
            row = masking_rows.get((arm, kind), {})
            entry[f"{kind}_mean"] = _num(row.get("mean_active_coverage"))
            entry[f"{kind}_lo"] = _num(row.get("mean_active_coverage_ci_low"))
            entry[f"{kind}_hi"] = _num(row.get("mean_active_coverage_ci_high"))
            entry[f"{kind}_n"] = _int(row.get("n"))
        entry["difference"] = _num(masking_rows.get((arm, "masked"), {}).get("difference_vs_aligned"))
        model = models.get(arm, {})
        entry.update(model_difference=_num(model.get("difference")), model_lo=_num(model.get("ci_low")),
                     model_hi=_num(model.get("ci_high")), model_p=_num(model.get("permutation_p")),
                     model_exact=str(model.get("permutation_exact")).lower() == "true",
                     masked_phenotypes=_int(model.get("masked_phenotypes")),
                     aligned_phenotypes=_int(model.get("aligned_phenotypes")))
        if entry["masked_n"] or entry["aligned_n"]:
            masking.append(entry)
    return {"phenotypes": phenotypes, "overall": overall, "alignment": alignment, "arms": [labels[a] for a in arms],
            "values": values, "counts": counts, "masking": masking}


def domain_breakdown(data: RunData, arms: list[Arm], labels: dict[Arm, str], primary: str | None) -> dict[str, Any]:
    cells = {(str(r["domain"]), arm_of(r)): r for r in table_rows(data, "domains", primary)}
    domains = sorted({d for d, _ in cells})
    overall = {}
    for d in domains:
        pairs = [(_num(r["active_coverage_rate"]), _int(r["n"])) for (e, _), r in cells.items() if e == d]
        total = sum(n for v, n in pairs if v is not None)
        overall[d] = sum(v * n for v, n in pairs if v is not None) / total if total else None
    domains.sort(key=lambda d: (overall[d] if overall[d] is not None else 2.0, d))
    values = [[_num(cells[(d, a)]["active_coverage_rate"]) if (d, a) in cells else None for a in arms] for d in domains]
    counts = [[_int(cells[(d, a)]["n"]) if (d, a) in cells else None for a in arms] for d in domains]
    # the interval every figure uses (metrics/domains.csv: profiles resampled, nested with trials)
    ci_low = [[_num(cells[(d, a)].get("active_coverage_ci_low")) if (d, a) in cells else None for a in arms] for d in domains]
    ci_high = [[_num(cells[(d, a)].get("active_coverage_ci_high")) if (d, a) in cells else None for a in arms] for d in domains]
    return {"domains": domains, "arms": [labels[a] for a in arms], "overall": overall, "values": values,
            "counts": counts, "ci_low": ci_low, "ci_high": ci_high}


def trajectories(data: RunData, arms: list[Arm], labels: dict[Arm, str], primary: str | None) -> tuple[dict, dict, int]:
    by_arm: dict[Arm, list[dict]] = {}
    for row in table_rows(data, "trajectories", primary):
        by_arm.setdefault(arm_of(row), []).append(row)
    lines, mixes, max_turn = {}, {}, 1
    for arm in arms:
        rows = sorted(by_arm.get(arm, []), key=lambda r: _int(r["turn"]))
        points = [r for r in rows if _num(r.get("mean_cumulative_coverage")) is not None]
        if not points:
            continue
        max_turn = max(max_turn, max(_int(r["turn"]) for r in rows))
        lines[labels[arm]] = {"turns": [_int(r["turn"]) for r in points],
                              "mean": [_num(r["mean_cumulative_coverage"]) for r in points],
                              "n": max(_int(r["n"]) for r in points)}
        bands = [(_num(r.get("mean_cumulative_coverage_ci_low")), _num(r.get("mean_cumulative_coverage_ci_high")))
                 for r in points]
        if all(low is not None and high is not None for low, high in bands):  # 95 % CI over profiles
            lines[labels[arm]].update(lo=[low for low, _ in bands], hi=[high for _, high in bands])
        turns = [r for r in rows if _int(r["turn"]) >= 1]
        mixes[labels[arm]] = {"turns": [_int(r["turn"]) for r in turns], "n": lines[labels[arm]]["n"],
                              "shares": {q: [_num(r.get(f"share_{q}")) or 0.0 for r in turns] for q in QUESTION_TYPES}}
    return lines, mixes, max_turn


def intervals(data: RunData) -> dict[str, str]:
    """figure → the interval it states (metrics/intervals.csv; declared from the conversations when absent)."""
    declared = {str(r["figure"]): str(r["interval"]) for r in table_rows(data, "intervals")}
    if declared:
        return declared
    seen = SpilledSet(spill_store(data))  # (arm, profile) of each finished conversation: does one repeat?
    repeated = False
    for conv in data.conversations.values():
        if conv.get("status", "ok") == "ok":
            key = json.dumps([*arm_of(conv), conv.get("profile_id")])
            repeated = repeated or key in seen
            seen.add(key)
    return declared_intervals(repeated)


def comparisons(data: RunData, primary: str | None) -> list[dict[str, Any]]:
    return [r for r in table_rows(data, "comparisons", primary)]


def judged_outcomes(conv: Mapping[str, Any], judged: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A conversation's drill-down outcomes from its slim judgment; None unless it finished and was judged ok."""
    return judged["outcomes"] if judged is not None and conv.get("status", "ok") == "ok" else None
