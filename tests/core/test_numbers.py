"""One number formatter (core/numbers.py) and rankings that show ties."""

from __future__ import annotations

import csv
import math

import pytest

from intake_eval.core import numbers
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.sensitivity import tied_ranks
from intake_eval.report import fmt


def test_display_cells_per_kind_of_number():
    assert numbers.pct(0.304166) == "30.4%" and numbers.pct(None) == numbers.DASH
    assert numbers.ci(0.229, 0.3816) == "[22.9–38.2]"
    assert numbers.ci(-0.3833, -0.2277) == "[-38.3, -22.8]"  # a difference's interval keeps its signs readable
    assert numbers.points(-0.0312) == "-3.1 pts"
    assert numbers.p_value(0.0004) == "< 0.001" and numbers.p_value(0.73626) == "0.736"
    assert numbers.turn(6.51282) == "6.5" and numbers.turn(8.0) == "8" and numbers.turn(float("nan")) == numbers.DASH
    assert numbers.decimal(1234.5678) == "1,234.57" and numbers.decimal(-0.5, signed=True) == "-0.50"
    assert numbers.decimal(1.0, signed=True) == "+1.00" and numbers.interval(1.25, 3) == "[1.25, 3.00]"
    assert numbers.general(6.51282) == "6.513" and numbers.general(12.0) == "12"
    assert fmt.pct is numbers.pct and fmt.turn is numbers.turn  # the report formats are these


def test_csv_cells_one_precision_for_machines(tmp_path):
    assert numbers.csv_cell(None) == numbers.csv_cell(math.nan) == ""
    assert numbers.csv_cell(True) == "true" and numbers.csv_cell(7) == 7
    assert numbers.csv_cell(1 / 3) == "0.333333" and numbers.csv_cell(2.970568e-06) == "2.97057e-06"
    path = write_csv(tmp_path / "t.csv", ["a", "b", "c"], [{"a": 6.512820512820513, "b": None, "c": False}])
    assert list(csv.DictReader(open(path))) == [{"a": "6.51282", "b": "", "c": "false"}]


@pytest.mark.parametrize(("scores", "expected"), [
    ({"a": 0.8, "b": 0.5, "c": 0.5, "d": 0.1}, ["1", "=2", "=2", "4"]),
    ({"a": 0.8, "b": 0.8}, ["=1", "=1"]),
    ({"a": 0.9, "b": 0.5, "c": 0.1}, ["1", "2", "3"]),
    ({"a": 1.0, "b": 1.0, "c": 1.0}, ["=1", "=1", "=1"]),
])
def test_ties_are_ties_in_rankings(scores, expected):
    order = sorted(scores, key=lambda e: (-scores[e], e))
    assert [rank for rank, _ in tied_ranks(scores, order)] == expected


def test_ranking_text_marks_ties():
    # means of the same rates summed in another order differ in the last bit: still a tie
    scores = {"x": 0.1 + 0.2, "y": 0.3, "z": 0.05}
    assert fmt.ranking(scores, ["x", "y", "z"]) == "=1. x (30.0%) · =1. y (30.0%) · 3. z (5.0%)"
