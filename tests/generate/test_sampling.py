"""Stages 1-5 (pure, seeded) and the stage-6 QC scoring, against hand-worked cases."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from scipy.stats import chisquare

from intake_eval.catalog.load import load_catalog
from intake_eval.catalog.schema import (
    ConflictRule,
    DemographicConstraints,
    OptionalDomain,
    Phenotype,
    PrincipalDiagnosis,
)
from intake_eval.core.records import DomainDraw
from intake_eval.generate.render import qc_domain, symptom_score
from intake_eval.generate.sampling import (
    Trace,
    choose_domains,
    draw_severity,
    draw_symptoms,
    plan_phenotypes,
    sample_profile,
)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


# ---------------------------------------------------------------- stage 1

def test_stratified_108_gives_6_per_phenotype_in_a_seeded_shuffled_order(catalog):
    plan = plan_phenotypes(catalog, 108, "stratified", 7)
    assert Counter(plan) == {pid: 6 for pid in catalog.phenotypes}
    assert plan == plan_phenotypes(catalog, 108, "stratified", 7)
    assert plan != plan_phenotypes(catalog, 108, "stratified", 8)
    assert plan != sorted(plan)  # shuffled, not blocks of one phenotype


def test_stratified_remainder_is_spread_one_each(catalog):
    counts = Counter(plan_phenotypes(catalog, 40, "stratified", 1))  # 40 = 2 × 18 + 4
    assert sorted(counts.values()) == [2] * 14 + [3] * 4


def test_weighted_follows_the_population_prior(catalog):
    n = 30_000
    plan = plan_phenotypes(catalog, n, "weighted", 3)
    ids = list(catalog.phenotypes)
    weights = [catalog.phenotypes[pid].population_weight for pid in ids]
    expected = [n * w / sum(weights) for w in weights]
    observed = [plan.count(pid) for pid in ids]
    assert chisquare(observed, expected).pvalue > 0.001
    assert plan[:100] == plan_phenotypes(catalog, 100, "weighted", 3)  # prefix-stable


# ---------------------------------------------------------------- stage 2

def _pheno(**fields) -> Phenotype:
    base = dict(id="toy", name="toy", description="toy", alignment="aligned", population_weight=1, weight_source="x",
                presenting=["depression"], principal_diagnosis=PrincipalDiagnosis(domain="depression", name="MDD"),
                demographics=DemographicConstraints())
    return Phenotype(**(base | fields))


def test_every_shipped_profile_has_one_presenting_and_4_to_5_distinct_hidden(catalog):
    for index in range(1500):
        pid = list(catalog.phenotypes)[index % 18]
        profile = sample_profile(catalog, pid, index, 11)
        hidden = profile.hidden_domains
        assert 4 <= len(hidden) <= 5 and len(set(hidden)) == len(hidden)
        assert profile.presenting.domain not in hidden
        pheno = catalog.phenotypes[pid]
        assert profile.presenting.domain in pheno.presenting
        assert set(pheno.hidden_required) - {profile.presenting.domain} <= set(hidden)
        for rule in pheno.conflicts:  # no conflicting pair survives
            assert not {rule.keep, rule.drop} <= set(hidden) | {profile.presenting.domain}


def test_conflicting_domains_never_co_occur_and_the_count_still_holds():
    # The design samples only conflict-free sets: the pair shares one slot (in proportion to the rates).
    options = [OptionalDomain(domain=d, probability=1.0, source="x") for d in
               ("generalized_anxiety", "panic", "insomnia", "alcohol_use", "mania", "hypomania")]
    pheno = _pheno(hidden_optional=options, hidden_count=(4, 4),
                   conflicts=[ConflictRule(keep="mania", drop="hypomania")])
    for seed in range(50):
        _, hidden = choose_domains(pheno, random.Random(seed))
        assert not {"mania", "hypomania"} <= set(hidden) and len(hidden) == 4


def test_conflict_with_the_presenting_domain_excludes_the_hidden_one():
    options = [OptionalDomain(domain=d, probability=0.9, source="x") for d in
               ("health_anxiety", "panic", "insomnia", "alcohol_use", "depression", "irritability")]
    pheno = _pheno(presenting=["somatic_symptoms"], hidden_optional=options,
                   conflicts=[ConflictRule(keep="somatic_symptoms", drop="health_anxiety")])
    for seed in range(50):
        presenting, hidden = choose_domains(pheno, random.Random(seed))
        assert presenting == "somatic_symptoms" and "health_anxiety" not in hidden


def test_low_cited_rates_still_give_four_or_five_hidden():
    options = [OptionalDomain(domain=d, probability=0.01, source="x") for d in
               ("generalized_anxiety", "panic", "insomnia", "alcohol_use", "irritability")]
    pheno = _pheno(hidden_optional=options)
    counts = Counter(len(choose_domains(pheno, random.Random(seed))[1]) for seed in range(200))
    assert set(counts) <= {4, 5} and counts[4] > 0 and counts[5] > 0


def test_a_fifth_slot_can_only_be_filled_by_the_remaining_domain():
    options = [OptionalDomain(domain="panic", probability=0.3, source="x")] + [
        OptionalDomain(domain=d, probability=1.0, source="x") for d in ("insomnia", "alcohol_use", "irritability")]
    pheno = _pheno(hidden_required=["generalized_anxiety"], hidden_optional=options, hidden_count=(4, 5))
    # 4 domains always drawn (design probability 1); panic fills the fifth slot when the count is 5
    draws = [choose_domains(pheno, random.Random(seed))[1] for seed in range(4000)]
    with_five = [h for h in draws if len(h) == 5]
    assert all("panic" in h for h in with_five)  # a target of 5 can only be met with panic


# ---------------------------------------------------------------- stages 3 and 4

def test_severity_follows_the_prior(catalog):
    domain = catalog.domains["depression"]  # mild 0.2, moderate 0.5, severe 0.3
    rng = random.Random("severity-test")
    counts = Counter(draw_severity(domain, rng) for _ in range(20_000))
    assert chisquare([counts["mild"], counts["moderate"], counts["severe"]], [4000, 10_000, 6000]).pvalue > 0.001


def test_symptom_count_is_severity_biased_with_the_diagnostic_minimum(catalog):
    depression = catalog.domains["depression"]  # min 5; mild 5-5, severe 6-8
    rng = random.Random(1)
    assert all(len(draw_symptoms(depression, "mild", set(), rng)) == 5 for _ in range(50))
    assert all(6 <= len(draw_symptoms(depression, "severe", set(), rng)) <= 8 for _ in range(50))
    alcohol = catalog.domains["alcohol_use"]  # 2-3 / 3-4 / 4-6, min 2
    sizes = {len(draw_symptoms(alcohol, "mild", set(), rng)) for _ in range(100)}
    assert sizes == {2, 3}


def test_a_shared_symptom_is_counted_in_one_domain_only(catalog):
    anxiety = catalog.domains["generalized_anxiety"]
    used = {"poor_sleep", "fatigue", "concentration", "irritable"}  # taken by depression and irritability
    for seed in range(50):
        picked = draw_symptoms(anxiety, "severe", used, random.Random(seed))
        assert not {anxiety.symptoms[i].id for i in picked} & used
        assert len(picked) >= anxiety.min_symptoms  # the 4 unshared symptoms still meet the minimum
    for index in range(300):
        profile = sample_profile(catalog, "anxious_depression", index, 5)
        ids = [sid for draw in [profile.presenting] + profile.hidden for sid in draw.symptom_ids]
        assert len(ids) == len(set(ids))


# ---------------------------------------------------------------- stage 5

def test_postpartum_and_late_life_prerequisites(catalog):
    for index in range(200):
        mother = sample_profile(catalog, "postpartum_intrusive", index, 2)
        assert mother.demographics.sex == "female" and mother.demographics.postpartum
        assert 3 <= mother.demographics.model_extra["weeks_postpartum"] <= 26
        elder = sample_profile(catalog, "late_life_depression", index, 2)
        assert elder.demographics.age >= 65
        if "cognitive_decline" in [elder.presenting.domain] + elder.hidden_domains:
            assert elder.demographics.age >= 60
        for profile in (mother, elder):
            assert 2 <= len(profile.life_context) <= 3 and len(set(profile.life_context)) == len(profile.life_context)
        assert elder.demographics.occupation not in ("university student", "on parental leave")
        assert "retired" not in mother.demographics.occupation


def test_a_profile_is_the_same_alone_or_in_a_batch(catalog):
    alone = sample_profile(catalog, "fep_mood", 42, 9)
    again = sample_profile(catalog, "fep_mood", 42, 9)
    assert alone == again and alone.profile_id == "P00042"
    assert sample_profile(catalog, "fep_mood", 42, 10) != alone


def test_trace_covers_stages_two_to_five(catalog):
    trace = Trace()
    sample_profile(catalog, "bipolar_masked", 0, 7, trace)
    assert set(trace.steps) == {2, 3, 4, 5}
    assert any(line.startswith("presenting: depression") for line in trace.steps[2])


# ---------------------------------------------------------------- stage 6 QC scoring

def test_symptom_score_verbatim_paraphrase_and_absent():
    symptom = "losing interest in things I used to enjoy"
    assert symptom_score(symptom, "Honestly I've been losing interest in things I used to enjoy.") == 100.0
    assert symptom_score(symptom, "I've lost interest in the things I used to enjoy, even music.") >= 85
    assert symptom_score("having sudden surges of intense fear out of nowhere",
                         "Out of nowhere I get these sudden surges of intense fear.") >= 85
    assert symptom_score(symptom, "I sleep fine and my appetite is normal.") < 60


def test_qc_domain_lists_the_missing_symptoms():
    draw = DomainDraw(domain="panic", severity="mild", symptom_ids=["a", "b"],
                      symptoms=["feeling my heart pound or race during those surges", "getting tingling or numbness in my hands or face"])
    scores, missing = qc_domain(draw, "I keep feeling my heart pounding or racing during those surges.")
    assert missing == [1] and scores["b"] < 85 <= scores["a"]
