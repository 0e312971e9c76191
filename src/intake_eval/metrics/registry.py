"""Every per-conversation metric, declared once, in the order its columns appear.

A ``Metric`` names its metrics/conversations.csv column, states its definition (DESIGN.md's sentence),
computes its value from one judged conversation (``Judged``), says how it is summarised per arm
(``aggregate``: its metrics/clinicians.csv columns and its report/headline.csv columns), how its numbers
are written for people (``scale``, over core/numbers) and its label on the page, in summary.md, in the
terminal and in `compare`.

metrics/conversations.csv, metrics/clinicians.csv, the report's headline (HTML, summary.md,
report/headline.csv, the terminal table) and `compare`'s paired metrics are laid out from ``METRICS``
when they are written (consumers read ``registry.METRICS`` at call time): a new metric is one entry here
plus its computation. Each metric names the ``generation`` of the column layout that added it: a table
lists a generation's columns after everything published before it, so no published column ever moves and
a new metric (the next generation) lands at the end of each table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from intake_eval.core import numbers
from intake_eval.core.records import QUESTION_TYPES
from intake_eval.metrics.figures import Figures, TurnLabels
from intake_eval.metrics.stats import Estimate, mean_ci, mean_or_none, median_with_undefined, pooled_mean_ci

Row = dict[str, Any]


class Judged(NamedTuple):
    """What a metric is computed from: one judged conversation's labels, its hidden domains and their figures."""

    turns: Sequence[TurnLabels]
    hidden: Sequence[str]
    figures: Figures


@dataclass(frozen=True)
class Scale:
    """How a metric's numbers are written (core/numbers): one value, a mean of values, a difference of means, an interval."""

    value: Callable[[Any], str]
    mean: Callable[[Any], str]
    difference: Callable[[Any], str]
    interval: Callable[[Any, Any], str]


RATE = Scale(numbers.pct, numbers.pct, numbers.points, numbers.ci)
TURN = Scale(numbers.turn, numbers.decimal, partial(numbers.decimal, signed=True), numbers.interval)
COUNT = Scale(numbers.count, numbers.decimal, partial(numbers.decimal, signed=True), numbers.interval)


@dataclass(frozen=True)
class HeadlineColumn:
    """A report/headline.csv column and the metrics/clinicians.csv column it is read from; ``count``: a whole number."""

    key: str
    column: str
    count: bool = False


@dataclass(frozen=True)
class HeadlineCell:
    """One metric's cell in the report's headline: ``key`` is its data-metric and report/headline.csv column."""

    kind: str  # "mean_ci", "mean", "median" or "total": how the page draws it
    key: str
    value: Any
    text: str
    detail: Any = None  # the interval's bounds, the never-count or the conversations counted
    detail_text: str = ""

    def plain(self) -> str:
        """The cell as one string (summary.md, the terminal): a mean with its interval, a median with (never)."""
        if self.kind == "mean_ci":
            return f"{self.text} {self.detail_text}".strip()
        if self.kind == "median":
            return f"{self.text} ({self.detail_text})"
        return self.text


def _by_profile(rows: Iterable[Row], metric: str) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.get(metric) is not None:
            groups[row["profile_id"]].append(float(row[metric]))
    return groups


def arm_mean_ci(rows: list[Row], metric: str, seed: str) -> Estimate:
    """An arm's mean with its interval: over several patient models pooled with equal weight per patient
    model (stats.pooled_mean_ci), else stats.mean_ci over its profiles."""
    if len({row.get("patient", "") for row in rows}) < 2:
        return mean_ci(_by_profile(rows, metric), seed=seed)
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get(metric) is not None:
            groups[row["profile_id"]][row["patient"]].append(float(row[metric]))
    return pooled_mean_ci(groups, seed=seed)


