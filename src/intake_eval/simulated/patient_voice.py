"""How the offline patient speaks in each behaviour style (core/patient_styles.py).

A ``Voice`` says how many sentences each kind of answer takes and which phrases it uses: the style's
entries in prompts/offline_patient_styles.yaml replace the base phrase bank's (offline_patient.yaml)
entries of the same name, and verbose-tangential adds tangents, vague-recall adds recall hedges.
What a reply discloses is decided by the patient's rules, never here, so every style obeys the same
disclosure rule; only the words around the disclosure change:
- forthcoming: the base bank, three sentences of a hidden domain on its first disclosure;
- guarded: a denial-like hedge, then one concrete symptom sentence played down; open invitations
  are deflected instead of elaborated;
- terse: one symptom sentence, no elaboration on open invitations;
- verbose-tangential: the forthcoming content plus an everyday tangent around it;
- vague-recall: the forthcoming content, hedged timing and frequency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.simulated.phrasing import phrases

BASE_PHRASES = "offline_patient"
STYLE_PHRASES = "offline_patient_styles"


@dataclass(frozen=True)
class Voice:
    style: str
    opening_segments: int  # presenting-concern sentences in the opening
    disclosure_segments: int  # sentences of a hidden domain on its first disclosure
    elaboration_segments: int  # sentences when asked again about something already talked about
    symptom_disclosure: bool  # disclose through one framed symptom sentence (guarded, terse)
    deflects_open: bool  # an open invitation gets a deflection, not more content
    tangential: bool  # an everyday tangent is added to content answers
    hedges_recall: bool  # a recall hedge is added to disclosures

    def bank(self) -> dict[str, Any]:
        """The phrase bank of this style: the base bank with the style's entries in place (read through the
    prompt folders in effect, so a user's phrase files win)."""
        return _bank(self.style)


VOICES: dict[str, Voice] = {voice.style: voice for voice in (
    Voice("forthcoming", 3, 3, 2, symptom_disclosure=False, deflects_open=False, tangential=False, hedges_recall=False),
    Voice("guarded", 1, 1, 1, symptom_disclosure=True, deflects_open=True, tangential=False, hedges_recall=False),
    Voice("terse", 1, 1, 1, symptom_disclosure=True, deflects_open=True, tangential=False, hedges_recall=False),
    Voice("verbose-tangential", 3, 3, 2, symptom_disclosure=False, deflects_open=False, tangential=True,
          hedges_recall=False),
    Voice("vague-recall", 3, 3, 2, symptom_disclosure=False, deflects_open=False, tangential=False, hedges_recall=True),
)}


def voice(style: str | None) -> Voice:
    return VOICES[style or DEFAULT_STYLE]


def _bank(style: str) -> dict[str, Any]:
    base = dict(phrases(BASE_PHRASES))
    if style == DEFAULT_STYLE:
        return base
    overrides = phrases(STYLE_PHRASES).get(style) or {}
    return {**base, **overrides}
