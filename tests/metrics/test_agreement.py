"""Cohen's κ against scikit-learn's reference implementation, and label pairing between judges."""

from __future__ import annotations

import math
import random
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from intake_eval.metrics.agreement import (
    PairedLabels,
    agreement_rows,
    cohen_kappa,
    judgment_units,
    raw_agreement,
)
from tests.helpers.judgment_builders import HIDDEN, judgment


def _sklearn(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = cohen_kappa_score(a, b)
    return None if math.isnan(value) else float(value)


@pytest.mark.parametrize("seed", range(20))
def test_kappa_matches_sklearn_on_generated_binary_and_multiclass_labels(seed):
    rng = random.Random(seed)
    labels = [True, False] if seed % 2 else ["closed_hypothesis", "open", "clarifying", "treatment_planning", "other"]
    n = rng.randint(5, 300)
    a = [rng.choice(labels) for _ in range(n)]
    # Judge b agrees most of the time so κ spans a realistic range.
    b = [x if rng.random() < rng.uniform(0.3, 0.95) else rng.choice(labels) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(_sklearn(a, b), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc")), min_size=1, max_size=60))
def test_kappa_matches_sklearn_on_arbitrary_pairs(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    ours, reference = cohen_kappa(a, b), _sklearn(a, b)
    assert (ours is None and reference is None) or ours == pytest.approx(reference, abs=1e-12)


@pytest.mark.parametrize("a,b", [
    ([True] * 10, [True] * 10),  # both constant, same label: κ undefined (sklearn: nan)
    ([False] * 7, [True] * 7),  # both constant, different labels: κ = 0
    ([True] * 9 + [False], [True] * 10),  # one constant: κ = 0
    ([True, False] * 5, [True, False] * 5),  # perfect: κ = 1
    ([True, False] * 5, [False, True] * 5),  # perfect disagreement: κ = -1
    (["x"], ["x"]),
])
def test_degenerate_cases_match_sklearn(a, b):
    ours, reference = cohen_kappa(a, b), _sklearn(a, b)
    assert (ours is None and reference is None) or ours == pytest.approx(reference)


def test_empty_and_mismatched():
    assert cohen_kappa([], []) is None and raw_agreement([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def test_pairs_two_judges_per_label_and_on_actively_covered():
    a = judgment([("other", {}), ("closed_hypothesis", {"insomnia": "AD"}), ("open", {"panic": "D"}, False)], judge="a")
    b = judgment([("other", {}), ("closed_hypothesis", {"insomnia": "A"}), ("open", {"panic": "D"}, False)], judge="b")
    pairs = PairedLabels.empty()
    pairs.add(judgment_units(a, HIDDEN), judgment_units(b, HIDDEN))
    rows = {row.label: row for row in agreement_rows(pairs)}
    assert rows["asked_about"].n == 3 * 4 and rows["asked_about"].raw_agreement == 1.0
    assert rows["disclosed"].raw_agreement == pytest.approx(11 / 12)  # insomnia on turn 1 differs
    assert rows["question_type"].n == 2  # clinician turns only
    assert rows["patient_faithful"].n == 3 and rows["patient_faithful"].kappa == pytest.approx(1.0)
    # actively covered: a caught insomnia, b did not → 3 of 4 domains agree.
    assert rows["actively_covered"].n == 4 and rows["actively_covered"].raw_agreement == 0.75
    assert rows["actively_covered"].kappa == pytest.approx(_sklearn([True, False, False, False], [False] * 4))
