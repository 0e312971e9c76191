"""Hand-built records for the judging and metrics tests (no pipeline needed)."""

from __future__ import annotations

from intake_eval.records import (
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
    texts = {
        "insomnia": (["trouble falling asleep most nights", "waking at 4am and unable to get back to sleep"],
                     "I lie awake for hours before I finally drift off. Most nights I am up again at four in the morning."),
        "alcohol_use": (["drinking more than intended", "needing a drink to calm down in the evening"],
                        "I end up drinking a lot more than I planned to. By evening I need a drink just to calm down."),
        "depression": (["low mood most of the day", "loss of interest in hobbies"],
                       "I feel flat and heavy nearly all day. Nothing I used to enjoy interests me anymore."),
        "panic": (["sudden surges of intense fear", "racing heart and shortness of breath"],
                  "Out of nowhere my heart starts pounding and I can't catch my breath."),
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
