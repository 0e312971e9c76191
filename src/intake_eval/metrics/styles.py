"""Metrics by patient behaviour style: metrics/styles.csv and metrics/style_pairs.csv.

Written only when the run has conversations with a style other than forthcoming (core/patient_styles.py),
so a run made without styles has exactly the tables it always had. Read from metrics/conversations.csv
(scored intakes, forks left out: they are the capacity-gap analysis) and the style each conversation
record carries.

- styles.csv: per arm (clinician · condition · patient mode), judge and style, each of ``STYLE_METRICS``
  (the registry's ``compared`` metrics: coverage, bleed, first treatment-planning turn, closure, leaks) with
  the mean and stats.mean_ci's interval over the profiles (nested with trials). A turn metric is averaged
  over the intakes where it is defined; its ``_n`` says how many.
- style_pairs.csv: per arm and judge, every style against forthcoming on the same profiles: style −
  forthcoming with stats.paired_difference_ci and the paired tests of the clinician comparisons
  (Holm-adjusted per judge), and ``change``: "drops" / "rises" when the interval excludes 0, else
  "no detectable change" (an interval that includes 0 is not evidence of equivalence).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES
from intake_eval.core.spill import SpilledRows
from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.metrics import registry
from intake_eval.metrics.long_rows import iter_rows, table_exists
from intake_eval.metrics.record_headers import ConversationHeader
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import add_holm, mean_ci, paired_comparison, paired_difference_ci

# the metrics `compare` tests run against run (registry ``compared``): coverage, bleed, first treatment
# planning, closure and leaks, in declaration order
STYLE_METRICS = tuple(registry.compared_metrics())
ARM = ("clinician", "condition", "patient_mode")
STYLES_TABLE = "styles"
PAIRS_TABLE = "style_pairs"
STYLE_COLUMNS = ["arm", *ARM, "judge", "patient_style", "n", "n_profiles",
                 *(f"{metric}{suffix}" for metric in STYLE_METRICS for suffix in ("_mean", "_ci_low", "_ci_high", "_n"))]
PAIR_COLUMNS = ["arm", *ARM, "judge", "metric", "style_a", "style_b", "n_profiles", "mean_a", "mean_b", "difference",
                "difference_ci_low", "difference_ci_high", "ci_method", "change", "wilcoxon_p", "permutation_p",
                "wilcoxon_p_holm", "permutation_p_holm"]

Row = dict[str, Any]


def arm_name(row: Row) -> str:
    """The arm as api.with_arm writes it: clinician · condition · patient mode."""
    return " · ".join(str(row[column]) for column in ARM)


def conversation_styles(paths: RunPaths) -> SpilledRows:
    """conversation_id → its patient style (records made before styles are forthcoming), kept on disk
    (core/spill.SpilledRows); forks left out. Close it when done."""
    styles = SpilledRows.alone("conversation-styles", paths.metrics_dir)
    for path in paths.conversation_files():
        for data in iter_json_lines(path, model=ConversationHeader):
            if not data.get("fork"):
                styles[str(data.get("conversation_id"))] = str(data.get("patient_style") or DEFAULT_STYLE)
    return styles


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def scored_rows(conversations_csv: Path, styles: SpilledRows) -> list[Row]:
    """The scored, unforked rows of metrics/conversations.csv with their style and numeric metrics."""
    rows = []
    wanted = ("conversation_id", "status", *ARM, "judge", "profile_id", *STYLE_METRICS)
    for raw in iter_rows(conversations_csv, wanted):  # the Parquet file when the CSV is past a spreadsheet's size
        style = styles.get(raw["conversation_id"])
        if style is None or raw.get("status") != "ok":
            continue
        row: Row = {key: raw[key] for key in (*ARM, "judge", "profile_id")}
        row["patient_style"] = style
        row.update({metric: _number(raw.get(metric)) for metric in STYLE_METRICS})
        rows.append(row)
    return rows


def _by_profile(rows: list[Row], metric: str) -> dict[str, list[float | None]]:
    groups: dict[str, list[float | None]] = defaultdict(list)
    for row in rows:
        groups[row["profile_id"]].append(row[metric])
    return groups


def style_rows(rows: list[Row]) -> list[Row]:
    cells: dict[tuple, list[Row]] = defaultdict(list)
    for row in rows:
        cells[(*(row[c] for c in ARM), row["judge"], row["patient_style"])].append(row)
    out = []
    for key in sorted(cells, key=lambda k: (*k[:4], list(STYLES).index(k[4]) if k[4] in STYLES else len(STYLES))):
        members = cells[key]
        row = dict(zip((*ARM, "judge", "patient_style"), key))
        row.update(arm=arm_name(row), n=len(members), n_profiles=len({m["profile_id"] for m in members}))
        for metric in STYLE_METRICS:
            estimate = mean_ci(_by_profile(members, metric), seed=f"style|{'|'.join(key)}|{metric}")
            row.update({f"{metric}_mean": estimate.mean, f"{metric}_ci_low": estimate.ci_low,
                        f"{metric}_ci_high": estimate.ci_high, f"{metric}_n": estimate.n})
        out.append(row)
    return out


def change_word(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "not estimable"
    if high < 0:
        return "drops"
    if low > 0:
        return "rises"
    return "no detectable change"


def pair_rows(rows: list[Row]) -> list[Row]:
    """Every style against forthcoming within each arm and judge, paired on profiles."""
    groups: dict[tuple, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        groups[(*(row[c] for c in ARM), row["judge"])][row["patient_style"]].append(row)
    out = []
    for key in sorted(groups):
        by_style = groups[key]
        if DEFAULT_STYLE not in by_style:
            continue
        for other in (style for style in STYLES if style != DEFAULT_STYLE and style in by_style):
            for metric in STYLE_METRICS:
                a, b = _by_profile(by_style[other], metric), _by_profile(by_style[DEFAULT_STYLE], metric)
                seed = f"style-pair|{'|'.join(key)}|{other}|{metric}"
                interval = paired_difference_ci(a, b, seed=seed)
                means_a = {p: sum(v) / len(v) for p, vs in a.items() if (v := [x for x in vs if x is not None])}
                means_b = {p: sum(v) / len(v) for p, vs in b.items() if (v := [x for x in vs if x is not None])}
                tests = paired_comparison(means_a, means_b, seed=seed)
                row = dict(zip((*ARM, "judge"), key))
                row.update(arm=arm_name(row), metric=metric, style_a=other, style_b=DEFAULT_STYLE,
                           n_profiles=interval.n_groups, mean_a=tests.mean_a, mean_b=tests.mean_b,
                           difference=interval.mean, difference_ci_low=interval.ci_low,
                           difference_ci_high=interval.ci_high, ci_method=interval.method,
                           change=change_word(interval.ci_low, interval.ci_high),
                           wilcoxon_p=tests.wilcoxon_p, permutation_p=tests.permutation_p)
                out.append(row)
    add_holm(out, ("wilcoxon_p", "permutation_p"), family=("judge",))
    return out


def write_style_tables(paths: RunPaths) -> dict[str, Path]:
    """metrics/styles.csv and metrics/style_pairs.csv, when the run has a style other than forthcoming."""
    styles = conversation_styles(paths)
    try:
        conversations = paths.metrics("conversations")
        if set(styles.values()) <= {DEFAULT_STYLE} or not table_exists(conversations):
            return {}
        rows = scored_rows(conversations, styles)
    finally:
        styles.close()
    return {STYLES_TABLE: write_csv(paths.metrics(STYLES_TABLE), STYLE_COLUMNS, style_rows(rows)),
            PAIRS_TABLE: write_csv(paths.metrics(PAIRS_TABLE), PAIR_COLUMNS, pair_rows(rows))}
