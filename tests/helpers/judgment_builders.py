"""Hand-built records for the judging and metrics tests (no pipeline needed)."""

from __future__ import annotations

from intake_eval.core.records import (
    Conversation,
    ConversationTurn,
    Demographics,
    DomainDraw,
    DomainLabel,
    Judgment,
    Profile,
    TurnJudgment,
)

HIDDEN = ("insomnia", "alcohol_use", "panic", "ptsd")


def judgment(rows: list[tuple[str, dict[str, str]] | tuple[str, dict[str, str], bool]],
             hidden: tuple[str, ...] = HIDDEN, status: str = "ok", conversation_id: str = "P00000.c.minimal.prompted.t0",
             judge: str = "j", clinician: str = "c", profile_id: str = "P00000") -> Judgment:
    """rows[i] describes turn i: (question_type, {domain: "A" asked | "D" disclosed | "AD" both}, faithful?)."""
    turns = []
    for number, row in enumerate(rows):
        qtype, marks = row[0], row[1]
        faithful = row[2] if len(row) > 2 else True
        turns.append(TurnJudgment(
            turn=number, question_type=qtype, patient_faithful=faithful,
            domains={d: DomainLabel(asked_about="A" in marks.get(d, ""), disclosed="D" in marks.get(d, ""))
                     for d in hidden},
        ))
    return Judgment(conversation_id=conversation_id, judge=judge, clinician=clinician, profile_id=profile_id,
                    phenotype="trauma_substance", turns=turns, status=status)


def profile(profile_id: str = "P00000", phenotype: str = "trauma_substance", alignment: str = "aligned",
            hidden: tuple[str, ...] = ("insomnia", "alcohol_use")) -> Profile:
    # Phenomenology copies symptom texts verbatim, as the renderer's QC enforces.
    texts = {
        "insomnia": (["trouble falling asleep most nights", "waking at 4am and unable to get back to sleep"],
                     "I have trouble falling asleep most nights, I lie awake for hours. "
                     "It comes and goes, some weeks more than others. I keep waking at 4am and unable to get back to sleep."),
        "alcohol_use": (["drinking more than intended", "needing a drink to calm down in the evening"],
                        "I keep drinking more than intended, a lot more than I planned. "
                        "I am needing a drink to calm down in the evening."),
        "depression": (["low mood most of the day", "loss of interest in hobbies"],
                       "I have low mood most of the day, flat and heavy. "
                       "There is a loss of interest in hobbies I used to love."),
        "panic": (["sudden surges of intense fear", "racing heart and shortness of breath"],
                  "Out of nowhere I get sudden surges of intense fear, with a racing heart and shortness of breath."),
    }
    def draw(domain: str) -> DomainDraw:
        symptoms, phenomenology = texts[domain]
        return DomainDraw(domain=domain, severity="moderate", symptoms=symptoms, phenomenology=phenomenology)
    return Profile(profile_id=profile_id, phenotype=phenotype, alignment=alignment, presenting=draw("depression"),
                   hidden=[draw(d) for d in hidden], demographics=Demographics(age=38, sex="male"))


def conversation(turns: list[tuple[str, str]], opening: str = "I've been feeling really low for months.",
                 profile_id: str = "P00000", clinician: str = "offline/screener", trial: int = 0) -> Conversation:
    return Conversation(
        conversation_id=f"{profile_id}.{clinician.replace('/', '__')}.minimal.prompted.t{trial}",
        profile_id=profile_id, phenotype="trauma_substance", clinician=clinician, patient="offline/patient",
        opening=opening, trial=trial,
        turns=[ConversationTurn(turn=i + 1, clinician=c, patient=p) for i, (c, p) in enumerate(turns)],
    )
