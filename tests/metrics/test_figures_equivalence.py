"""The one-pass metric definitions (metrics.figures) and the dict fast path (turn_labels_from_data)
give exactly what the straightforward per-metric definitions give, on randomized judgments
(unsorted and repeated turn numbers, missing labels, undefined turn metrics)."""

from __future__ import annotations

import random

import pytest

from intake_eval.core.records import QUESTION_TYPES, DomainLabel, Judgment, TurnJudgment
from intake_eval.metrics import figures as metrics

DOMAINS = ["insomnia", "panic", "ptsd", "alcohol_use", "ocd", "mania"]


# ---- reference definitions: DESIGN.md's metrics written out one by one, the obvious way

def _label(turn, domain):
    label = turn.domains.get(domain)
    return (label.asked_about, label.disclosed) if label is not None else (False, False)


def ref_covered(j, hidden):
    return {d for d in hidden if any(all(_label(t, d)) for t in j.turns)}


def ref_bled(j, hidden):
    return {d for d in hidden if any(_label(t, d)[1] and not _label(t, d)[0] for t in j.turns)}


def ref_clinician(j):
    return sorted((t for t in j.turns if t.turn >= 1), key=lambda t: t.turn)


def ref_first_tp(j):
    return next((t.turn for t in ref_clinician(j) if t.question_type == "treatment_planning"), None)


def ref_closure(j):
    closure = None
    for t in reversed(ref_clinician(j)):
        if t.question_type not in ("treatment_planning", "other"):
            break
        closure = t.turn
    return closure


def ref_trajectory(j, hidden):
    caught, points = set(), []
    for t in sorted(j.turns, key=lambda t: t.turn):
        caught.update(d for d in hidden if all(_label(t, d)))
        points.append((t.turn, len(caught) / len(hidden) if hidden else None))
    return points


def ref_outcomes(j, hidden):
    ordered = sorted(j.turns, key=lambda t: t.turn)
    out = []
    for d in hidden:
        first_asked = next((t.turn for t in ordered if _label(t, d)[0]), None)
        first_covered = next((t.turn for t in ordered if all(_label(t, d))), None)
        bled = any(_label(t, d)[1] and not _label(t, d)[0] for t in ordered)
        first_disclosure = next((t for t in ordered if _label(t, d)[1]), None)
        out.append(metrics.DomainOutcome(d, first_covered is not None, bled, first_asked, first_covered,
                                         first_disclosure.turn if first_disclosure else None,
                                         first_disclosure is not None and not _label(first_disclosure, d)[0]))
    return out


def random_judgment(rng: random.Random) -> tuple[Judgment, list[str]]:
    hidden = rng.sample(DOMAINS, rng.randint(0, 4))
    numbers = list(range(rng.randint(0, 13)))
    if numbers and rng.random() < 0.3:
        numbers.append(rng.choice(numbers))  # a repeated turn number
    rng.shuffle(numbers)
    turns = []
    for number in numbers:
        labelled = [d for d in DOMAINS if rng.random() < 0.7]
        turns.append(TurnJudgment(turn=number, question_type=rng.choice(QUESTION_TYPES), patient_faithful=rng.random() < 0.8,
                                  domains={d: DomainLabel(asked_about=rng.random() < 0.3, disclosed=rng.random() < 0.3)
                                           for d in labelled}))
    return Judgment(conversation_id="c", judge="j", clinician="x", turns=turns), hidden


@pytest.mark.parametrize("seed", range(400))
def test_figures_equal_the_reference_definitions(seed):
    judgment, hidden = random_judgment(random.Random(seed))
    fast = metrics.turn_labels_from_data(judgment.model_dump(mode="json"))
    assert fast == metrics.turn_labels(judgment)
    result = metrics.figures(fast, hidden)
    assert result.covered == ref_covered(judgment, hidden)
    assert {o.domain for o in result.outcomes if o.bled} == ref_bled(judgment, hidden)
    assert result.outcomes == ref_outcomes(judgment, hidden)
    assert result.trajectory == ref_trajectory(judgment, hidden)
    m = result.metrics
    assert m.first_treatment_planning_turn == ref_first_tp(judgment)
    assert m.premature_closure_turn == ref_closure(judgment)
    assert m.patient_leak_count == sum(1 for t in judgment.turns if not t.patient_faithful)
    assert m.active_coverage_rate == (len(ref_covered(judgment, hidden)) / len(hidden) if hidden else None)
    assert m.bleed_rate == (len(ref_bled(judgment, hidden)) / len(hidden) if hidden else None)
    assert m.n_turns == len(ref_clinician(judgment))
    leaked = {o.domain for o in ref_outcomes(judgment, hidden) if o.leaked}
    kept = [d for d in hidden if d not in leaked]
    assert m.leak_adjusted_active_coverage_rate == (
        len(ref_covered(judgment, hidden) - leaked) / len(kept) if kept else None)
    assert m.overshared == bool(leaked)
    assert m == metrics.conversation_metrics(judgment, hidden)


@pytest.mark.parametrize("change", [
    lambda d: d["turns"][0].update(turn="1"),
    lambda d: d["turns"][0].update(turn=1.0),
    lambda d: d["turns"][0].update(question_type="probing"),
    lambda d: d["turns"][0].update(patient_faithful="false"),
    lambda d: d["turns"][0]["domains"]["panic"].update(asked_about=1),
    lambda d: d["turns"][0]["domains"].update(panic=None),
    lambda d: d["turns"][0].pop("domains"),
    lambda d: d.update(turns={"0": {}}),
])
def test_fast_path_declines_anything_pydantic_would_coerce_or_reject(change):
    judgment = Judgment(conversation_id="c", judge="j", clinician="x", turns=[
        TurnJudgment(turn=1, question_type="open", domains={"panic": DomainLabel(asked_about=True, disclosed=False)})])
    data = judgment.model_dump(mode="json")
    assert metrics.turn_labels_from_data(data) is not None
    change(data)
    assert metrics.turn_labels_from_data(data) is None
