"""A loopback OpenAI-compatible responder that plays every role of a study from the prompt alone.

Answers are sized like real ones (a clinician question ~80 tokens, a patient reply ~90) so the
estimate can be compared with the usage the run records. The judge's JSON is built from the
hidden domain ids listed in the judge prompt; the generator's text carries the symptoms it was
asked to render; the tracker answers from the area ids in its prompt.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from tests.helpers.fakeserver import Reply

CLINICIAN = ("Thank you for telling me about that, it sounds like it has been a heavy stretch for you. "
             "I would like to understand a few more things so I get the full picture. How have you been sleeping "
             "lately, for example do you have trouble falling asleep, staying asleep, or waking far too early, and "
             "has your appetite or energy changed over the last few weeks?")
PATIENT = ("Honestly it has been hard to keep up with everything. Most mornings I wake up already tired and I "
           "drag myself through work, and by the evening I just sit on the couch without really doing anything. "
           "My partner has noticed I am quieter than I used to be, and I feel bad that I cannot explain it better. "
           "I keep hoping it will pass on its own.")
FORMULATION = json.dumps({
    "chief_complaint": "persistent low mood and tiredness", "problems": [
        "low mood most days for several months", "poor sleep and early waking", "withdrawal from partner and friends",
        "difficulty keeping up at work"],
    "principal_diagnosis": {"name": "Major depressive disorder, single episode, moderate", "icd10": "F32.1"},
    "differential": [{"name": "Generalized anxiety disorder", "icd10": "F41.1"},
                     {"name": "Insomnia disorder", "icd10": "G47.00"}],
    "risk_level": "low",
    "risk_evidence": "The patient described hopelessness at times but no thoughts of ending their life were raised; "
                     "suicide risk was not asked about directly, so the level rests on what was volunteered and should "
                     "be assessed at the next appointment together with sleep, alcohol use and support at home."})
REASONING_TOKENS = 700  # what a reasoning model spends per call, as the estimate assumes
REASONING = "Let me think about which areas the clinician asked about and what the patient said in reply."


def _text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def role_of(body: dict[str, Any]) -> str:
    messages = body.get("messages", [])
    first = str(messages[0].get("content", "")) if messages else ""
    if "expert clinical rater" in first:
        return "judge"
    if "state tracker of a simulated patient" in first:
        return "tracker"
    if first.startswith("You are a mental health clinician"):
        last = str(messages[-1].get("content", "")) if messages else ""
        return "formulation" if "Write your case formulation" in last else "clinician"
    if "Disclosure rule" in first or "What brought you here" in first:
        return "patient"
    return "generator"


def judge_answer(prompt: str) -> str:
    hidden = re.findall(r"^- id: ([a-z_]+) \(", prompt, flags=re.MULTILINE)
    reasoning = "The clinician asks about sleep in general terms; the patient reply mentions tiredness only."

    def turn(number: int) -> dict[str, Any]:
        return {"turn": number, "reasoning": reasoning, "question_type": "closed_hypothesis" if number else "other",
                "patient_faithful": True,
                "domains": [{"domain": d, "reasoning": reasoning, "asked_about": bool(number) and d == "insomnia",
                             "disclosed": False} for d in hidden]}

    labelled = re.search(r"Label turn (\d+) only", prompt)
    if labelled:
        return json.dumps(turn(int(labelled.group(1))))
    numbers = sorted({int(n) for n in re.findall(r"^\[turn (\d+)\]", prompt, flags=re.MULTILINE)})
    return json.dumps({"turns": [turn(n) for n in numbers]})


def generator_answer(prompt: str) -> str:
    """First-person text quoting every bulleted symptom line of the render prompt (QC passes), and
    nothing the offline classifier reads as another domain (render QC checks the presenting text)."""
    asked = prompt.split("Rules:")[0].split("Every one of these experiences")[-1]
    symptoms = [line[2:].strip() for line in asked.split("Leave these out entirely")[0].splitlines()
                if line.startswith("- ")]
    sentences = " ".join(f"For a while now, {s[:1].lower() + s[1:]}." for s in symptoms if s)
    text = sentences or "I have been struggling with this for months and it colours everything I do."
    filler = (" It is hard to put into words, but it has been there most days for a good while now."
              " I notice it more when I am busy or on my own in the evening, and it wears me down.")
    while len(text) < 560:  # a real render is 3 to 6 sentences, ~140 tokens
        text += filler
    return text


class StudyResponder:
    """Callable responder; counts requests per role and can make some models reason."""

    def __init__(self, reasoning_models: tuple[str, ...] = ()):
        self.reasoning_models = reasoning_models
        self.roles: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any], _index: int) -> Reply:
        role = role_of(body)
        with self.lock:
            self.roles[role] += 1
        prompt = _text(body)
        if role == "judge":
            content = judge_answer(prompt)
        elif role == "tracker":
            ids = re.findall(r"^- ([a-z_]+) \(", prompt, flags=re.MULTILINE)
            asked = [d for d in ids if d == "insomnia"]
            content = json.dumps({"question_type": "closed_hypothesis", "asked_domains": asked})
        elif role == "clinician":
            content = CLINICIAN
        elif role == "patient":
            content = PATIENT
        elif role == "formulation":
            content = FORMULATION
        else:
            content = generator_answer(prompt)
        if body.get("model") in self.reasoning_models:  # hidden reasoning billed as completion tokens
            return Reply(content=content, reasoning_content=REASONING, reasoning_tokens=REASONING_TOKENS)
        return Reply(content=content)
