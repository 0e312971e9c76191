"""Offline participants: the state-tracked patient, the systematic screener (ceiling) and the
anchored clinician (floor), on real generated and rendered profiles through the real loop."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
import yaml

from intake_eval.catalog.classifier import classify
from intake_eval.catalog.load import load_catalog
from intake_eval.core.formulation import Formulation, parse_formulation
from intake_eval.core.records import Profile
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.interview.participants import clinician_messages
from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.simulated import build_offline

DATA = Path(__file__).resolve().parents[1] / "data"
PROMPTS = Path(__file__).resolve().parents[2] / "prompts"


def offline(name: str):
    return build_offline(ModelSpec(alias=f"offline/{name}", model=f"offline/{name}"), load_catalog())


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    """Two rendered profiles per phenotype (sampling + the offline generator, QC passed)."""
    from intake_eval.generate.render import render_profile
    from intake_eval.generate.sampling import sample_profile

    catalog = load_catalog()
    generator = offline("generator")

    async def render_all():
        drafts = [sample_profile(catalog, phenotype, index, 11)
                  for index, phenotype in enumerate(sorted(catalog.phenotypes) * 2)]
        return [await render_profile(draft, generator, catalog) for draft in drafts]

    rendered = asyncio.run(render_all())
    assert all(profile.render.qc_passed for profile in rendered)
    return rendered


def utterance_pool() -> list[str]:
    texts = [line.split("\t")[2] for name in ("classifier_labelled.tsv", "classifier_heldout.tsv")
             for line in (DATA / name).read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    bank = yaml.safe_load((PROMPTS / "offline_clinician.yaml").read_text(encoding="utf-8"))
    texts += [q for bundle in bank["bundles"] for q in bundle["questions"]]
    return texts


POOL = utterance_pool()


def ask(patient, profile: Profile, turn: int, utterance: str | None, history: list[dict], *,
        mode: str = "prompted", unlocked: list[str] | None = None, opening: str = "") -> str:
    context = {
        "role": "patient", "profile": profile, "mode": mode,
        "unlocked": profile.hidden_domains if unlocked is None else unlocked,
        "turn": turn, "clinician_utterance": utterance, "history": history,
    }
    messages = [{"role": "assistant", "content": opening}] if opening else []
    return asyncio.run(patient.complete(ChatRequest(messages=messages, context=context))).text


def carried(profile: Profile, text: str) -> set[str]:
    """Hidden domains whose symptom texts (unique to them within the profile) appear in a reply."""
    return {draw.domain for draw in profile.hidden if any(symptom in text for symptom in draw.symptoms)}


# ---------------------------------------------------------------- patient

def test_patient_never_discloses_an_unasked_hidden_domain(profiles):
    patient = offline("patient")
    rng = random.Random("leak-test")
    disclosures = 0
    for profile in profiles:
        for _ in range(3):  # three random 12-turn interviews per profile
            opening = ask(patient, profile, 0, None, [])
            assert not carried(profile, opening)
            history, asked_so_far = [], set()
            for turn in range(1, 13):
                utterance = rng.choice(POOL)
                asked_so_far |= set(classify(utterance).domains)
                reply = ask(patient, profile, turn, utterance, history, opening=opening)
                leaked = carried(profile, reply) - asked_so_far
                assert not leaked, (profile.profile_id, utterance, reply)
                disclosures += len(carried(profile, reply))
                history.append({"turn": turn, "clinician": utterance, "patient": reply})
    assert disclosures > 50  # the interviews did reach hidden domains, so the check had teeth


def test_patient_discloses_a_hidden_domain_when_asked_and_only_that_one(profiles):
    patient = offline("patient")
    probes = []  # (domains asked, question), narrowest first
    for line in (DATA / "classifier_labelled.tsv").read_text(encoding="utf-8").splitlines():
        if line.startswith("closed_hypothesis\t"):
            probes.append((set(line.split("\t")[1].split(",")), line.split("\t")[2]))
    probes.sort(key=lambda probe: len(probe[0]))
    for profile in profiles:
        for draw in profile.hidden:
            asked, question = next(probe for probe in probes if draw.domain in probe[0])
            reply = ask(patient, profile, 1, question, [])
            assert draw.domain in carried(profile, reply) <= asked, (draw.domain, reply)


def test_patient_denies_absent_domains_and_invents_nothing(profiles):
    patient = offline("patient")
    profile = profiles[0]
    present = {profile.presenting.domain, *profile.hidden_domains}
    absent_question = next(text for text in POOL
                           if classify(text).domains and not set(classify(text).domains) & present)
    reply = ask(patient, profile, 1, absent_question, [])
    assert reply.startswith(("No", "Not really"))
    assert not carried(profile, reply)


def test_open_invitations_elaborate_the_presenting_concern_only(profiles):
    patient = offline("patient")
    for profile in profiles:
        history = []
        for turn, utterance in enumerate(["Tell me more.", "Anything else?", "How does that make you feel?",
                                          "That sounds hard.", "What else is going on in your life?"], 1):
            reply = ask(patient, profile, turn, utterance, history)
            assert not carried(profile, reply), (utterance, reply)
            history.append({"turn": turn, "clinician": utterance, "patient": reply})


def test_tracked_mode_speaks_only_of_unlocked_domains(profiles):
    patient = offline("patient")
    profile = profiles[0]
    target = profile.hidden[0]
    question = next(text for text in POOL if classify(text).domains == [target.domain])
    locked = ask(patient, profile, 1, question, [], mode="tracked", unlocked=[])
    assert not carried(profile, locked)
    unlocked = ask(patient, profile, 1, question, [], mode="tracked", unlocked=[target.domain])
    assert carried(profile, unlocked) == {target.domain}
    # The tracker's decision binds even when the offline classifier sees no probe (an LLM tracker).
    bound = ask(patient, profile, 1, "Could you say a bit more?", [], mode="tracked", unlocked=[target.domain])
    assert carried(profile, bound) == {target.domain}


def test_patient_is_deterministic_and_varies_by_profile(profiles):
    patient = offline("patient")
    first = [ask(patient, profile, 0, None, []) for profile in profiles[:6]]
    again = [ask(patient, profile, 0, None, []) for profile in profiles[:6]]
    assert first == again
    assert len(set(first)) == len(first)
    assert all(profile.presenting.symptoms[0] in text for profile, text in zip(profiles, first))


def test_patient_refuses_other_roles():
    from intake_eval.llm.base import ModelCallError

    with pytest.raises(ModelCallError):
        asyncio.run(offline("patient").complete(ChatRequest(messages=[], context={"role": "clinician"})))


# ---------------------------------------------------------------- clinicians through the real loop

def converse(profile: Profile, clinician: str, *, max_turns: int = 12, trial: int = 0, mode: str = "prompted"):
    item = PlannedConversation.of(profile, clinician=f"offline/{clinician}", patient_mode=mode,
                               trial=trial, max_turns=max_turns)
    participants = Participants(clinician=offline(clinician), patient=offline("patient"),
                                patient_alias="offline/patient")
    conversation = asyncio.run(run_conversation(item, participants))
    assert conversation.status == "ok" and len(conversation.turns) == max_turns
    return conversation


@pytest.mark.parametrize("max_turns", [12, 6, 16])
def test_screener_covers_every_catalog_domain_then_closes(profiles, max_turns):
    conversation = converse(profiles[0], "screener", max_turns=max_turns)
    asked = set().union(*(classify(turn.clinician).domains for turn in conversation.turns[:-1]))
    assert asked == set(load_catalog().domains)
    assert classify(conversation.turns[-1].clinician).question_type == "other"


def test_screener_surfaces_every_hidden_domain(profiles):
    for profile in profiles[::4]:
        conversation = converse(profile, "screener")
        said = " ".join(turn.patient for turn in conversation.turns)
        assert carried(profile, said) == set(profile.hidden_domains)


def test_screener_acknowledges_disclosures_and_trials_vary_wording_not_coverage(profiles):
    base = converse(profiles[1], "screener")
    varied = converse(profiles[1], "screener", trial=1)
    assert [t.clinician for t in base.turns] != [t.clinician for t in varied.turns]
    coverage = [set().union(*(classify(t.clinician).domains for t in c.turns)) for c in (base, varied)]
    assert coverage[0] == coverage[1] == set(load_catalog().domains)
    acknowledged = [t for prev, t in zip(base.turns, base.turns[1:])
                    if carried(profiles[1], prev.patient) and t.clinician.startswith(("Thank", "That sounds", "I'm glad", "Okay"))]
    assert acknowledged


def test_anchored_stays_on_the_presenting_concern_and_pivots_near_turn_6(profiles):
    pivots = []
    for profile in profiles:
        conversation = converse(profile, "anchored")
        labels = [classify(turn.clinician) for turn in conversation.turns]
        for label in labels:
            assert set(label.domains) <= {profile.presenting.domain}, label
        first_tp = next(i for i, label in enumerate(labels, 1) if label.question_type == "treatment_planning")
        pivots.append(first_tp)
        assert [label.question_type for label in labels[-2:]] == ["other", "other"]
        assert all(label.question_type in ("open", "clarifying", "closed_hypothesis") for label in labels[:first_tp - 1])
        said = " ".join(turn.patient for turn in conversation.turns)
        assert not carried(profile, said)  # nothing hidden was ever asked, so nothing came out
    assert set(pivots) <= {5, 6, 7} and len(set(pivots)) > 1


def formulation_of(conversation, clinician: str) -> Formulation:
    messages = clinician_messages("minimal", conversation.opening, conversation.turns)
    messages.append({"role": "user", "content": "Write your case formulation as JSON."})
    context = {"role": "clinician", "request": "formulation", "conversation_id": conversation.conversation_id,
               "turn": len(conversation.turns) + 1, "max_turns": len(conversation.turns), "trial": 0}
    text = asyncio.run(offline(clinician).complete(ChatRequest(messages=messages, context=context))).text
    return parse_formulation(text)


def test_formulations_validate_and_reflect_what_was_disclosed(profiles):
    catalog = load_catalog()
    for profile in profiles[::5]:
        presenting = catalog.domains[profile.presenting.domain]
        screened = formulation_of(converse(profile, "screener"), "screener")
        anchored = formulation_of(converse(profile, "anchored"), "anchored")
        assert screened.chief_complaint == anchored.chief_complaint == presenting.label
        assert set(screened.problems) == {catalog.domains[d].label for d in [presenting.id, *profile.hidden_domains]}
        assert anchored.problems == [presenting.label]
        assert len(screened.differential) <= 5
        suicidal = "suicidality" in profile.hidden_domains
        assert (screened.risk_level in ("moderate", "high")) == (suicidal or "self_harm" in profile.hidden_domains)
        assert anchored.risk_level == "low" or profile.presenting.domain in ("suicidality", "self_harm")


def test_presenting_concern_is_found_in_paraphrased_openings_too():
    from intake_eval.simulated.formulation import (
        build_formulation,
        findings,
        presenting_domain,
    )

    catalog = load_catalog()
    assert presenting_domain("I keep having panic attacks out of nowhere; my heart pounds and I think I'm dying.",
                             catalog) == "panic"
    assert presenting_domain("Honestly I drink too much. I need more and more to feel it.", catalog) == "alcohol_use"
    vague = findings("I just came because my wife told me to.", [], catalog)
    assert vague.presenting is None
    deferred = build_formulation(vague, catalog, include_disclosed=True)
    assert (deferred.principal_diagnosis.name, deferred.risk_level) == ("Diagnosis deferred", "low")


def test_screener_formulation_reads_answers_not_profiles():
    """Denied and unanswered domains stay out; an affirmed single-domain question counts."""
    from intake_eval.simulated.formulation import findings

    catalog = load_catalog()
    pairs = [("Do you drink?", "No, not really."),
             ("Have you had any thoughts of ending your life?", "Yes, sometimes I wish I could just not wake up."),
             ("How is your sleep?", "")]
    found = findings("Lately I've been feeling down, empty or hopeless most of the day.", pairs, catalog)
    assert (found.presenting, found.disclosed) == ("depression", ["suicidality"])
