"""The coverage-vs-recall scatter draws at most SCATTER_POINTS points an arm (each is SVG inside index.html)
and its title says how many conversations the arm has and that a random sample of them is drawn."""

from __future__ import annotations

import pandas as pd

from intake_eval.report import diagnosis_section


def _arm(n: int, clinician: str) -> pd.DataFrame:
    return pd.DataFrame({"clinician": [clinician] * n, "condition": ["minimal"] * n, "patient_mode": ["prompted"] * n,
                         "active_coverage_rate": [(i % 10) / 10 for i in range(n)],
                         "comorbidity_recall": [(i % 7) / 7 for i in range(n)]})


def test_a_large_arm_is_sampled_and_says_so(monkeypatch):
    monkeypatch.setattr(diagnosis_section, "SCATTER_POINTS", 40)
    svg = diagnosis_section.scatter_svg(pd.concat([_arm(100, "big"), _arm(30, "small")], ignore_index=True))
    assert "big · minimal · prompted (n=100; 40 drawn at random)" in svg
    assert "small · minimal · prompted (n=30)" in svg
    assert svg == diagnosis_section.scatter_svg(pd.concat([_arm(100, "big"), _arm(30, "small")], ignore_index=True))
