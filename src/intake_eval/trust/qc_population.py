"""How the patient spoke in its QC probes: the population measures of its replies, and the study's gate on them.

The replies are the probes' (each profile's opening once, then one reply per probe; every reply is early:
a probe is the first question of its exchange), measured by metrics/patient_language.py against the
style's words-per-reply target. A study's ``qc:`` limits (``min_length_on_target``, ``max_early_resolution``,
``max_repeated_phrasing``, ``max_mattr``) refuse to start a study whose patient misses them.
"""

from __future__ import annotations

from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import PatientProbe
from intake_eval.metrics.patient_language import Reply, check_targets, population_row
from intake_eval.trust.qc_result import QCResult



def probe_population(records: list[PatientProbe], result: QCResult) -> dict[str, Any]:
    """The population measures over the probe replies, each profile's opening once (every reply is early:
    a probe is the first question of its exchange)."""
    replies: list[Reply] = []
    openings: set[str] = set()
    for record in records:
        if record.status != "ok":
            continue
        if record.opening and record.profile_id not in openings:
            openings.add(record.profile_id)
            replies.append(Reply(record.profile_id, record.opening, early=True))
        replies.append(Reply(record.profile_id, record.reply, early=True))
    key = {"patient": result.patient, "patient_model": result.patient_model, "patient_mode": result.mode,
           "patient_style": result.style}
    return population_row(key, replies, f"qc probes, judged by {result.judge}")


def population_gate(result: QCResult, limits: dict[str, tuple[float | None, float | None]]) -> None:
    """Refuse (IntakeEvalError) when the patient's probe replies miss a population limit the study set."""
    if not limits:
        return
    missed = check_targets({k: v for k, v in result.population.items() if k in limits}, limits)
    if missed:
        raise IntakeEvalError(f"patient {result.patient} ({result.mode}, {result.style}): how it speaks misses the "
                              f"study's qc: limits: {'; '.join(missed)} (see metrics/patient_qc_population.csv)")
