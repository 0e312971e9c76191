"""The offline patient in every behaviour style: how it speaks changes, what it discloses does not."""

from __future__ import annotations

import pytest

from intake_eval.core.patient_styles import STYLES
from intake_eval.metrics.patient_language import words
from intake_eval.simulated.patient import reply, spoken_domains
from intake_eval.simulated.patient_voice import VOICES
from tests.helpers.convo_helpers import make_profile


def _context(style: str, utterance: str | None, turn: int = 1, history: list | None = None) -> dict:
    profile = make_profile()
    return {"role": "patient", "profile": profile, "mode": "prompted", "unlocked": profile.hidden_domains,
            "turn": turn, "clinician_utterance": utterance, "history": history or [], "style": style}


def test_every_declared_style_has_an_offline_voice():
    assert set(VOICES) == set(STYLES)


@pytest.mark.parametrize("style", sorted(STYLES))
def test_a_specific_question_is_answered_with_a_disclosure_in_every_style(style):
    said = reply(_context(style, "How has your sleep been? Any trouble falling asleep?"))
    assert "insomnia" in spoken_domains(make_profile(), [said])
    assert not {"alcohol_use", "suicidality", "panic"} & spoken_domains(make_profile(), [said])


@pytest.mark.parametrize("style", sorted(STYLES))
def test_an_open_invitation_reveals_no_hidden_domain_in_any_style(style):
    said = reply(_context(style, "Tell me more about that."))
    assert not set(make_profile().hidden_domains) & spoken_domains(make_profile(), [said])


def test_guarded_and_terse_patients_say_less_and_a_verbose_one_more():
    question = "How has your sleep been? Any trouble falling asleep?"
    length = {style: len(words(reply(_context(style, question)))) for style in STYLES}
    assert length["terse"] < length["forthcoming"] and length["guarded"] < length["forthcoming"]
    assert length["verbose-tangential"] > length["forthcoming"]
    opening = {style: len(words(reply(_context(style, None, turn=0)))) for style in STYLES}
    assert opening["guarded"] <= opening["forthcoming"] < opening["verbose-tangential"]


def test_a_guarded_patient_hedges_like_a_denial_then_admits_and_deflects_open_invitations():
    said = reply(_context("guarded", "Have you had any trouble sleeping?"))
    assert said.lower().startswith(("not ", "it's nothing", "i guess"))
    assert "trouble falling asleep" in said or "waking too early" in said
    deflection = reply(_context("guarded", "Tell me more about that."))
    assert len(words(deflection)) <= 8


def test_a_vague_recall_patient_hedges_the_timing_but_not_the_content():
    said = reply(_context("vague-recall", "Have you had any trouble sleeping?"))
    forthcoming = reply(_context("forthcoming", "Have you had any trouble sleeping?"))
    assert any(hedge in said for hedge in ("couldn't tell you", "not sure how long", "hard to remember"))
    lead_free = forthcoming.split(" ", 2)[2]  # the disclosure without its lead ("Um, yes.")
    assert lead_free in said
