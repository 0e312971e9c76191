"""Which interval each figure of the report carries, declared once: the methods section quotes these
sentences (report/index.html and summary.md), so the page, the Markdown and the statistics agree.

Keyed by figure; ``needs`` names the metrics table that must be present for the figure to be in the
report (None: always there). Whoever changes how a figure's interval is computed changes its sentence
here.
"""

from __future__ import annotations

from dataclasses import dataclass

from intake_eval.metrics.stats import EXACT_PERMUTATION_MAX_N, N_BOOTSTRAP, N_PERMUTATIONS
from intake_eval.metrics.trials import BOOTSTRAP_RESAMPLES

PROFILE_BOOTSTRAP = (f"95 % percentile bootstrap interval, {N_BOOTSTRAP:,} resamples of profiles with replacement "
                     "(a profile's conversations, every trial of it included, move together); "
                     "seeded, so a rerun gives the same interval")


@dataclass(frozen=True)
class FigureInterval:
    figure: str
    interval: str
    needs: str | None = None  # metrics table the figure needs; None when it is always shown


FIGURE_INTERVALS: tuple[FigureInterval, ...] = (
    FigureInterval("Headline table and forest plot: mean active coverage per clinician", PROFILE_BOOTSTRAP),
    FigureInterval("Coverage trajectory: mean cumulative active coverage after each turn (shaded band)",
                   PROFILE_BOOTSTRAP),
    FigureInterval("Masked vs aligned phenotypes: mean active coverage per alignment", PROFILE_BOOTSTRAP),
    FigureInterval("Coverage matrix and per-domain heatmap", "no interval: cell means with their conversation counts"),
    FigureInterval("Paired clinician comparisons",
                   "no interval on the difference; two-sided p-values over the profiles both clinicians ran: Wilcoxon "
                   f"signed-rank, and a paired sign-flip permutation test of the mean difference (exact up to "
                   f"{EXACT_PERMUTATION_MAX_N} pairs, else {N_PERMUTATIONS:,} Monte Carlo permutations); "
                   "not adjusted for multiple comparisons"),
    FigureInterval("Repeated trials: mean active coverage per clinician",
                   f"95 % percentile two-stage cluster bootstrap, {BOOTSTRAP_RESAMPLES:,} resamples: profiles with "
                   "replacement, then trials with replacement within each drawn profile (a naive interval over "
                   "conversations is shown beside it for contrast only)", needs="trials"),
    FigureInterval("Capacity gap (forks with a supervisor's nudge)",
                   f"95 % percentile bootstrap interval, {N_BOOTSTRAP:,} resamples of profiles", needs="capacity_gap"),
    FigureInterval("Calibrated coverage (human labels on a random sample)",
                   "normal 95 % intervals over conversations, for the judge-only, human-only and prediction-powered "
                   "(calibrated) means", needs="calibrated"),
)


def figure_intervals(present_tables: set[str]) -> list[FigureInterval]:
    """The declared intervals of the figures this report shows."""
    return [item for item in FIGURE_INTERVALS if item.needs is None or item.needs in present_tables]
