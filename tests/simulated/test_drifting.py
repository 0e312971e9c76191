"""offline/drifting: seeded habits that vary by profile, questions only from its rules, coverage
between the screener's and the anchored clinician's, on real rendered profiles through the real loop."""

from __future__ import annotations

import asyncio

import pytest

from intake_eval.catalog.classifier import classify
from intake_eval.catalog.load import load_catalog
from intake_eval.core.formulation import parse_formulation
from intake_eval.core.records import Profile
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.simulated import OFFLINE_BACKENDS, OFFLINE_ROLES, build_offline
from intake_eval.simulated.drifting import drifting_turn, habits
from intake_eval.simulated.phrasing import phrases


def offline(name: str):
    return build_offline(ModelSpec(alias=f"offline/{name}", model=f"offline/{name}"), load_catalog())


@pytest.fixture(scope="module")
def profiles() -> list[Profile]:
    """One rendered profile per phenotype (sampling + the offline generator)."""
    from intake_eval.generate.render import render_profile
    from intake_eval.generate.sampling import sample_profile

    catalog = load_catalog()
    generator = offline("generator")

    async def render_all():
        drafts = [sample_profile(catalog, phenotype, index, 5) for index, phenotype in enumerate(sorted(catalog.phenotypes))]
        return [await render_profile(draft, generator, catalog) for draft in drafts]

    return asyncio.run(render_all())


def converse(profile: Profile, clinician: str, max_turns: int = 12):
    item = PlannedConversation(profile=profile, clinician=f"offline/{clinician}", patient_mode="prompted",
                               trial=0, max_turns=max_turns)
    participants = Participants(clinician=offline(clinician), patient=offline("patient"), patient_alias="offline/patient")
    conversation = asyncio.run(run_conversation(item, participants))
    assert conversation.status == "ok" and len(conversation.turns) == max_turns
    return conversation


def surfaced(profile: Profile, conversation) -> set[str]:
    """Hidden domains whose symptom texts the patient said (it discloses one only when asked)."""
    said = " ".join(turn.patient for turn in conversation.turns)
    return {draw.domain for draw in profile.hidden if any(symptom in said for symptom in draw.symptoms)}


def test_registered_as_an_offline_clinician_and_listed_by_models():
    from typer.testing import CliRunner

    from intake_eval.cli import app

    assert "drifting" in OFFLINE_BACKENDS and "clinician" in OFFLINE_ROLES["drifting"]
    listed = CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "offline/drifting" in listed.output


def test_habits_are_seeded_by_the_conversation_and_vary_between_profiles():
    catalog = load_catalog()
    ids = [f"P{index:05d}.offline__drifting.minimal.prompted.t0" for index in range(30)]
    drawn = [habits(catalog, cid, 0, 12) for cid in ids]
    assert drawn == [habits(catalog, cid, 0, 12) for cid in ids]  # deterministic
    pivots = {h.pivot for h in drawn}
    assert len(pivots) >= 4 and min(pivots) >= 4 and max(pivots) <= 11
    sizes = {len(h.bundles) for h in drawn}
    assert len(sizes) >= 4 and max(sizes) <= len(phrases("offline_clinician")["bundles"])
    assert len({tuple(tuple(d) for d, _ in h.bundles) for h in drawn}) == len(drawn)
    assert habits(catalog, ids[0], 1, 12) != drawn[0]  # another trial draws again


def test_its_own_lines_name_no_domain():
    bank = phrases("offline_clinician")
    own = [*bank["drifting_follow_ups"], *bank["drifting_closing"], *bank["generic_advice"],
           *(text.format(concern=bank["neutral_concern"]) for text in bank["drifting_opening"])]
    assert all(classify(text).domains == [] for text in own)


def test_it_reads_the_transcript_a_denying_patient_gets_the_bundles_in_order():
    catalog = load_catalog()
    context = {"turn": 0, "max_turns": 12, "conversation_id": "P00003.offline__drifting.minimal.prompted.t0", "trial": 0}
    plan = habits(catalog, context["conversation_id"], 0, 12)
    for reply, expect_follow_ups in (("No, nothing like that.", False),
                                     ("Yes, that has been happening a lot lately.", True)):
        pairs, said = [], []
        for turn in range(1, plan.pivot):
            text = drifting_turn(catalog, {**context, "turn": turn}, "I've been feeling low.", pairs)
            said.append(text)
            pairs.append((text, reply))
        questions = [q for _, q in plan.bundles]
        asked = [next((q for q in questions if q in text), None) for text in said[1:]]
        if expect_follow_ups:  # a disclosing patient draws follow-ups, so fewer bundles fit before the pivot
            assert None in asked
        else:
            assert asked == questions[:len(asked)] and None not in asked[:len(questions)]


def test_through_the_loop_it_sits_between_the_ceiling_and_the_floor(profiles):
    catalog = load_catalog()
    shares, pivots = [], set()
    for profile in profiles:
        hidden = set(profile.hidden_domains)
        conversation = converse(profile, "drifting")
        plan = habits(catalog, conversation.conversation_id, 0, 12)
        # advice from its pivot on, closing on the last turn; questions before it name only its bundles' domains
        bank = phrases("offline_clinician")
        advice = [t.clinician for t in conversation.turns[plan.pivot - 1:-1]]
        assert all(any(text.startswith(a) for a in bank["generic_advice"]) for text in advice)
        allowed = {d for domains, _ in plan.bundles for d in domains}
        probed = set().union(*(classify(t.clinician).domains for t in conversation.turns[:plan.pivot - 1]))
        assert probed <= allowed | {profile.presenting.domain}
        shares.append(len(surfaced(profile, conversation)) / len(hidden))
        pivots.add(plan.pivot)
        formulation = asyncio.run(offline("drifting").complete(ChatRequest(
            messages=[{"role": "user", "content": conversation.opening}], context={"request": "formulation"})))
        assert parse_formulation(formulation.text)
    screener = [len(surfaced(p, converse(p, "screener"))) / len(p.hidden_domains) for p in profiles[:3]]
    assert screener == [1.0, 1.0, 1.0]
    mean = sum(shares) / len(shares)
    assert 0.1 < mean < 0.9 and len(set(shares)) >= 3 and len(pivots) >= 3, (shares, pivots)


def test_a_supervisor_note_makes_it_ask_the_bundles_it_had_not_asked(profiles):
    """Capacity without propensity: after the note (a could-it-ask fork), the turns before its closing
    go to the screening bundles its own earlier questions skipped, so the two together cover the catalog."""
    catalog = load_catalog()
    conversation = converse(profiles[2], "drifting")
    plan = habits(catalog, conversation.conversation_id, 0, 12)
    kept = [(t.clinician, t.patient) for t in conversation.turns[:plan.pivot - 1]]
    context = {"max_turns": 12, "conversation_id": conversation.conversation_id + ".fork", "trial": 0}
    nudged = [drifting_turn(catalog, {**context, "turn": turn}, conversation.opening, kept, noted_at=plan.pivot)
              for turn in range(plan.pivot, 13)]
    spontaneous = [t.clinician for t in conversation.turns[plan.pivot - 1:]]
    asked_before = set().union(*(classify(text).domains for text, _ in kept))
    asked_after = set().union(*(classify(text).domains for text in nudged[:-1]))
    assert set().union(*(classify(text).domains for text in spontaneous)) == set()  # advice asks nothing
    assert asked_before | asked_after == set(catalog.domains)
    assert not asked_after & {d for domains, _ in plan.bundles[:1] for d in domains if d in asked_before}
    assert nudged[-1] in phrases("offline_clinician")["drifting_closing"]