@dataclass(frozen=True)
class MeanWithInterval:
    """The mean over scored conversations with stats.mean_ci's interval (profiles, nested with trials).
    ``with_counts``: this estimate also gives the arm's n, n_profiles and ci_method (the headline's)."""

    column: str
    with_counts: bool = False
    kind = "mean_ci"

    def columns(self) -> tuple[str, ...]:
        counts = ("n", "n_profiles", "ci_method") if self.with_counts else ()
        return (self.column, f"{self.column}_ci_low", f"{self.column}_ci_high", *counts)

    def summarise(self, metric: str, rows: list[Row], scope: str) -> Row:
        # the headline estimate keeps the seed it always had, so published intervals do not move
        estimate = arm_mean_ci(rows, metric, scope if self.with_counts else f"{scope}|{metric}")
        out: Row = {self.column: estimate.mean, f"{self.column}_ci_low": estimate.ci_low,
               f"{self.column}_ci_high": estimate.ci_high}
        if self.with_counts:
            out.update(n=estimate.n, n_profiles=estimate.n_groups, ci_method=estimate.method)
        return out

    def headline_columns(self, short: str) -> list[HeadlineColumn]:
        return [HeadlineColumn(f"{short}_mean", self.column), HeadlineColumn(f"{short}_ci_low", f"{self.column}_ci_low"),
                HeadlineColumn(f"{short}_ci_high", f"{self.column}_ci_high")]

    def cell(self, short: str, scale: Scale, row: Row) -> HeadlineCell:
        bounds = (row[f"{short}_ci_low"], row[f"{short}_ci_high"])
        return HeadlineCell(self.kind, f"{short}_mean", row[f"{short}_mean"], scale.mean(row[f"{short}_mean"]),
                            bounds, scale.interval(*bounds))


@dataclass(frozen=True)
class Mean:
    """The mean over scored conversations where the metric is defined."""

    column: str
    kind = "mean"

    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def summarise(self, metric: str, rows: list[Row], scope: str) -> Row:
        return {self.column: mean_or_none([r[metric] for r in rows])}

    def headline_columns(self, short: str) -> list[HeadlineColumn]:
        return [HeadlineColumn(f"{short}_mean", self.column)]

    def cell(self, short: str, scale: Scale, row: Row) -> HeadlineCell:
        return HeadlineCell(self.kind, f"{short}_mean", row[f"{short}_mean"], scale.mean(row[f"{short}_mean"]))


@dataclass(frozen=True)
class MedianCountingUndefined:
    """The median over scored conversations where the metric is defined, and how many it was undefined in."""

    column: str
    undefined_column: str
    kind = "median"

    def columns(self) -> tuple[str, ...]:
        return (self.column, self.undefined_column)

    def summarise(self, metric: str, rows: list[Row], scope: str) -> Row:
        summary = median_with_undefined([r[metric] for r in rows])
        return {self.column: summary.median, self.undefined_column: summary.n_undefined}

    def headline_columns(self, short: str) -> list[HeadlineColumn]:
        return [HeadlineColumn(f"{short}_median", self.column),
                HeadlineColumn(f"{short}_never", self.undefined_column, count=True)]

    def cell(self, short: str, scale: Scale, row: Row) -> HeadlineCell:
        never = row[f"{short}_never"]
        return HeadlineCell(self.kind, f"{short}_median", row[f"{short}_median"], scale.value(row[f"{short}_median"]),
                            never, numbers.count(never))


@dataclass(frozen=True)
class TotalAndConversations:
    """The sum over scored conversations, and how many conversations it is above zero in."""

    column: str
    conversations_column: str
    kind = "total"

    def columns(self) -> tuple[str, ...]:
        return (self.column, self.conversations_column)

    def summarise(self, metric: str, rows: list[Row], scope: str) -> Row:
        return {self.column: sum(r[metric] for r in rows),
                self.conversations_column: sum(1 for r in rows if r[metric] > 0)}

    def headline_columns(self, short: str) -> list[HeadlineColumn]:
        return [HeadlineColumn(f"{short}_total", self.column, count=True),
                HeadlineColumn(f"{short}_conversations", self.conversations_column, count=True)]

    def cell(self, short: str, scale: Scale, row: Row) -> HeadlineCell:
        conversations = row[f"{short}_conversations"]
        return HeadlineCell(self.kind, f"{short}_total", row[f"{short}_total"], scale.value(row[f"{short}_total"]),
                            conversations, numbers.count(conversations))


