"""The offline classifier against the instrument-derived probe corpus (tests/data/classifier_probes.tsv):
per-domain recall on the tuning and held-out parts (printed; `pytest -s` shows the table), recall
on the held-out part, specificity on open invitations, empathy, summaries and advice, and the
corpus's own size and coverage."""

from __future__ import annotations

import pytest

from intake_eval.catalog.classifier import classify, domain_ids
from intake_eval.catalog.load import load_catalog
from tests.helpers.classifier_probes import load_probes, recall_table, score

# Held-out recall must reach 0.95. The held-out aggregate (never its items) was read once after each of four
# tuning stages: 0.915, 0.931, 0.947, 0.963 (181 of 188). Because it was read more than once, the corpus also
# records a less optimistic estimate: each fresh round's first score, taken before any tuning on that round
# (the header of classifier_probes.tsv gives 0.916 for rounds 15-17 and 0.903 for rounds 18-19).
HELD_OUT_RECALL_TARGET = 0.95
PROBES = load_probes()
QUALIFYING = [probe for probe in PROBES if probe.kind == "qualifying"]
NON_QUALIFYING = [probe for probe in PROBES if probe.kind == "non_qualifying"]


def domains_of(text: str) -> list[str]:
    return classify(text).domains


@pytest.fixture(scope="module")
def scores():
    tuning = score([p for p in PROBES if p.part == "tuning"], domains_of, domain_ids())
    held_out = score([p for p in PROBES if p.part == "held_out"], domains_of, domain_ids())
    print("\n" + recall_table(tuning, held_out))
    return tuning, held_out


def test_corpus_is_large_covers_every_catalog_domain_and_many_instruments():
    assert len(QUALIFYING) >= 300
    assert len(NON_QUALIFYING) >= 60
    assert set().union(*(probe.expected for probe in QUALIFYING)) == set(load_catalog().domains)
    assert len({probe.instrument for probe in QUALIFYING}) >= 15
    assert all(probe.expected for probe in QUALIFYING)
    assert not any(probe.expected for probe in NON_QUALIFYING)
    assert len({probe.id for probe in PROBES}) == len(PROBES)


def test_the_first_written_corpus_is_split_about_sixty_forty_and_later_rounds_only_tune():
    first = [probe for probe in PROBES if probe.round == 1]
    held_out = [probe for probe in first if probe.part == "held_out"]
    assert 0.3 <= len(held_out) / len(first) <= 0.5
    assert all(probe.part == "tuning" for probe in PROBES if probe.round > 1)
    # every domain is measured on unseen items
    assert set().union(*(p.expected for p in held_out if p.kind == "qualifying")) == set(domain_ids())


def test_held_out_recall(scores):
    # Plain numbers only: a failure message must not print held-out items (nobody tunes on them).
    recall, missed, total = scores[1].overall.rate, scores[1].overall.items - scores[1].overall.found, scores[1].overall.items
    print(f"held-out recall {recall:.3f} (target {HELD_OUT_RECALL_TARGET})")
    assert recall >= HELD_OUT_RECALL_TARGET, f"held-out recall {recall:.3f}: {missed} of {total} expected domains missed"


def test_open_invitations_empathy_summaries_and_advice_unlock_nothing(scores):
    tuning, held_out = scores
    tuning_false_alarms = [(probe.id, probe.text, got) for probe, got in tuning.false_alarms]
    assert tuning_false_alarms == []
    held_out_false_alarms = len(held_out.false_alarms)  # a count only, for the same reason
    assert held_out_false_alarms == 0
