"""Generation stages 1-5: phenotype → domain set → severity → symptoms → demographics.

Pure and seeded. Every profile draws from its own random streams, named by (seed, index, stage)
and seeded with strings (never hash()), so profile P00042 is the same whether it is generated
alone, in a batch of 108, or on resume after a crash; and changing one stage's logic leaves the
other stages' draws untouched. Passing a ``Trace`` records what was drawn and why (``--explain``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from intake_eval.catalog.schema import (
    SEVERITIES,
    Catalog,
    ContextItem,
    Domain,
    Phenotype,
    Severity,
    Sex,
    allowed,
)
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Demographics, DomainDraw, Profile
from intake_eval.generate.dedup import describes_hidden
from intake_eval.generate.design import design_for

Mode = Literal["stratified", "weighted"]
LIFE_CONTEXT_COUNT = (2, 3)
STAGE_TITLES = {
    1: "Phenotype sampling",
    2: "Domain set sampling",
    3: "Severity per domain",
    4: "Symptom sampling",
    5: "Demographics + life context",
    6: "Render + QC",
}


def profile_id(index: int) -> str:
    return f"P{index:05d}"


def stream(seed: int, index: int | str, stage: str) -> random.Random:
    """An independent, reproducible random stream for one profile and one stage."""
    return random.Random(f"intake-eval:{seed}:{index}:{stage}")


@dataclass
class Trace:
    """What each stage drew and why, for one profile (``generate --explain``)."""

    steps: dict[int, list[str]] = field(default_factory=dict)

    def note(self, stage: int, text: str) -> None:
        self.steps.setdefault(stage, []).append(text)


# ---------------------------------------------------------------- stage 1

def plan_phenotypes(catalog: Catalog, n: int, mode: Mode, seed: int) -> list[str]:
    """The phenotype of every profile index 0..n-1.

    stratified: equal coverage (n // P each; the remainder goes to a seeded subset), in a seeded
    shuffled order. weighted: independent draws from the population prior (prefix-stable: the
    first k entries do not depend on n).
    """
    ids = list(catalog.phenotypes)
    if n < 0:
        raise IntakeEvalError(f"--n must be at least 0 (got {n})")
    if mode == "stratified":
        rng = stream(seed, "plan", "stratified")
        base, extra = divmod(n, len(ids))
        bonus = set(rng.sample(ids, extra))
        plan = [pid for pid in ids for _ in range(base + (pid in bonus))]
        rng.shuffle(plan)
        return plan
    if mode == "weighted":
        rng = stream(seed, "plan", "weighted")
        weights = [catalog.phenotypes[pid].population_weight for pid in ids]
        return rng.choices(ids, weights=weights, k=n)
    raise IntakeEvalError(f"unknown sampling mode '{mode}' (use stratified or weighted)")


def explain_plan(catalog: Catalog, plan: list[str], mode: Mode, index: int, trace: Trace) -> None:
    chosen = plan[index]
    if mode == "stratified":
        counts = {pid: plan.count(pid) for pid in catalog.phenotypes}
        trace.note(1, f"stratified: {len(plan)} profiles over {len(counts)} phenotypes "
                      f"({min(counts.values())}-{max(counts.values())} each), in a seeded shuffled order")
    else:
        total = sum(p.population_weight for p in catalog.phenotypes.values())
        weight = catalog.phenotypes[chosen].population_weight
        trace.note(1, f"weighted: population prior, '{chosen}' has weight {weight:g} of {total:g} ({weight / total:.1%})")
    pheno = catalog.phenotypes[chosen]
    trace.note(1, f"index {index} → {chosen}: {pheno.name} [{pheno.alignment}]")


# ---------------------------------------------------------------- stage 2

def choose_domains(pheno: Phenotype, rng: random.Random, trace: Trace | None = None,
                   hidden_count: str = "seed") -> tuple[str, list[str]]:
    """1 presenting domain (uniform over the phenotype's pool) + the hidden domains of the
    phenotype's sampling design (generate.design): required ones, plus optional ones drawn with known
    inclusion probabilities. ``seed``: 4-5 hidden in all; ``literature``: each optional domain at
    its cited rate."""
    presenting = rng.choice(pheno.presenting)
    design = design_for(pheno, presenting, hidden_count)
    low, high = pheno.hidden_count
    count, drawn = design.draw(rng, low, high)
    order = list(dict.fromkeys(list(pheno.hidden_required) + [o.domain for o in pheno.hidden_optional]))
    hidden = sorted([*design.required, *drawn], key=order.index)
    if trace is not None:
        trace.note(2, f"presenting: {presenting} (pool: {', '.join(pheno.presenting)}, each equally likely)")
        excluded = [o.domain for o in pheno.hidden_optional if o.domain not in design.units and o.domain != presenting]
        if design.required:
            trace.note(2, f"required: {', '.join(design.required)}")
        if excluded:
            trace.note(2, f"excluded by a conflict rule: {', '.join(excluded)}")
        if count is not None:  # seed mode: a target count was drawn
            trace.note(2, f"hidden count {count} (uniform over {low}-{high}): {count - len(design.required)} optional "
                          f"slots, filled by conditional Poisson sampling (lift {design.lift:.3f} over the cited rates)")
        else:
            trace.note(2, "literature mode: each optional domain at its cited rate (Poisson sampling, at least one hidden)")
        for domain in design.units:
            mark = "drawn" if domain in drawn else "not drawn"
            trace.note(2, f"{domain}: cited {design.cited[domain]:g}, design {design.inclusion[domain]:.3f} → {mark}")
        trace.note(2, f"hidden ({len(hidden)}): {', '.join(hidden)}")
    return presenting, hidden


# ---------------------------------------------------------------- stage 3

def draw_severity(domain: Domain, rng: random.Random, trace: Trace | None = None) -> Severity:
    draw = rng.random()
    cumulative = 0.0
    chosen = SEVERITIES[-1]
    for band in SEVERITIES:
        cumulative += domain.severity_prior.get(band, 0.0)
        if draw < cumulative:
            chosen = band
            break
    if trace is not None:
        prior = " / ".join(f"{band} {domain.severity_prior.get(band, 0):g}" for band in SEVERITIES)
        trace.note(3, f"{domain.id}: prior {prior}, u={draw:.3f} → {chosen}")
    return chosen


# ---------------------------------------------------------------- stage 4

def draw_symptoms(domain: Domain, severity: Severity, used: set[str], rng: random.Random,
                  trace: Trace | None = None, blocked: frozenset[str] | set[str] = frozenset()) -> list[int]:
    """Indices into domain.symptoms. Count from the severity band, raised to min_symptoms for
    diagnostic (core) domains, never reusing a symptom another domain of this profile already holds,
    and never one in ``blocked`` (symptoms that describe a hidden domain: generate.dedup)."""
    available = [i for i, s in enumerate(domain.symptoms) if s.id not in used and s.id not in blocked]
    low, high = domain.symptom_counts[severity]
    count = rng.randint(low, high)
    note = f"band {severity} → {low}-{high}, drew {count}"
    if domain.kind == "core" and domain.min_symptoms and count < domain.min_symptoms:
        count = domain.min_symptoms
        note += f", raised to the diagnostic minimum {count}"
    shared = sum(1 for s in domain.symptoms if s.id in used)
    describing = sum(1 for s in domain.symptoms if s.id in blocked and s.id not in used)
    if count > len(available):
        count = len(available)
        note += f", capped at {count} available"
    chosen = sorted(rng.sample(available, count))
    if trace is not None:
        dedup = f"; {shared} shared symptom(s) already counted in another domain" if shared else ""
        if describing:
            dedup += f"; {describing} symptom(s) left out because they describe a hidden domain"
        texts = "; ".join(domain.symptoms[i].text for i in chosen)
        trace.note(4, f"{domain.id}: {note}{dedup}: {texts}")
    return chosen


# ---------------------------------------------------------------- stage 5

_FITTING_CACHE: dict[tuple[int, int, str, bool], tuple[list[ContextItem], tuple[str, ...]]] = {}


def _fitting(items: list[ContextItem], age: int, sex: str, postpartum: bool) -> tuple[str, ...]:
    """Texts of the pool items whose prerequisites hold (memoised: 10,000 profiles reuse a few hundred
    keys). The entry keeps the pool list alive and is checked by identity, so an id is never reused."""
    key = (id(items), age, sex, postpartum)
    entry = _FITTING_CACHE.get(key)
    if entry is None or entry[0] is not items:
        if len(_FITTING_CACHE) > 50_000:
            _FITTING_CACHE.clear()
        entry = (items, tuple(item.text for item in items if allowed(item, age, sex, postpartum)))
        _FITTING_CACHE[key] = entry
    return entry[1]


def age_sex_bounds(pheno: Phenotype, domains: list[Domain]) -> tuple[int, int, dict[Sex, float]]:
    """The phenotype's age range and sex weights narrowed by every drawn domain's prerequisites."""
    low, high = pheno.demographics.age
    weights: dict[Sex, float] = dict(pheno.demographics.sex_weights)
    if pheno.demographics.postpartum:
        weights = {"female": 1.0}
    for domain in domains:
        req = domain.prerequisites
        low = max(low, req.min_age or low)
        high = min(high, req.max_age or high)
        if req.sex is not None:
            weights = {req.sex: weights.get(req.sex, 0.0)}
    weights = {sex: w for sex, w in weights.items() if w > 0}
    if low > high or not weights:
        raise IntakeEvalError(
            f"phenotype {pheno.id}: demographics cannot satisfy the prerequisites of {', '.join(d.id for d in domains)}; "
            "run `intake-eval phenotypes validate`"
        )
    return low, high, weights


def draw_demographics(catalog: Catalog, pheno: Phenotype, domains: list[Domain], rng: random.Random,
                      trace: Trace | None = None) -> tuple[Demographics, list[str]]:
    low, high, weights = age_sex_bounds(pheno, domains)
    sexes = sorted(weights)
    sex = rng.choices(sexes, weights=[weights[s] for s in sexes], k=1)[0]
    age = rng.randint(low, high)
    postpartum = pheno.demographics.postpartum
    pools = catalog.context

    def pick(items: list[ContextItem], what: str) -> str:
        fitting = _fitting(items, age, sex, postpartum)
        if not fitting:
            raise IntakeEvalError(f"catalog context.{what}: no option fits age {age}, {sex}, postpartum={postpartum}")
        return rng.choice(fitting)

    name = rng.choice(pools.names[sex])
    occupations = pheno.demographics.occupations
    occupation = rng.choice(occupations) if occupations else pick(pools.occupations, "occupations")
    relationship = pick(pools.relationships, "relationships")
    extra = {}
    if postpartum:
        extra["weeks_postpartum"] = rng.randint(*pheno.demographics.weeks_postpartum)
    demographics = Demographics(age=age, sex=sex, occupation=occupation, relationship=relationship, name=name,
                                postpartum=postpartum, **extra)
    wanted = rng.randint(*LIFE_CONTEXT_COUNT)
    own = list(pheno.demographics.life_context)
    seeds = rng.sample(own, min(len(own), rng.randint(1, 2))) if own else []
    general = [text for text in _fitting(pools.life_context, age, sex, postpartum) if text not in seeds]
    seeds += rng.sample(general, min(len(general), wanted - len(seeds)))
    if trace is not None:
        needs = [f"{d.id} needs age >= {d.prerequisites.min_age}" for d in domains if d.prerequisites.min_age]
        bounds = f"age {low}-{high}" + (f" ({'; '.join(needs)})" if needs else "")
        trace.note(5, f"{bounds}, sex weights {weights} → {name}, {age}, {sex}"
                      + (f", {extra['weeks_postpartum']} weeks postpartum" if postpartum else ""))
        trace.note(5, f"occupation: {occupation}; relationship: {relationship}")
        trace.note(5, f"life context ({len(seeds)}): " + "; ".join(seeds))
    return demographics, seeds


# ---------------------------------------------------------------- stages 2-5 together

def sample_profile(catalog: Catalog, phenotype_id: str, index: int, seed: int, trace: Trace | None = None,
                   hidden_count: str = "seed") -> Profile:
    """A profile without phenomenology (stage 6 fills that in)."""
    pheno = catalog.phenotypes[phenotype_id]
    presenting, hidden = choose_domains(pheno, stream(seed, index, "domains"), trace, hidden_count)
    severity_rng = stream(seed, index, "severity")
    symptom_rng = stream(seed, index, "symptoms")
    used: set[str] = set()
    draws = []
    for domain_id in [presenting] + hidden:
        domain = catalog.domains[domain_id]
        severity = draw_severity(domain, severity_rng, trace)
        picked = draw_symptoms(domain, severity, used, symptom_rng, trace, describes_hidden(domain, set(hidden)))
        symptoms = [domain.symptoms[i] for i in picked]
        used.update(s.id for s in symptoms)
        draws.append(DomainDraw(domain=domain_id, label=domain.label, severity=severity,
                                symptoms=[s.text for s in symptoms], symptom_ids=[s.id for s in symptoms]))
    domains = [catalog.domains[d] for d in [presenting] + hidden]
    demographics, life_context = draw_demographics(catalog, pheno, domains, stream(seed, index, "demographics"), trace)
    return Profile(
        profile_id=profile_id(index),
        index=index,
        seed=seed,
        phenotype=phenotype_id,
        alignment=pheno.alignment,
        presenting=draws[0],
        hidden=draws[1:],
        demographics=demographics,
        life_context=life_context,
    )
