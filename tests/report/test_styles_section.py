"""The patient behaviour styles section's sentences, from hand-made style_pairs rows."""

from __future__ import annotations

import pandas as pd

from intake_eval.report.styles_section import pair_rows, verdicts


def _pair(arm: str, metric: str, difference: float, low: float, high: float, change: str) -> dict:
    return {"arm": arm, "metric": metric, "style_a": "guarded", "style_b": "forthcoming", "n_profiles": 12,
            "difference": difference, "difference_ci_low": low, "difference_ci_high": high, "change": change}


def test_each_arm_says_whether_coverage_holds_up_and_names_what_else_moved():
    pairs = pd.DataFrame([
        _pair("a · minimal · prompted", "active_coverage_rate", -0.2, -0.3, -0.1, "drops"),
        _pair("a · minimal · prompted", "bleed_rate", 0.05, 0.01, 0.09, "rises"),
        _pair("a · minimal · prompted", "patient_leak_count", 0.0, -0.1, 0.1, "no detectable change"),
        _pair("b · minimal · prompted", "active_coverage_rate", 0.0, -0.05, 0.04, "no detectable change"),
    ])
    lines = verdicts(pairs)
    assert lines[0].startswith("a · minimal · prompted: coverage with guarded patients does not hold up: -20.0 pts")
    assert "on the same 12 profiles; also bleed rises +5.0 pts" in lines[0]
    assert "patient leaks" not in lines[0]  # no detectable change is not listed as a change
    assert lines[1].startswith("b · minimal · prompted: coverage with guarded patients holds up (no detectable drop)")
    assert lines[1].endswith("profiles.")
    rows = pair_rows(pairs)
    assert rows[0][:2] == ["a · minimal · prompted", "guarded − forthcoming"]
    assert rows[0][2].endswith("— drops") and rows[1][2].endswith("— no detectable change")
