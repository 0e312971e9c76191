"""metrics/probe_curves.csv: time-to-event curves over clinician turns (Kaplan–Meier, scipy).

Two curves per (judge, clinician, condition, patient mode):
- ``not_yet_asked``: the share of hidden domains not yet asked about by turn t. A unit is one
  (conversation, hidden domain); its event is the first turn that asked about it; a domain never
  asked is censored at the conversation's last clinician turn. Pooled over domains (domain
  ``all``) and per domain.
- ``still_probing``: the share of conversations that have not yet closed by turn t. The event is
  the premature-closure turn; a conversation that never closes is censored at its last turn.

The estimator and its 95 % band (Greenwood variance, log-log transform, so the band stays in
[0, 1]) are ``scipy.stats.ecdf`` on ``CensoredData``; this module only counts and lays out.
Where the band is undefined (the curve has reached 0) the cells are empty.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
import warnings
from dataclasses import dataclass
from typing import Any


GROUP = ("judge", "clinician", "condition", "patient_mode")
ALL_DOMAINS = "all"
NOT_YET_ASKED = "not_yet_asked"
STILL_PROBING = "still_probing"
CONFIDENCE = 0.95
PROBE_CURVE_COLUMNS = (*GROUP, "curve", "domain", "turn", "n", "at_risk", "events", "censored",
                       "survival", "ci_low", "ci_high")


@dataclass(frozen=True)
class CurvePoint:
    turn: int
    at_risk: int
    events: int
    censored: int
    survival: float
    ci_low: float | None
    ci_high: float | None


def kaplan_meier(times: Sequence[int], observed: Sequence[bool], horizon: int) -> list[CurvePoint]:
    """The survival curve at turns 0..horizon: ``times[i]`` is unit i's event turn when
    ``observed[i]``, else the turn it was last seen (right-censored)."""
    import numpy as np
    from scipy import stats  # type: ignore[import-untyped]  # scipy ships no type stubs

    events = [t for t, seen in zip(times, observed) if seen]
    censored = [t for t, seen in zip(times, observed) if not seen]
    turns = np.arange(0, horizon + 1)
    if events:
        result = stats.ecdf(stats.CensoredData(uncensored=events, right=censored)).sf
        survival = result.evaluate(turns)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # undefined where the curve is 0: left empty
            band = result.confidence_interval(CONFIDENCE, method="log-log")
            low, high = band.low.evaluate(turns), band.high.evaluate(turns)
    else:  # nothing happened to anyone: the curve stays at 1 and has no variance
        survival, low, high = np.ones(len(turns)), np.ones(len(turns)), np.ones(len(turns))
    # units per turn, counted once (not once per turn of the curve)
    ending, happened, lost = Counter(times), Counter(events), Counter(censored)
    at_risk = len(times) - sum(count for turn, count in ending.items() if turn < 0)
    points = []
    for index, turn in enumerate(turns.tolist()):
        points.append(CurvePoint(
            turn=turn, at_risk=at_risk, events=happened[turn], censored=lost[turn],
            survival=float(survival[index]), ci_low=_defined(low[index]), ci_high=_defined(high[index]),
        ))
        at_risk -= ending[turn]  # a unit ending at this turn is not at risk after it
    return points


def _defined(value: float) -> float | None:
    return None if math.isnan(value) else float(value)  # NaN → empty cell


Units = dict[tuple, list[tuple[int, bool]]]  # (judge, clinician, condition, patient mode, domain) → (turn, event seen)


def curve_rows(asked: Units, probing: Units) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of the two curves from their units: per group and domain (``all`` first), (time, observed)
    where time is the event turn, or the last clinician turn when censored."""
    out: dict[str, list[dict[str, Any]]] = {NOT_YET_ASKED: [], STILL_PROBING: []}
    for curve, units_by_key in ((NOT_YET_ASKED, asked), (STILL_PROBING, probing)):
        for key in sorted(units_by_key, key=lambda k: (k[:-1], k[-1] != ALL_DOMAINS, k[-1])):
            units = units_by_key[key]
            times = [t for t, _ in units]
            for point in kaplan_meier(times, [seen for _, seen in units], max(times)):
                out[curve].append({**dict(zip(GROUP, key[:-1])), "curve": curve, "domain": key[-1], "n": len(units),
                                   **point.__dict__})
    return out[NOT_YET_ASKED], out[STILL_PROBING]
