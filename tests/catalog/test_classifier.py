"""The offline domain classifier: labelled utterances (precision/recall), negatives, question
types, the pattern index, the catalog, and the `classify` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from intake_eval.catalog.classifier import (
    classify,
    domain_ids,
    load_lexicon,
    sentence_domains,
    split_sentences,
)
from intake_eval.cli import app

DATA = Path(__file__).resolve().parents[1] / "data"


def load_cases(name: str) -> list[tuple[str, set[str], str]]:
    cases = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        question_type, domains, text = line.split("\t")
        cases.append((question_type, set() if domains == "-" else set(domains.split(",")), text))
    return cases


LABELLED = load_cases("classifier_labelled.tsv")
HELD_OUT = load_cases("classifier_heldout.tsv")


def evaluate(cases):
    """Micro precision/recall of domain detection and question-type accuracy."""
    tp = fp = fn = correct_type = 0
    for question_type, gold, text in cases:
        # Follow-up questions are asked after the patient spoke about their presenting concern.
        found = classify(text, disclosed=["depression"] if question_type == "clarifying" else [])
        got = set(found.domains)
        tp, fp, fn = tp + len(gold & got), fp + len(got - gold), fn + len(gold - got)
        correct_type += found.question_type == question_type
    return tp / (tp + fp), tp / (tp + fn), correct_type / len(cases)


def test_labelled_set_is_large_and_covers_every_domain():
    assert len(LABELLED) >= 150
    covered = set().union(*(gold for _, gold, _ in LABELLED))
    assert covered == set(domain_ids())


@pytest.mark.parametrize("cases", [LABELLED, HELD_OUT], ids=["labelled", "held_out"])
def test_precision_recall_and_question_type(cases):
    precision, recall, type_accuracy = evaluate(cases)
    assert precision >= 0.95
    assert recall >= 0.90
    assert type_accuracy >= 0.90


@pytest.mark.parametrize(
    "text",
    [text for question_type, _, text in LABELLED + HELD_OUT if question_type in ("open", "other", "treatment_planning")],
)
def test_open_invitations_empathy_logistics_and_advice_never_ask_a_domain(text):
    assert classify(text).domains == []


@pytest.mark.parametrize(
    ("text", "domains"),
    [
        ("how's your sleep?", ["insomnia"]),
        ("do you drink?", ["alcohol_use"]),
        ("any thoughts of ending your life?", ["suicidality"]),
        ("times you felt so wired you didn't need sleep?", ["hypomania", "mania"]),
        ("do you ever make yourself sick because you feel uncomfortably full?", ["purging"]),
        ("trouble keeping your attention on tasks?", ["adhd"]),
        # the more specific phrase wins over a word it contains
        ("Have you wished you could go to sleep and not wake up?", ["suicidality"]),
        ("Do you feel anxious in social situations?", ["social_anxiety"]),
        ("Have you taken your pain medication more often than prescribed?", ["opioid_misuse"]),
    ],
)
def test_everyday_screening_paraphrases(text, domains):
    found = classify(text)
    assert found.domains == domains
    assert found.question_type == "closed_hypothesis"


def test_question_types_of_the_study_examples():
    assert classify("That sounds hard.").question_type == "other"
    feel = classify("How does that make you feel?")
    assert (feel.question_type, feel.domains) == ("open", [])
    assert classify("Tell me more").question_type == "open"
    assert classify("Anything else?").question_type == "open"


def test_advice_mentioning_a_domain_is_treatment_planning_and_not_asking():
    found = classify("Try to get more sleep.")
    assert (found.question_type, found.domains, found.mentioned) == ("treatment_planning", [], ["insomnia"])
    assert classify("Have you considered therapy?").question_type == "treatment_planning"
    # A CAGE screening question is a question, not advice, although it says "you should cut down".
    cage = classify("Have you ever felt you should cut down on your drinking?")
    assert (cage.question_type, cage.domains) == ("closed_hypothesis", ["alcohol_use"])


def test_a_probe_inside_an_advice_turn_still_counts():
    found = classify("I'd suggest keeping a sleep diary. Also, have you been drinking more lately?")
    assert (found.question_type, found.domains) == ("closed_hypothesis", ["alcohol_use"])


def test_disclosed_domains_make_a_question_clarifying():
    assert classify("How has your drinking been this week?", disclosed=["alcohol_use"]).question_type == "clarifying"
    new = classify("How has your drinking been, and your sleep?", disclosed=["alcohol_use"])
    assert (new.question_type, new.domains) == ("closed_hypothesis", ["alcohol_use", "insomnia"])


def test_empathy_before_a_probe_and_a_described_experience_with_anything_like_that():
    assert classify("That sounds really hard — how has your sleep been?").domains == ["insomnia"]
    described = classify("Some people get sudden unwanted thoughts of harming their baby. Has anything like that happened to you?")
    assert described.domains == ["intrusive_harm_thoughts"]
    # a reflection followed by an open question does not ask about what was reflected
    assert classify("It sounds like the drinking has been hard. How does that make you feel?").domains == []


@pytest.mark.parametrize(
    ("text", "domains"),
    [
        # a question right after a quote of the patient follows up on what was quoted
        ("You said you raid the fridge late at night — does it feel like you can't stop once you start?", ["binge_eating"]),
        ("You mentioned your knees ache. Has that gone on for more than three months?", ["chronic_pain"]),
        ("Some people cope by hurting themselves. Is that something you've done?", ["self_harm", "suicidality"]),
        # ... unless it asks how the patient feels about it, or checks a summary
        ("You said you've been drinking more to cope — how does that make you feel?", []),
        ("You told me the panic started after the accident. Is that right?", []),
        ("You described the binges. What does that mean to you?", []),
    ],
)
def test_follow_ups_on_what_the_patient_said(text, domains):
    assert classify(text).domains == domains


def test_a_summary_is_not_a_question_and_wishing_is_not_advice():
    summary = classify("What I'm hearing is that the binges leave you feeling ashamed.")
    assert (summary.question_type, summary.domains, summary.mentioned) == ("other", [], ["binge_eating"])
    wish = classify("Have you wished you could cut off the fleshy parts of your body?")
    assert (wish.question_type, wish.domains) == ("closed_hypothesis", ["body_image"])


def test_result_carries_scores_and_matched_phrases():
    found = classify("Do you have nightmares or bad dreams?")
    assert found.matches == {"nightmares": ["nightmares", "bad dreams"]}
    assert found.scores == {"nightmares": 2.0}
    assert set(found.to_dict()) == {"question_type", "domains", "scores", "matches", "mentioned"}


def test_lexicon_domains_equal_the_catalog_domains():
    from intake_eval.catalog.load import load_catalog

    assert domain_ids() == sorted(load_catalog().domains)


def test_catalog_probe_questions_are_recognised():
    """Standalone probe questions (a few are follow-ups such as "How often does that happen?",
    which name no domain on their own) must classify to their domain."""
    from intake_eval.catalog.load import load_catalog

    probes = [(domain.id, q) for domain in load_catalog().domains.values() for q in domain.probe_questions]
    hits = sum(domain in classify(question).domains for domain, question in probes)
    assert hits / len(probes) >= 0.9
    first_probes = [(domain.id, domain.probe_questions[0]) for domain in load_catalog().domains.values()]
    assert all(domain in classify(question).domains for domain, question in first_probes)


def test_indexed_matching_equals_trying_every_pattern_on_the_labelled_set_and_probe_corpus():
    from tests.helpers.classifier_probes import load_probes

    lexicon = load_lexicon()
    for text in [text for _, _, text in LABELLED + HELD_OUT] + [probe.text for probe in load_probes()]:
        for sentence in split_sentences(text):
            assert sentence_domains(sentence, lexicon) == sentence_domains(sentence, lexicon, exhaustive=True)


WORDS = ["do", "you", "feel", "sleep", "drink", "panic", "attacks", "worry", "your", "body", "voices", "hear",
         "pain", "memory", "thoughts", "of", "ending", "life", "hurt", "yourself", "didnt", "need", "the", "event",
         "eating", "make", "sick", "weed", "crowds", "anxious", "social", "situations", "wired", "energy", "-", ","]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=14))
def test_indexed_matching_equals_trying_every_pattern_on_random_word_salad(words):
    sentence = " ".join(words)
    lexicon = load_lexicon()
    assert sentence_domains(sentence, lexicon) == sentence_domains(sentence, lexicon, exhaustive=True)


# ---------------------------------------------------------------- the command

def test_classify_command_prints_json():
    result = CliRunner().invoke(app, ["classify", "How have you been sleeping?"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["question_type"] == "closed_hypothesis"
    assert payload["domains"] == ["insomnia"]
    assert payload["matches"]["insomnia"] == ["sleeping"]


def test_classify_command_disclosed_is_repeatable():
    result = CliRunner().invoke(
        app, ["classify", "How is your sleep and your mood?", "--disclosed", "insomnia", "--disclosed", "depression"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["question_type"] == "clarifying"


def test_classify_command_file_mode(tmp_path):
    utterances = tmp_path / "turns.txt"
    utterances.write_text("Do you drink?\n\nTell me more.\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["classify", "--file", str(utterances)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(row["text"], row["domains"]) for row in rows] == [("Do you drink?", ["alcohol_use"]), ("Tell me more.", [])]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["classify", "Any nightmares?", "--disclosed", "sleepiness"], "error: --disclosed: unknown domain 'sleepiness'"),
        (["classify"], "error: give either TEXT or --file FILE"),
        (["classify", "   "], "error: TEXT is empty"),
        (["classify", "--file", "/nonexistent/turns.txt"], "error: --file /nonexistent/turns.txt: cannot read"),
    ],
)
def test_classify_command_bad_input_is_one_line_exit_2(args, message):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message)
    assert "Traceback" not in result.output + result.stderr


def test_classify_help_explains_itself():
    result = CliRunner().invoke(app, ["classify", "--help"])
    assert result.exit_code == 0
    assert "question_type" in result.stdout and "--disclosed" in result.stdout
