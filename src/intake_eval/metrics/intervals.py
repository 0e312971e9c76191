"""Which interval each figure states: one declaration, read by the report's page and summary.md (and
written to metrics/intervals.csv for a methods section), so a reader never meets two intervals for
one number without being told which is which.

Every mean over conversations uses ``stats.mean_ci``: the profile bootstrap, or with repeated trials
the nested profile → trial bootstrap. The run decides which (``repeated``: some profile has more
than one scored conversation of one arm), so the words here match the ``ci_method`` column of every
metrics CSV.
"""

from __future__ import annotations

from typing import Any

from intake_eval.metrics.masking_model import LIMITATION, METHOD as MASKING_METHOD
from intake_eval.metrics.stats import N_BOOTSTRAP, NESTED_BOOTSTRAP, POOLED_PATIENT_BOOTSTRAP, PROFILE_BOOTSTRAP

COLUMNS = ["figure", "interval"]


def mean_interval(repeated: bool) -> str:
    return NESTED_BOOTSTRAP if repeated else PROFILE_BOOTSTRAP


def declared_intervals(repeated: bool, *, pooled_patients: bool = False) -> dict[str, str]:
    """figure → the sentence that states its interval (figure keys are the report's section names).
    ``pooled_patients``: the run has several patient models, so the per-arm means (headline, matrix
    cells) are pooled over them (stats.pooled_mean_ci); the other figures keep ``mean_ci``, a profile's
    conversations with each patient model counted as its repeated values."""
    mean = mean_interval(repeated)
    arm_mean = POOLED_PATIENT_BOOTSTRAP if pooled_patients else mean
    paired = ("the nested paired bootstrap (profiles resampled, then each clinician's trials within every drawn "
              "profile)" if repeated else "the paired profile bootstrap")
    return {
        "headline": f"Active coverage (headline table and forest plot): 95% CI by {arm_mean}.",
        "comparisons": ("Paired comparisons (A − B on the profiles both clinicians were run on, per profile the "
                        f"difference of the trial means): 95% CI by {paired}; B={N_BOOTSTRAP}, 95% percentile. "
                        "p-values: Wilcoxon signed-rank and an exact or Monte-Carlo sign-flip permutation test on the "
                        "profile means; every test of the table is one family, Holm-adjusted (statsmodels "
                        "multipletests) shown under each p."),
        "masking": f"Masked vs aligned, per arm: 95% CI of each mean by {mean}.",
        "masking_model": f"Masked − aligned model: {MASKING_METHOD}. {LIMITATION}",
        "matrix": f"Coverage matrix cells: no interval drawn; metrics/cells.csv has each cell's 95% CI by {arm_mean}.",
        "domains": f"Per-domain rates: 95% CI by {mean} (the share of a profile's conversations surfacing the domain).",
        "trajectories": f"Trajectories: shaded 95% CI of the cumulative coverage after each turn by {mean}.",
        "trials": (f"Repeated trials: the same 95% CI as the headline ({mean}); the naive interval treating every "
                   "conversation as independent is shown for contrast only." if repeated else ""),
        "capacity_gap": (f"Capacity gap (forks with a supervisor's nudge): spontaneous and nudged coverage and their "
                         f"difference, 95% CI by {mean}."),
        "patient_models": ("Coverage per patient model: 95% CI over that patient model's own conversations by the "
                           f"profile bootstrap (nested, profiles then trials, with repeated trials; the ci_method column "
                           f"of metrics/patient_models.csv names which); the pooled headline by "
                           f"{POOLED_PATIENT_BOOTSTRAP}." if pooled_patients else ""),
        "calibrated": ("Calibrated coverage (human labels on a random sample): normal 95% intervals over conversations "
                       "for the judge-only, human-only and prediction-powered means."),
    }


# Figures shown only when the run has the metrics table of the same name.
CONDITIONAL_FIGURES = ("capacity_gap", "calibrated", "patient_models")


def interval_rows(repeated: bool, *, pooled_patients: bool = False) -> list[dict[str, Any]]:
    return [{"figure": figure, "interval": text}
            for figure, text in declared_intervals(repeated, pooled_patients=pooled_patients).items() if text]


def shown_intervals(declared: dict[str, str], present_tables: set[str]) -> dict[str, str]:
    """The declared intervals of the figures a report shows (a conditional figure needs its table)."""
    return {figure: text for figure, text in declared.items()
            if text and (figure not in CONDITIONAL_FIGURES or figure in present_tables)}