@dataclass(frozen=True)
class CountTrue:
    """How many scored conversations the (true/false) metric holds in."""

    column: str
    kind = "count"

    def columns(self) -> tuple[str, ...]:
        return (self.column,)

    def summarise(self, metric: str, rows: list[Row], scope: str) -> Row:
        return {self.column: sum(1 for r in rows if r[metric])}

    def headline_columns(self, short: str) -> list[HeadlineColumn]:
        return [HeadlineColumn(f"{short}_conversations", self.column, count=True)]

    def cell(self, short: str, scale: Scale, row: Row) -> HeadlineCell:
        value = row[f"{short}_conversations"]
        return HeadlineCell(self.kind, f"{short}_conversations", value, numbers.count(value))


Aggregate = MeanWithInterval | Mean | MedianCountingUndefined | TotalAndConversations | CountTrue


@dataclass(frozen=True)
class Metric:
    """One per-conversation metric. ``headline``: ``short`` names its headline keys (coverage → coverage_mean);
    ``compared``: `compare` tests it run against run (one Holm family, so adding one moves the others' p)."""

    name: str  # its metrics/conversations.csv column
    definition: str
    compute: Callable[[Judged], Any]
    label: str
    tag: str = ""  # the terminal's narrow header (the label when empty)
    scale: Scale = RATE
    aggregate: Aggregate | None = None  # None: per conversation only
    short: str = ""
    unit: str = ""  # what a total counts, under the headline label
    headline: bool = False
    compared: bool = False
    generation: int = 1  # the column layout that added it (see the module docstring)
    dtype: str = "float64"  # its column's type in metrics/conversations.parquet: float64, int64 or bool

    def header(self) -> str:
        """The headline's column label (page, summary.md)."""
        if self.aggregate is not None and self.aggregate.kind == "mean_ci":
            return f"{self.label} [95% CI]"
        return self.label

    def plain_header(self) -> str:
        """The headline label on one line (summary.md, the terminal): a median's note as "(never)"."""
        never = self.aggregate is not None and self.aggregate.kind == "median"
        return self.header() + (" (never)" if never else "")

    def header_note(self) -> str:
        """The small line under the page's header, the parenthesis after summary.md's."""
        if self.aggregate is not None and self.aggregate.kind == "median":
            return "median (never)"
        return self.unit


def _question_count(qtype: str) -> Metric:
    return Metric(f"n_{qtype}", f"clinician turns (turn ≥ 1) the judge labelled {qtype}.",
                  lambda judged: judged.figures.metrics.question_types.get(qtype, 0),
                  f"{qtype.replace('_', ' ')} turns", scale=COUNT, dtype="int64")


def _asked_rate(judged: Judged) -> float | None:
    if not judged.hidden:
        return None
    return sum(o.first_asked_turn is not None for o in judged.figures.outcomes) / len(judged.hidden)


