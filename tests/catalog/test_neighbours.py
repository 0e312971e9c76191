"""The classifier's nearest-example fallback: the shipped examples are the probe corpus's tuning part
and nothing of its held-out part; questions the lexicon misses take the nearest example's domains;
open invitations, advice and statements never gain a domain from it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy
from typer.testing import CliRunner

from intake_eval.catalog.classifier import classify, example_document, normalize
from intake_eval.catalog.neighbours import (
    CHAR_NGRAMS,
    EXAMPLES_PATH,
    Example,
    NeighbourIndex,
    decide,
    WORD_NGRAMS,
    load_examples,
)
from intake_eval.cli import app
from tests.helpers.classifier_probes import load_probes, shippable_examples

PROBES = load_probes()


def test_shipped_examples_are_the_tuning_part_and_hold_no_held_out_text():
    shipped = load_examples()
    tuning = {probe.id: probe for probe in PROBES if probe.part == "tuning"}
    # regenerate with scripts/export_classifier_examples.py after editing the corpus
    assert {example.id for example in shipped} == {probe.id for probe in shippable_examples(PROBES)}
    assert len(shipped) >= 0.99 * len(tuning)
    assert all(example.text == tuning[example.id].text and example.domains == tuning[example.id].expected
               for example in shipped)
    held_out = [probe for probe in PROBES if probe.part == "held_out"]
    assert held_out
    shipped_text = normalize(EXAMPLES_PATH.read_text(encoding="utf-8"))
    ids = {example.id for example in shipped}
    leaked = sum(normalize(probe.text) in shipped_text or probe.id in ids for probe in held_out)
    assert leaked == 0, f"{leaked} held-out items are in {EXAMPLES_PATH.name}"  # a count only: nobody reads them


def test_a_question_the_lexicon_misses_takes_the_nearest_examples_domains():
    found = classify("Do you get the shakes in the morning?")
    assert found.domains == ["alcohol_use"] and found.question_type == "closed_hypothesis"
    assert found.nearest is not None and "alcohol_use" in found.nearest.domains
    assert found.matches["alcohol_use"] == [found.nearest.explain()]
    assert found.nearest.explain().startswith("nearest example: '") and "(similarity 0." in found.nearest.explain()
    # a domain the patient already talked about makes it a clarifying question, as with the lexicon
    assert classify("Do you get the shakes in the morning?", disclosed=["alcohol_use"]).question_type == "clarifying"


def test_classify_command_shows_the_nearest_example():
    result = CliRunner().invoke(app, ["classify", "Has your baby been on your mind in ways that scare you?"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["domains"] == ["intrusive_harm_thoughts"]
    assert shown["nearest"].startswith("nearest example: '") and shown["nearest"].endswith(")")


def test_open_invitations_advice_and_statements_gain_nothing_from_the_fallback():
    for text in ["What brings you in today?", "Is there anything else you'd like to tell me?",
                 "How do you spend your weekends?", "How has this been affecting your work and your relationships?"]:
        assert classify(text).domains == [], text
    # advice and plain statements never consult it
    assert classify("I'd suggest keeping a diary of how you feel each morning.").nearest is None
    assert classify("That sounds really hard.").nearest is None


def test_the_nearest_example_decides_and_neighbours_must_agree():
    examples = [Example("a", "a", frozenset({"panic"})), Example("b", "b", frozenset({"panic", "ptsd"})),
                Example("c", "c", frozenset()), Example("d", "d", frozenset({"ptsd"}))]
    # the nearest is qualifying: its domains that half the neighbours' similarity backs
    assert decide(numpy.array([0.9, 0.8, 0.1, 0.7]), examples, 3, 0.5).domains == ("panic",)
    assert decide(numpy.array([0.9, 0.8, 0.1, 0.7]), examples, 1, 0.5).domains == ("panic",)
    assert decide(numpy.array([0.5, 0.9, 0.1, 0.8]), examples, 3, 0.5).domains == ("panic", "ptsd")
    # the nearest is a line that must unlock nothing, or nothing is close enough
    assert decide(numpy.array([0.8, 0.7, 0.9, 0.1]), examples, 3, 0.5).domains == ()
    assert decide(numpy.array([0.4, 0.3, 0.2, 0.1]), examples, 3, 0.5) is None


def test_an_index_over_a_few_examples_finds_the_closest_wording():
    examples = [Example("1", "Do you have panic attacks?", frozenset({"panic"})),
                Example("2", "How many drinks do you have in a week?", frozenset({"alcohol_use"})),
                Example("3", "What brings you in today?", frozenset())]
    index = NeighbourIndex(examples, example_document)
    nearest = index.nearest(example_document("How many drinks a week do you usually have?"), neighbours=1,
                            min_similarity=0.3)
    assert nearest is not None and nearest.domains == ("alcohol_use",) and nearest.text == examples[1].text
    assert index.nearest(example_document("What brought you in today?"), neighbours=1, min_similarity=0.3).domains == ()


def test_importing_the_classifier_does_not_load_scikit_learn():
    code = "import sys, intake_eval.catalog.classifier; print('sklearn' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


def test_query_weighting_matches_scikit_learns_own_transform():
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    examples = load_examples()[:300]
    documents = [example_document(example.text) for example in examples]
    index = NeighbourIndex(examples, example_document)
    vectorizers = [TfidfVectorizer(ngram_range=WORD_NGRAMS, sublinear_tf=True, lowercase=False),
                   TfidfVectorizer(analyzer="char_wb", ngram_range=CHAR_NGRAMS, sublinear_tf=True, lowercase=False)]
    matrix = normalize(hstack([vectorizer.fit_transform(documents) for vectorizer in vectorizers]).tocsr())
    for text in ["do you get the shakes in the morning?", "have you been feeling low or hopeless lately?", "zzz qqq"]:
        query = normalize(hstack([vectorizer.transform([text]) for vectorizer in vectorizers]).tocsr())
        expected = (matrix @ query.T).toarray().ravel()
        assert numpy.allclose(index.similarities(text), expected, atol=1e-12), text
