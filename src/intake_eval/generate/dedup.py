"""Meaning-level dedup: which of a domain's symptoms a profile may give it.

A symptom can describe another domain as well as its own (the catalog's ``describes``: poor sleep
→ insomnia). Within a profile no domain — the presenting one included — is given a symptom that
describes one of the profile's hidden domains other than itself, so nothing the patient says about
one domain (the opening above all) discloses a hidden one. Shared symptom ids (the same symptom in
two domains) are, as before, counted in the first domain drawn only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from intake_eval.generate.design import HIDDEN_COUNTS, DesignError, design_for

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog, Domain


def describes_hidden(domain: "Domain", hidden: set[str]) -> set[str]:
    """Ids of the domain's symptoms that describe a hidden domain other than the domain itself."""
    others = hidden - {domain.id}
    return {symptom.id for symptom in domain.symptoms if others.intersection(symptom.describes)}


def symptoms_needed(domain: "Domain") -> int:
    """The fewest symptoms a draw may end with: the diagnostic minimum, else the mild band's low end."""
    return domain.min_symptoms or domain.symptom_counts["mild"][0]


def check_symptom_supply(catalog: "Catalog", modes: tuple[str, ...] = HIDDEN_COUNTS) -> list[str]:
    """One line per phenotype × presenting domain × hidden set the design can draw in which some
    domain could be left with fewer symptoms than it needs, in the worst case (every earlier domain
    took every shared symptom it was allowed)."""
    problems: set[str] = set()
    for pheno in catalog.phenotypes.values():
        for presenting in pheno.presenting:
            for mode in modes:
                try:
                    design = design_for(pheno, presenting, mode)
                except DesignError:
                    continue  # reported by check_designs
                order = list(dict.fromkeys(list(pheno.hidden_required) + [o.domain for o in pheno.hidden_optional]))
                for sample, _, probability in design.samples:
                    if probability <= 0:
                        continue
                    hidden = sorted([*design.required, *sample], key=order.index)
                    hidden_set = set(hidden)
                    taken: set[str] = set()
                    for domain_id in [presenting, *hidden]:
                        domain = catalog.domains[domain_id]
                        blocked = describes_hidden(domain, hidden_set)
                        free = [s for s in domain.symptoms if s.id not in taken and s.id not in blocked]
                        if len(free) < symptoms_needed(domain):
                            problems.add(
                                f"phenotype {pheno.id} (presenting {presenting}): {domain_id} can be left with "
                                f"{len(free)} of the {symptoms_needed(domain)} symptoms it needs when "
                                f"{', '.join(hidden)} are hidden (shared symptoms taken, or symptoms that describe "
                                "a hidden domain)")
                        taken.update(s.id for s in free)
    return sorted(problems)