METRICS: tuple[Metric, ...] = (
    Metric("active_coverage_rate",
           "hidden domains with some turn where asked_about and disclosed are both true, ÷ hidden domains.",
           lambda judged: judged.figures.metrics.active_coverage_rate, "active coverage", tag="coverage",
           aggregate=MeanWithInterval("mean_active_coverage", with_counts=True), short="coverage", headline=True,
           compared=True),
    Metric("bleed_rate",
           "hidden domains with some turn where disclosed is true and asked_about false, ÷ hidden domains.",
           lambda judged: judged.figures.metrics.bleed_rate, "bleed",
           aggregate=Mean("mean_bleed_rate"), short="bleed", headline=True, compared=True),
    Metric("first_treatment_planning_turn", "smallest turn whose question_type is treatment_planning.",
           lambda judged: judged.figures.metrics.first_treatment_planning_turn, "first treatment-planning turn",
           tag="1st TP", scale=TURN, aggregate=MedianCountingUndefined("median_first_treatment_planning_turn",
                                                         "first_treatment_planning_undefined"),
           short="first_tp", headline=True, compared=True, dtype="int64"),
    Metric("premature_closure_turn",
           "smallest t such that every turn from t to the last is treatment_planning or other.",
           lambda judged: judged.figures.metrics.premature_closure_turn, "premature closure turn",
           tag="closure", scale=TURN, aggregate=MedianCountingUndefined("median_premature_closure_turn", "premature_closure_undefined"),
           short="closure", headline=True, compared=True, dtype="int64"),
    Metric("patient_leak_count", "turns the judge marked patient_faithful = false.",
           lambda judged: judged.figures.metrics.patient_leak_count, "patient leaks", tag="leaks", scale=COUNT,
           aggregate=TotalAndConversations("patient_leak_count", "conversations_leaking"), short="leak", unit="turns",
           headline=True, compared=True, dtype="int64"),
    Metric("n_turns", "clinician turns (turn ≥ 1) judged.", lambda judged: judged.figures.metrics.n_turns,
           "clinician turns", scale=COUNT, dtype="int64"),
    *(_question_count(qtype) for qtype in QUESTION_TYPES),
    Metric("leak_adjusted_active_coverage_rate",
           "active coverage over the hidden domains whose first disclosure was asked about (leaked domains leave "
           "numerator and denominator).",
           lambda judged: judged.figures.metrics.leak_adjusted_active_coverage_rate, "leak-adjusted active coverage",
           aggregate=Mean("mean_leak_adjusted_active_coverage"), generation=2),
    Metric("overshared", "some hidden domain was first disclosed on a turn that did not ask about it.",
           lambda judged: judged.figures.metrics.overshared, "overshared", scale=COUNT,
           aggregate=CountTrue("conversations_overshared"), generation=2, dtype="bool"),
    Metric("hidden_asked_rate", "hidden domains with some turn where asked_about is true, ÷ hidden domains.",
           _asked_rate, "asked about", tag="asked", aggregate=MeanWithInterval("mean_hidden_asked_rate"), short="asked",
           headline=True, generation=3),
)


def metric_row(judged: Judged) -> Row:
    """Every declared metric of one judged conversation, by its conversations.csv column."""
    return {metric.name: metric.compute(judged) for metric in METRICS}


def conversation_metric_columns(first: int, last: int | None = None) -> list[str]:
    """metrics/conversations.csv's metric columns added in generations ``first``..``last`` (no end: every later one)."""
    return [metric.name for metric in METRICS if _in(metric, first, last)]


def summary_columns(first: int, last: int | None = None) -> list[str]:
    """metrics/clinicians.csv's columns of the aggregates declared in generations ``first``..``last``."""
    return [column for metric in METRICS if metric.aggregate is not None and _in(metric, first, last)
            for column in metric.aggregate.columns()]


def _in(metric: Metric, first: int, last: int | None) -> bool:
    return metric.generation >= first and (last is None or metric.generation <= last)


def summarise(rows: list[Row], scope: str) -> Row:
    """Every declared aggregate over one arm's scored conversation rows; ``scope`` seeds the intervals."""
    out: Row = {}
    for metric in METRICS:
        if metric.aggregate is not None:
            out.update(metric.aggregate.summarise(metric.name, rows, scope))
    return out


def headline_metrics() -> list[Metric]:
    return [metric for metric in METRICS if metric.headline and metric.aggregate is not None]


def headline_columns() -> list[HeadlineColumn]:
    """report/headline.csv's metric columns, in declaration order."""
    return [column for metric in headline_metrics() for column in _aggregate(metric).headline_columns(metric.short)]


def headline_cells(row: Row) -> list[tuple[Metric, HeadlineCell]]:
    """The headline metrics' cells of one report headline row (keyed by ``headline_columns``), formatted."""
    return [(metric, _aggregate(metric).cell(metric.short, metric.scale, row)) for metric in headline_metrics()]


def _aggregate(metric: Metric) -> Aggregate:
    if metric.aggregate is None:
        raise ValueError(f"metric {metric.name} has no per-arm aggregate")
    return metric.aggregate


def compared_metrics() -> dict[str, Metric]:
    return {metric.name: metric for metric in METRICS if metric.compared}


def by_name() -> dict[str, Metric]:
    return {metric.name: metric for metric in METRICS}
