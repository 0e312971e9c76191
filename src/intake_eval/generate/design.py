"""The sampling design for a profile's hidden domains: which optional domains join, with known
inclusion probabilities.

For one phenotype and one presenting domain the hidden set is the required domains (minus the
presenting one) plus a sample S of the *eligible* optional domains: the optional pool minus the
presenting domain, minus domains a conflict rule removes against the presenting domain or a
required one. Every design below is a maximum-entropy design on the allowed samples (those no
conflict rule forbids), P(S) ∝ q(size group of S) · Π_{i∈S} w_i, whose working odds w_i are
calibrated so the inclusion probabilities P(i ∈ S) equal the stated targets exactly. Within one
size this is conditional Poisson sampling (Hájek 1964; Chen, Dempster & Liu 1994, "Weighted finite
population sampling to maximize entropy", Biometrika 81:457-469; Tillé 2006, *Sampling
Algorithms*, §5.6 — R ``sampling::UPmaxentropy``). The pools here are small (at most a few hundred
allowed samples), so every probability is computed by exact enumeration and a sample is drawn
from the enumerated distribution with one uniform number.

``seed`` (the default, the seed study's 1 presenting + 4-5 hidden): the hidden count K is drawn
uniformly from the phenotype's ``hidden_count`` range (4 or 5, probability ½ each), raised to the
number of required domains; the open slots m = K − required are filled by a conditional Poisson
sample of size m. The working odds are shared by both sizes, so the design is a mixture over the
count, and its inclusion probabilities are the mixture's: π_i = Σ_m P(m) · P(i ∈ S | m). The
targets are π_i = min(1, c·p_i) for the cited rates p_i, with the one lift c per phenotype and
presenting domain solved from Σ π_i = E[m] (capped units at 1, the rest rescaled).

``literature``: every optional domain at exactly its cited rate, so the count varies (where a
conflict rule excludes a domain for one presenting domain, its rate with the other presenting
domains is raised so that over all profiles where it is not presenting it is still the cited one;
rates of conflicting domains that add up to more than can co-occur are scaled down together to
what can, and ``phenotypes rates`` shows the design rate below the cited one).
With no conflict rule and at least one required domain this is plain Poisson sampling
(independent draws). A profile needs at least one hidden domain, so when nothing is required the
empty sample is excluded, and a conflict rule excludes samples holding both of its domains; the
working odds are then calibrated so the inclusion probabilities are still exactly the cited rates
(Poisson sampling conditioned on a non-empty, conflict-free sample).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from intake_eval.catalog.schema import Phenotype
from intake_eval.core.errors import IntakeEvalError
from intake_eval.generate.maxent import allowed_sample, fit_max_entropy

if TYPE_CHECKING:
    import random

    from intake_eval.catalog.schema import Catalog

HIDDEN_COUNTS: tuple[str, ...] = ("seed", "literature")


class DesignError(IntakeEvalError):
    """A phenotype whose stated rates no design of this kind can realise."""


@dataclass(frozen=True)
class HiddenSetDesign:
    """The design for one phenotype and presenting domain. ``samples`` lists every allowed
    sample of optional domains (pool order) with its probability and its size group."""

    phenotype: str
    presenting: str
    mode: str
    required: tuple[str, ...]
    units: tuple[str, ...]  # the eligible optional domains, pool order
    cited: dict[str, float]  # every optional domain of the pool, eligible or not
    inclusion: dict[str, float]  # design inclusion probability per optional domain (0 when not eligible)
    lift: float  # design ÷ cited of the uncapped domains (seed); 1 in literature mode
    count_probability: dict[int, float]  # P(number of hidden domains = k)
    samples: tuple[tuple[tuple[str, ...], int, float], ...]  # (sample, size group, probability)

    def draw(self, rng: "random.Random", low: int, high: int) -> tuple[int | None, tuple[str, ...]]:
        """(target hidden count or None in literature mode, the optional domains drawn)."""
        if self.mode == "seed":
            count = max(rng.randint(low, high), len(self.required))
            group = count - len(self.required)
            candidates = [(sample, p) for sample, size, p in self.samples if size == group]
        else:
            count = None
            candidates = [(sample, p) for sample, _, p in self.samples]
        total = math.fsum(p for _, p in candidates)
        point = rng.random() * total
        running = 0.0
        for sample, p in candidates:
            running += p
            if point < running:
                return count, sample
        return count, candidates[-1][0]  # point == total up to rounding


# ---------------------------------------------------------------- eligibility

def eligible_units(pheno: Phenotype, presenting: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required hidden domains, eligible optional domains) for one presenting domain."""
    clash = {r.drop for r in pheno.conflicts if r.keep == presenting} | {
        r.keep for r in pheno.conflicts if r.drop == presenting}
    required = tuple(d for d in pheno.hidden_required if d != presenting and d not in clash)
    dropped_by_required = {r.drop for r in pheno.conflicts if r.keep in required}
    units = tuple(o.domain for o in pheno.hidden_optional
                  if o.domain != presenting and o.domain not in clash and o.domain not in dropped_by_required
                  and o.domain not in required)
    return required, units


