"""What the run stage tells each role, rendered by the functions that build its requests, for the run
folder's prompt snapshot (``runner.prompt_snapshot``).

The clinician's system prompt (per condition), the patient's opening instruction and the formulation
request are the same for every conversation. The patient's system prompt holds the profile, so it is
rendered for one example: the first profile by id (the same on every resume, so a resume writes
nothing new); ``intake-eval show --patient-prompt`` renders it for any conversation. The tracker's
prompt is written per turn (the clinician's words are in it) and only its template is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.records import Conversation, Profile
from intake_eval.interview.formulation import formulation_instruction
from intake_eval.interview.participants import (
    clinician_system_prompt,
    opening_instruction,
    patient_system_prompt,
)
from intake_eval.interview.plan import RunSettings
from intake_eval.runner.prompt_snapshot import RenderedPrompt

PATIENT_TEMPLATES = {"prompted": "patient_prompted", "tracked": "patient_responder"}
PATIENT_NOTES = {
    "prompted": "rendered for the example profile; every profile gets its own presenting concern and hidden domains",
    "tracked": ("rendered for the example profile as at its opening (no hidden domain unlocked); each hidden domain "
                "the clinician asks about is added to this prompt from then on"),
}


def run_prompt_texts(settings: RunSettings, profiles: list[Profile]) -> list[RenderedPrompt]:
    """The run's rendered prompts: clinician per condition, patient for its mode, and the formulation."""
    prompts = [RenderedPrompt("clinician", condition, clinician_system_prompt(condition), f"clinician_{condition}")
               for condition in sorted(set(settings.conditions))]
    if profiles:
        example = min(profiles, key=lambda profile: profile.profile_id)
        mode = settings.patient_mode
        for style in settings.patient_styles:  # the default style's label is the mode alone, as before styles
            variant = mode if style == DEFAULT_STYLE else f"{mode}.{style}"
            prompts.append(RenderedPrompt("patient", variant, patient_system_prompt(example, mode, (), style=style),
                                          PATIENT_TEMPLATES[mode], example=f"profile {example.profile_id}",
                                          note=PATIENT_NOTES[mode]))
    prompts.append(RenderedPrompt("patient", "opening_instruction", opening_instruction(), "patient_opening",
                                  note="the first user message the patient gets, asking it to speak first"))
    if settings.formulation:
        prompts.append(RenderedPrompt("formulation", "", formulation_instruction(), "formulation",
                                      note="sent to the clinician after its last turn"))
    return prompts


def conversation_patient_prompts(conversation: Conversation, profile: Profile,
                                 render: Callable[..., str]) -> list[tuple[str, str]]:
    """The patient's system prompt of one conversation as (when, text): prompted mode has one; tracked
    mode's grows as domains unlock, so the one at the opening and, if different, the one at the end."""
    mode, style = conversation.patient_mode, conversation.patient_style
    if mode != "tracked":
        return [("every turn", patient_system_prompt(profile, mode, (), render, style=style))]
    prompts = [("at the opening (nothing unlocked)", patient_system_prompt(profile, mode, (), render, style=style))]
    last = next((turn.tracker for turn in reversed(conversation.turns) if turn.tracker is not None), None)
    unlocked = tuple(last.unlocked_after) if last is not None else ()
    if unlocked:
        prompts.append((f"at the last turn (unlocked: {', '.join(unlocked)})",
                        patient_system_prompt(profile, mode, unlocked, render, style=style)))
    return prompts
