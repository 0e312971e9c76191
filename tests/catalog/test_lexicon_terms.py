"""Lexicon shorthand (word groups, inflections, proximity rules) and how the classifier uses it:
proximity matches are shown as phrases, never shadow another family's match, and hedged
declarative asks ("I was wondering whether…") probe like questions."""

from __future__ import annotations

import re

import pytest

from intake_eval.catalog.classifier import classify, load_lexicon, sentence_domains
from intake_eval.catalog.lexicon_terms import compile_groups, expand, inflections, proximity_patterns


@pytest.mark.parametrize(
    ("word", "forms"),
    [
        ("race", {"race", "races", "raced", "racing"}),
        ("worry", {"worry", "worries", "worried", "worrying"}),
        ("stop", {"stop", "stops", "stopped", "stopping"}),
        ("wash", {"wash", "washes", "washed", "washing"}),
        ("check", {"check", "checks", "checked", "checking"}),
    ],
)
def test_inflections_cover_the_regular_forms(word, forms):
    assert forms <= set(inflections(word))


def test_groups_and_inflection_marks_expand_into_plain_regexes():
    groups = compile_groups({"PAIN": ["pain", "ache~"], "LONG": ["months", "never go(es)? away"]})
    pattern = re.compile(expand(r"\b<PAIN>\b", groups))
    assert pattern.search("my knees ached all winter")
    assert pattern.search("aching joints")
    assert not pattern.search("a painter")
    with pytest.raises(ValueError, match="unknown group <NOPE>"):
        expand("<NOPE>", groups)
    with pytest.raises(ValueError, match="UPPER_CASE"):
        compile_groups({"lower": ["x"]})


def test_proximity_rules_match_either_order_within_the_word_limit():
    groups = compile_groups({"PAIN": ["pain", "hurt~"], "LONG": ["months", "years"]})
    patterns = [re.compile(pattern) for pattern, _ in proximity_patterns(["<PAIN>", "<LONG>", 3], groups)]

    def hit(text: str) -> bool:
        return any(p.search(text) for p in patterns)

    assert hit("has your back been hurting for months")  # 2 words between
    assert hit("for years now the pain has")  # other order
    assert not hit("pain that started about six or seven months ago")  # 5 words between
    with pytest.raises(ValueError, match="max words between"):
        proximity_patterns(["<PAIN>", "<LONG>"], groups)


def test_a_proximity_match_is_explained_by_its_phrase():
    found = classify("I wonder if your back has been hurting for months now?")
    assert found.domains == ["chronic_pain"]
    assert found.matches["chronic_pain"] == ["hurting for months"]


LEXICON = """
groups:
  FOOD: ['food', 'meal~']
families:
  binge_eating:
    - '\\beat(ing)? a huge amount\\b'
  restrictive_eating:
    - '\\bhuge\\b'
near:
  restrictive_eating:
    - ['afraid', '<FOOD>', 6]
advice: ['\\bi suggest\\b']
advice_exceptions: ['\\bnever matches\\b']
question_start: '^(do|did)\\b'
anaphora: '\\blike that\\b'
quote: '^you said\\b'
open_follow_up: ['\\btell me more\\b']
request: ['\\btell me\\b']
clarifying: ['\\byou mentioned\\b']
other: ['\\bthanks\\b']
"""


def test_proximity_matches_never_shadow_a_shorter_match_of_another_family(tmp_path):
    path = tmp_path / "lexicon.yaml"
    path.write_text(LEXICON, encoding="utf-8")
    lexicon = load_lexicon(path)
    # the proximity match "afraid of eating a huge amount of food" spans the binge phrase: both count
    found = sentence_domains("are you afraid of eating a huge amount of food?", lexicon)
    assert found == {"binge_eating": ["eating a huge amount"], "restrictive_eating": ["afraid of eating a huge amount of food"]}
    # an ordinary longer match still shadows a word inside it ("huge" inside the binge phrase)
    assert sentence_domains("do you eat a huge amount?", lexicon) == {"binge_eating": ["eat a huge amount"]}


@pytest.mark.parametrize(
    ("text", "domain"),
    [
        ("I was wondering whether you've had thoughts of killing yourself.", "suicidality"),
        ("I'm curious whether your sleep has changed lately.", "insomnia"),
        ("I am wondering if you ever make yourself sick after eating.", "purging"),
        ("It would help me to know how much you drink.", "alcohol_use"),
    ],
)
def test_hedged_declarative_asks_probe_like_questions(text, domain):
    found = classify(text)
    assert domain in found.domains
    assert found.question_type == "closed_hypothesis"


@pytest.mark.parametrize(
    "text",
    [
        "I wonder what's been the hardest part of this for you.",
        "I was wondering how you've been since we last spoke.",
        "It might help to keep a diary of your days.",
        "Would you like a glass of water?",
        "Did the train get you here on time?",
    ],
)
def test_hedged_open_invitations_and_logistics_unlock_nothing(text):
    assert classify(text).domains == []