def presenting_compensation(pheno: Phenotype, domain: str) -> float:
    """How much a literature-mode rate is raised where the domain is eligible, so that among all
    profiles where it is not presenting it still occurs at its cited rate: (presenting domains other
    than it) ÷ (those with which it is eligible). 1 unless a conflict rule excludes it for some
    presenting domain (somatic_symptoms presenting excludes health_anxiety: 2 ÷ 1)."""
    others = [p for p in pheno.presenting if p != domain]
    eligible = [p for p in others if domain in eligible_units(pheno, p)[1]]
    return len(others) / len(eligible) if eligible else 0.0


def conflict_groups(units: tuple[str, ...], pheno: Phenotype) -> list[tuple[int, ...]]:
    """The eligible units split into groups joined by conflict rules (connected components);
    most groups are single domains."""
    parent = list(range(len(units)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for rule in pheno.conflicts:
        if rule.keep in units and rule.drop in units:
            parent[root(units.index(rule.drop))] = root(units.index(rule.keep))
    groups: dict[int, list[int]] = {}
    for i in range(len(units)):
        groups.setdefault(root(i), []).append(i)
    return [tuple(members) for members in groups.values()]


def group_capacity(members: tuple[int, ...], forbidden: list[tuple[int, int]]) -> int:
    """The most members of one group a sample can hold together."""
    for size in range(len(members), 0, -1):
        if any(allowed_sample(sample, forbidden) for sample in itertools.combinations(members, size)):
            return size
    return 0


def capped_proportional(rates: list[float], total: float, groups: list[tuple[int, ...]],
                        capacity: dict[tuple[int, ...], int]) -> tuple[list[float], float]:
    """π_i = c·p_i with Σπ = total, where a group's sum may not exceed its capacity (a single
    domain: 1; two conflicting domains: 1, since they never co-occur): a group at its capacity is
    fixed there (its members share it in proportion to their rates) and the others rescaled, until
    no group exceeds it. Returns the targets and the lift c of the uncapped groups."""
    if total <= 0:
        return [0.0] * len(rates), 0.0
    weight = {g: math.fsum(rates[i] for i in g) for g in groups}
    room = sum(capacity[g] for g in groups if weight[g] > 0)
    if total > room + 1e-12:
        raise ValueError(f"{total:g} open slots on average but the eligible domains fill at most {room}")
    capped: set[tuple[int, ...]] = {g for g in groups if weight[g] <= 0}  # a zero rate stays at 0
    lift = 0.0
    while True:
        free = math.fsum(weight[g] for g in groups if g not in capped)
        if free <= 0:
            break  # every group is full
        lift = (total - sum(capacity[g] for g in capped if weight[g] > 0)) / free
        newly = {g for g in groups if g not in capped and lift * weight[g] >= capacity[g] - 1e-12}
        if not newly:
            break
        capped |= newly
    targets = [0.0] * len(rates)
    for g in groups:
        for i in g:
            if weight[g] <= 0:
                targets[i] = 0.0
            else:
                targets[i] = capacity[g] * rates[i] / weight[g] if g in capped else lift * rates[i]
    return targets, lift


# ---------------------------------------------------------------- one phenotype, one presenting domain

def _hidden_counts(pheno: Phenotype, required: int) -> dict[int, float]:
    """P(open slots = m) in seed mode: K uniform on the hidden_count range, at least the required."""
    low, high = pheno.hidden_count
    share = 1.0 / (high - low + 1)
    slots: dict[int, float] = {}
    for count in range(low, high + 1):
        m = max(count, required) - required
        slots[m] = slots.get(m, 0.0) + share
    return slots


def build_design(pheno: Phenotype, presenting: str, mode: str) -> HiddenSetDesign:
    required, units = eligible_units(pheno, presenting)
    cited = {o.domain: o.probability for o in pheno.hidden_optional}
    rates = [cited[u] for u in units]
    where = f"phenotype {pheno.id} (presenting {presenting}, --hidden-count {mode})"
    forbidden = [(units.index(r.keep), units.index(r.drop)) for r in pheno.conflicts
                 if r.keep in units and r.drop in units]
    groups = conflict_groups(units, pheno)
    capacity = {g: group_capacity(g, forbidden) for g in groups}
    if mode == "seed":
        slots = _hidden_counts(pheno, len(required))
        try:
            targets, lift = capped_proportional(rates, math.fsum(m * p for m, p in slots.items()), groups, capacity)
        except ValueError as error:
            raise DesignError(f"{where}: {error}") from None
        sizes, nonempty = slots, False
    elif mode == "literature":
        targets, lift = [cited[u] * presenting_compensation(pheno, u) for u in units], 1.0
        for g in groups:  # more than can co-occur: the group is scaled down to its capacity
            total = math.fsum(targets[i] for i in g)
            if total > capacity[g]:
                for i in g:
                    targets[i] *= capacity[g] / total
        sizes, nonempty = {-1: 1.0}, not required
    else:
        raise IntakeEvalError(f"--hidden-count must be seed or literature (got '{mode}')")
    exact = [(g, capacity[g]) for g in groups if math.isclose(math.fsum(targets[i] for i in g), capacity[g], abs_tol=1e-12)]
    exact += [((i,), 0) for i, t in enumerate(targets) if t <= 0]
    try:
        fitted = fit_max_entropy(targets, sizes, forbidden, nonempty, exact)
    except ValueError as error:
        raise DesignError(f"{where}: {error} (check the cited rates against the conflict rules and the hidden count)") from None
    samples = tuple((tuple(units[i] for i in sample), group, probability) for sample, group, probability in fitted)
    inclusion = {domain: 0.0 for domain in cited}
    counts: dict[int, float] = {}
    for sample, _, probability in samples:
        for domain in sample:
            inclusion[domain] += probability
        total = len(required) + len(sample)
        counts[total] = counts.get(total, 0.0) + probability
    return HiddenSetDesign(phenotype=pheno.id, presenting=presenting, mode=mode, required=required, units=units,
                           cited=cited, inclusion=inclusion, lift=lift, count_probability=dict(sorted(counts.items())),
                           samples=samples)


@lru_cache(maxsize=512)
def _cached(pheno_json: str, presenting: str, mode: str) -> HiddenSetDesign:
    return build_design(Phenotype.model_validate_json(pheno_json), presenting, mode)


def design_for(pheno: Phenotype, presenting: str, mode: str) -> HiddenSetDesign:
    """The (memoised) design: a phenotype's content, not its identity, is the key."""
    return _cached(pheno.model_dump_json(), presenting, mode)


def design_statement(mode: str) -> str:
    """The design in a methods section's words (``phenotypes rates`` prints it; a report may quote it)."""
    if mode == "seed":
        return (
            "Each profile has one presenting domain, drawn uniformly from its phenotype's presenting pool, and 4 or 5 "
            "hidden domains (the phenotype's hidden-count range, each count equally likely, never fewer than its "
            "required domains). Required "
            "domains are always hidden; the remaining slots are filled from the optional domains by conditional "
            "Poisson (maximum-entropy, fixed-size) sampling (Chen, Dempster & Liu, 1994), its working probabilities "
            "calibrated by exact enumeration so that each optional domain's inclusion probability, averaged over the "
            "two counts, is min(1, c·p): proportional to its cited co-occurrence rate p, with one factor c per "
            "phenotype and presenting domain chosen so that the inclusion probabilities sum to the expected number of "
            "open slots. Domains separated by a conflict rule never co-occur; where their scaled rates would sum above "
            "1, they share one slot in proportion to their cited rates.")
    return (
        "Each profile has one presenting domain, drawn uniformly from its phenotype's presenting pool. Required "
        "domains are always hidden and each optional domain is hidden with probability equal to its cited "
        "co-occurrence rate (Poisson sampling), so the number of hidden domains varies. Draws that would leave no "
        "hidden domain or hold two domains separated by a conflict rule are excluded, with the working probabilities "
        "recalibrated by exact enumeration so that inclusion probabilities still equal the cited rates (where a "
        "conflict rule excludes a domain for one presenting domain, its rate with the others is raised to keep its "
        "overall rate; conflicting rates that sum above 1 are scaled down together).")


# ---------------------------------------------------------------- per phenotype × optional domain

@dataclass(frozen=True)
class DomainRate:
    """One phenotype × optional domain: cited rate, design inclusion probability among profiles
    where the domain is not presenting (presenting domains are drawn uniformly from the pool, so
    this is the mean over the other presenting domains), and the per-presenting designs."""

    phenotype: str
    domain: str
    source: str
    cited: float
    design: float
    by_presenting: dict[str, float]  # presenting domain → design inclusion probability
    lift_by_presenting: dict[str, float]  # presenting domain → the lift of that design

    @property
    def lift(self) -> float | None:
        return self.design / self.cited if self.cited > 0 else None


def phenotype_rates(pheno: Phenotype, mode: str) -> list[DomainRate]:
    designs = {presenting: design_for(pheno, presenting, mode) for presenting in pheno.presenting}
    rows = []
    for option in pheno.hidden_optional:
        eligible = {p: d for p, d in designs.items() if p != option.domain}
        if not eligible:
            continue  # the only presenting domain: never hidden
        by_presenting = {p: d.inclusion[option.domain] for p, d in eligible.items()}
        rows.append(DomainRate(
            phenotype=pheno.id, domain=option.domain, source=option.source, cited=option.probability,
            design=math.fsum(by_presenting.values()) / len(by_presenting), by_presenting=by_presenting,
            lift_by_presenting={p: d.lift for p, d in eligible.items()}))
    return rows


def catalog_rates(catalog: "Catalog", mode: str) -> list[DomainRate]:
    return [row for pheno in catalog.phenotypes.values() for row in phenotype_rates(pheno, mode)]


def count_distribution(pheno: Phenotype, mode: str) -> dict[int, float]:
    """P(number of hidden domains = k) for a profile of this phenotype (presenting domain uniform)."""
    share = 1.0 / len(pheno.presenting)
    merged: dict[int, float] = {}
    for presenting in pheno.presenting:
        for count, p in design_for(pheno, presenting, mode).count_probability.items():
            merged[count] = merged.get(count, 0.0) + share * p
    return dict(sorted(merged.items()))


def check_designs(catalog: "Catalog", modes: tuple[str, ...] = HIDDEN_COUNTS) -> list[str]:
    """One line per phenotype × presenting domain × mode whose design cannot be built."""
    problems = []
    for pheno in catalog.phenotypes.values():
        for presenting in pheno.presenting:
            for mode in modes:
                try:
                    design_for(pheno, presenting, mode)
                except DesignError as error:
                    problems.append(str(error))
    return problems
