"""Does a conclusion survive a change of judge or run? Every scorer (run × judge) against the
reference (the first run's primary judge), over the entities every scorer scored; the views,
τ, flips and verdicts are metrics/sensitivity.py's."""

from __future__ import annotations

from intake_eval.compare.runs import LoadedRun, Scorer, profile_values, what_differs
from intake_eval.metrics.sensitivity import (
    RANK_METRIC,
    ScorerView,
    Sensitivity,
    compare_views,
    scorer_view,
)


def sensitivity(runs: list[LoadedRun], columns: list[str]) -> tuple[list[ScorerView], list[Sensitivity], list[str]]:
    """(a view per scorer, each scorer against the reference, the entities every scorer scored)."""
    by_name = {loaded.name: loaded for loaded in runs}
    scored = {}
    for loaded in runs:
        for judge in loaded.judges:
            values = profile_values(loaded, judge, RANK_METRIC, columns)
            scored[Scorer(loaded.name, judge, judge == loaded.judges[0])] = values
    common = sorted(set.intersection(*(set(v) for v in scored.values()))) if scored else []
    views = [scorer_view(s, scored[s], common, s.label) for s in scored]
    if not views:
        return [], [], common
    reference, out = views[0], []
    for view in views[1:]:
        if view.scorer.run == reference.scorer.run:
            dimension = "judge choice"
        else:
            dimension = what_differs(by_name[reference.scorer.run], by_name[view.scorer.run])
            if view.scorer.judge != reference.scorer.judge and "judge" not in dimension:
                dimension += f"; judge {reference.scorer.judge} → {view.scorer.judge}"
        out.append(compare_views(reference, view, dimension))
    return views, out, common
