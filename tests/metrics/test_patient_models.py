"""The headline pooled over patient models (stats.pooled_mean_ci, registry.arm_mean_ci), the per-patient
breakdown (metrics/patient_models.py) and the patient-model sensitivity (metrics/sensitivity.py), on
hand-worked cases."""

from __future__ import annotations

import pandas as pd
import pytest

from intake_eval.metrics.patient_models import patient_model_rows
from intake_eval.metrics.registry import arm_mean_ci
from intake_eval.metrics.sensitivity import patient_sensitivity
from intake_eval.metrics.stats import POOLED_PATIENT_BOOTSTRAP, bootstrap_mean_ci, mean_ci, pooled_mean_ci


def test_pooled_mean_weighs_each_patient_model_equally():
    # profile A: p1 1.0, p2 0.0 → 0.5; profile B: p1 two trials 0.5 and 0.5 → 0.5, p2 1.0 → 0.75
    groups = {"A": {"p1": [1.0], "p2": [0.0]}, "B": {"p1": [0.5, 0.5], "p2": [1.0]}}
    estimate = pooled_mean_ci(groups, seed="s")
    assert estimate.mean == pytest.approx(0.625)
    # balanced: the mean of the patient models' own means, (0.75 + 0.5) / 2
    assert estimate.mean == pytest.approx(((1.0 + 0.5) / 2 + (0.0 + 1.0) / 2) / 2)
    assert (estimate.n, estimate.n_groups, estimate.method) == (5, 2, POOLED_PATIENT_BOOTSTRAP)
    reference = bootstrap_mean_ci({"A": [0.5], "B": [0.75]}, seed="s")  # profiles resampled, pooled values
    assert (estimate.ci_low, estimate.ci_high) == (reference.ci_low, reference.ci_high)
    assert 0.5 <= estimate.ci_low <= estimate.ci_high <= 0.75


def test_pooled_mean_differs_from_the_per_conversation_mean_when_one_model_has_more_conversations():
    # p1 has two trials everywhere, p2 one: per conversation p1 would weigh twice as much
    groups = {f"P{i}": {"p1": [1.0, 1.0], "p2": [0.0]} for i in range(4)}
    assert pooled_mean_ci(groups, seed="s").mean == pytest.approx(0.5)
    flat = {profile: [v for values in by.values() for v in values] for profile, by in groups.items()}
    assert mean_ci(flat, seed="s").mean == pytest.approx(2 / 3)


def test_a_profile_without_one_patient_model_counts_the_models_it_has():
    groups = {"A": {"p1": [1.0], "p2": [0.0]}, "B": {"p1": [1.0], "p2": [None]}}
    estimate = pooled_mean_ci(groups, seed="s")
    assert estimate.mean == pytest.approx((0.5 + 1.0) / 2) and estimate.n == 3


def _rows(values: dict[tuple[str, str], list[float]]) -> list[dict]:
    rows = []
    for (clinician, patient), coverage in values.items():
        for index, value in enumerate(coverage):
            rows.append({"judge": "j", "clinician": clinician, "condition": "minimal", "patient_mode": "prompted",
                         "patient": patient, "profile_id": f"P{index}", "active_coverage_rate": value,
                         "bleed_rate": 0.0, "patient_leak_count": index % 2})
    return rows


def test_arm_estimate_pools_only_with_several_patient_models():
    one = _rows({("a", "p1"): [0.2, 0.4, 0.6]})
    assert arm_mean_ci(one, "active_coverage_rate", "s") == mean_ci({"P0": [0.2], "P1": [0.4], "P2": [0.6]}, seed="s")
    two = _rows({("a", "p1"): [0.2, 0.4, 0.6], ("a", "p2"): [0.0, 0.0, 0.0]})
    pooled = arm_mean_ci(two, "active_coverage_rate", "s")
    assert pooled.mean == pytest.approx(0.2) and pooled.method == POOLED_PATIENT_BOOTSTRAP and pooled.n == 6


def test_breakdown_has_one_row_per_arm_and_patient_model():
    assert patient_model_rows(_rows({("a", "p1"): [0.5, 0.5]})) == []
    rows = patient_model_rows(_rows({("a", "p1"): [0.2, 0.4, 0.6], ("a", "p2"): [0.0, 0.5, 1.0]}))
    assert [(r["patient"], r["mean_active_coverage"], r["n"], r["n_profiles"]) for r in rows] == [
        ("p1", pytest.approx(0.4), 3, 3), ("p2", pytest.approx(0.5), 3, 3)]
    assert all(r["mean_active_coverage_ci_low"] <= r["mean_active_coverage"] <= r["mean_active_coverage_ci_high"]
               for r in rows)
    assert rows[0]["mean_patient_leak_count"] == pytest.approx(1 / 3)


def test_patient_sensitivity_flags_an_ordering_that_depends_on_the_patient_model():
    values = {}
    for profile in range(12):
        wobble = (profile % 3) * 0.02
        values[("a", "p1")] = values.get(("a", "p1"), []) + [0.9 + wobble]
        values[("b", "p1")] = values.get(("b", "p1"), []) + [0.3 + wobble]
        values[("a", "p2")] = values.get(("a", "p2"), []) + [0.2 + wobble]
        values[("b", "p2")] = values.get(("b", "p2"), []) + [0.8 + wobble]
    frame = pd.DataFrame(_rows(values))
    views, found = patient_sensitivity(frame, "j", ["p1", "p2"], ["clinician"])
    assert [view.scorer for view in views] == ["p1", "p2"]
    assert views[0].ranking == ["a", "b"] and views[1].ranking == ["b", "a"]
    assert found[0].tau == pytest.approx(-1.0) and found[0].flips == ["a vs b"]
    assert found[0].verdict.startswith("depends on patient model: ordering flips for a vs b")
    same = pd.DataFrame(_rows({("a", "p1"): [0.9] * 6, ("b", "p1"): [0.1] * 6,
                               ("a", "p2"): [0.8] * 6, ("b", "p2"): [0.2] * 6}))
    assert patient_sensitivity(same, "j", ["p1", "p2"], ["clinician"])[1][0].verdict == "robust to patient model"
