"""Rankings, flips, changed conclusions and verdicts between scorers (metrics/sensitivity.py)."""

from __future__ import annotations

import math

import pandas as pd  # type: ignore[import-untyped]  # pandas ships no type information
import pytest

from intake_eval.metrics.sensitivity import ScorerView, compare_views, judge_sensitivity


def test_verdict_names_changed_conclusions_without_flips():
    a, b = "judge one", "judge two"
    reference = ScorerView(a, {"x": 0.8, "y": 0.5}, {("x", "y"): "x > y"}, ["x", "y"])
    view = ScorerView(b, {"x": 0.7, "y": 0.6}, {("x", "y"): "no difference"}, ["x", "y"])
    found = compare_views(reference, view, "judge choice")
    assert found.flips == [] and found.tau == pytest.approx(1.0)
    assert found.verdict == "depends on judge: test conclusion changes for x vs y: x > y → no difference"
    same = compare_views(reference, ScorerView(b, {"x": 0.9, "y": 0.1}, {("x", "y"): "x > y"}), "judge choice")
    assert same.verdict == "robust to judge choice"


def test_judge_sensitivity_over_conversation_rows():
    rows = []
    for profile in range(12):
        for clinician, strong in (("a", 0.9), ("b", 0.3)):
            rows.append({"judge": "primary", "clinician": clinician, "profile_id": f"P{profile}", "condition": "minimal",
                         "patient_mode": "tracked", "active_coverage_rate": strong + (profile % 3) * 0.02})
            rows.append({"judge": "lenient", "clinician": clinician, "profile_id": f"P{profile}", "condition": "minimal",
                         "patient_mode": "tracked", "active_coverage_rate": 0.95})
    views, found = judge_sensitivity(pd.DataFrame(rows), ["primary", "lenient"], ["clinician"])
    assert [v.scorer for v in views] == ["primary", "lenient"]
    assert views[0].ranking == ["a", "b"] and views[0].tests[("a", "b")] == "a > b"
    assert views[1].tests[("a", "b")] == "no difference"
    assert found[0].flips == ["a vs b"]  # a tie against a strict order counts as a flip
    assert found[0].verdict.startswith("depends on judge: ordering flips for a vs b; test conclusion changes")
    assert judge_sensitivity(pd.DataFrame(rows), ["primary"], ["clinician"]) == ([], [])


def test_arms_pair_across_runs_that_differ_in_condition_forks_included():
    from intake_eval.compare.runs import LoadedRun, assign_entities

    def run(name: str, conditions: list[str]) -> LoadedRun:
        frame = pd.DataFrame([{"clinician": c, "condition": cond, "patient_mode": "tracked"}
                              for c in ("x", "y") for cond in conditions])
        return LoadedRun(name, None, {}, ["judge"], frame)  # type: ignore[arg-type]  # entities need no run

    first, second = run("a", ["minimal", "minimal+review@closure"]), run("b", ["screening", "screening+review@closure"])
    assert assign_entities([first, second]) == ["entity"]
    assert list(first.frame["entity"]) == list(second.frame["entity"]) == ["x", "x +review@closure", "y", "y +review@closure"]
    same_a, same_b = run("a", ["minimal", "screening"]), run("b", ["minimal", "screening"])
    assign_entities([same_a, same_b])  # the runs share their conditions: they stay in the entity
    assert list(same_a.frame["entity"]) == ["x · minimal", "x · screening", "y · minimal", "y · screening"]


def test_kendall_tau_is_scipys_float_ties_included():
    import random

    from scipy.stats import kendalltau  # type: ignore[import-untyped]  # scipy ships no type stubs

    from intake_eval.metrics.sensitivity import kendall_tau

    rng = random.Random(7)
    for _ in range(300):
        entities = [f"e{i}" for i in range(rng.randint(2, 7))]
        reference = {e: rng.choice([0.1, 0.2, 0.3, rng.random()]) for e in entities}
        other = {e: rng.choice([0.1, 0.2, rng.random()]) for e in entities}
        expected = kendalltau([reference[e] for e in entities], [other[e] for e in entities]).statistic
        assert kendall_tau(reference, other) == (None if math.isnan(expected) else float(expected))
    assert kendall_tau({"a": 0.5, "b": 0.5}, {"a": 0.1, "b": 0.2}) is None  # one side all ties: undefined
    assert kendall_tau({"a": 0.5}, {"a": 0.1}) is None


def test_profile_means_are_the_dict_values_to_the_bit():
    import random

    from intake_eval.metrics.sensitivity import (
        entity_profile_means,
        entity_profile_values,
    )

    rng = random.Random(3)
    rows = [{"judge": rng.choice(["j", "k"]), "clinician": rng.choice(["b", "a", "c"]),
             "profile_id": f"P{rng.randint(0, 40)}", "active_coverage_rate": rng.choice([None, rng.random(), 1 / 3])}
            for _ in range(900)]
    frame = pd.DataFrame(rows)
    expected = entity_profile_values(frame, "j", "active_coverage_rate", ["clinician"])
    found = entity_profile_means(frame, "j", "active_coverage_rate", ["clinician"])
    assert list(found) == list(expected)
    for entity, by_profile in expected.items():
        codes = sorted({p for p in frame["profile_id"][(frame["judge"] == "j") & frame["active_coverage_rate"].notna()]})
        assert {codes[code]: mean for code, mean in found[entity].as_dict().items()} == by_profile
        assert list(found[entity].as_dict()) == sorted(found[entity].as_dict())  # codes ascend as the ids sort
        assert found[entity].total() == sum(by_profile.values())


def test_categorical_columns_give_the_same_views_as_text():
    import random

    from intake_eval.metrics.sensitivity import judge_sensitivity

    rng = random.Random(5)
    rows = [{"judge": judge, "clinician": clinician, "profile_id": f"P{profile}",
             "active_coverage_rate": rng.choice([0.0, 0.25, 0.5, 0.75, 1.0])}
            for judge in ("j", "k") for clinician in ("zeta", "alpha", "mid") for profile in range(30)]
    text = pd.DataFrame(rows)
    coded = text.copy()
    for column in ("judge", "clinician", "profile_id"):  # unsorted categories, one of them unused
        values = sorted(set(text[column]), reverse=True) + ["unused"]
        coded[column] = pd.Categorical(text[column], categories=values)
    assert judge_sensitivity(coded, ["j", "k"], ["clinician"], seed="s") == \
        judge_sensitivity(text, ["j", "k"], ["clinician"], seed="s")
