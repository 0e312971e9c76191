"""metrics/agreement.csv: Cohen's κ per label between every two judges, from the agreement units the metrics
pass spilled (metrics/collect.py), read one clinician and range of conversations at a time and paired conversation
by conversation."""

from __future__ import annotations

import itertools
from typing import Any

from intake_eval.metrics.agreement import LABELS, PairedLabels, agreement_rows
from intake_eval.metrics.collect import SEPARATOR, Collected
from intake_eval.metrics.columnar import conversation_ranges, distinct, sorted_rows

_UNITS_AT_A_TIME = 5_000  # agreement units (a judgment each) read and sorted at once


def _unit_values(label: str, text: str) -> list[Any]:
    if label == "question_type":
        return text.split(SEPARATOR) if text else []
    return [flag == "1" for flag in text]


def agreement_table(collected: Collected) -> list[dict[str, Any]]:
    """Cohen's κ per label between every two judges, on the conversations both labelled successfully;
    read one clinician at a time (a conversation's judgments all name its clinician), conversation by conversation."""
    pairs: dict[tuple[str, str], PairedLabels] = {}
    judges = sorted(str(judge) for (judge,) in distinct(collected.units, ["judge"]))
    for judge_a, judge_b in itertools.combinations(judges, 2):
        pairs[(judge_a, judge_b)] = PairedLabels.empty()
    columns = ["conversation_id", "judge", *(f"{label}_{part}" for label in LABELS for part in ("keys", "values"))]
    for (clinician,) in distinct(collected.units, ["clinician"]):
        # a range of conversation ids at a time: a conversation's units by every judge fall in one range
        for filters in conversation_ranges(collected.units, {"clinician": clinician}, rows=_UNITS_AT_A_TIME):
            rows = sorted_rows(collected.units, columns, ("conversation_id", "judge"), filters=filters)
            for _conversation, judged in itertools.groupby(rows, key=lambda row: row[0]):
                cells = {row[1]: row[2:] for row in judged}
                for judge_a, judge_b in itertools.combinations(sorted(cells), 2):
                    _add_pair(pairs[(judge_a, judge_b)], cells[judge_a], cells[judge_b])
    out = []
    for (judge_a, judge_b), paired in pairs.items():
        for row in agreement_rows(paired):
            out.append({"judge_a": judge_a, "judge_b": judge_b, "conversations": paired.conversations,
                        **row.__dict__})
    return out


def _add_pair(pairs: PairedLabels, cells_a: tuple, cells_b: tuple) -> None:
    """One conversation's labels by two judges, paired on the units both labelled (a judge's unit keys and
    values as the metrics pass wrote them: most pairs share their keys, so the values are zipped)."""
    pairs.conversations += 1
    for index, label in enumerate(LABELS):
        keys_a, values_a = cells_a[2 * index], _unit_values(label, cells_a[2 * index + 1])
        keys_b, values_b = cells_b[2 * index], _unit_values(label, cells_b[2 * index + 1])
        if keys_a == keys_b:
            pairs.joint[label].update(zip(values_a, values_b))
        else:
            a = dict(zip(keys_a.split(SEPARATOR), values_a))
            b = dict(zip(keys_b.split(SEPARATOR), values_b))
            pairs.joint[label].update((a[key], b[key]) for key in a.keys() & b.keys())
