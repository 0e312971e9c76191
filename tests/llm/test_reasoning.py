"""Reasoning kept apart from the visible utterance, in every shape providers use (pure logic)."""

import pytest

from intake_eval.llm.reasoning import split_reasoning


@pytest.mark.parametrize(
    ("content", "fields", "visible", "reasoning"),
    [
        ("How are you sleeping?", (), "How are you sleeping?", None),
        ("How are you sleeping?", ("I should ask about sleep.",), "How are you sleeping?", "I should ask about sleep."),
        ("Any worries?", (None, "  worry next  "), "Any worries?", "worry next"),
        ("<think>ask about mood</think>\n\nHow is your mood?", (), "How is your mood?", "ask about mood"),
        ("<THINK>a</THINK>Hi <think>b</think>there", (), "Hi there", "a\n\nb"),
        ("they opened it in the template</think>Do you drink?", (), "Do you drink?", "they opened it in the template"),
        ("<think>still thinking when the tokens ran out", (), "", "still thinking when the tokens ran out"),
        ("Visible first <think>then cut off", (), "Visible first", "then cut off"),
        ("", ("all reasoning",), "", "all reasoning"),
        (None, (), "", None),
        ("<think></think>Hello", (), "Hello", None),
    ],
)
def test_split_reasoning(content, fields, visible, reasoning):
    assert split_reasoning(content, *fields) == (visible, reasoning)
