"""Checks of the symptoms' ``describes`` declarations (meaning-level dedup, see generate.dedup).

A symptom's ``describes`` names known domains, each once; a shared symptom id (the same symptom in
two domains) declares the same domains everywhere, and may name one of its own domains (irritable,
in generalized_anxiety and irritability, describes irritability).
"""

from __future__ import annotations

import difflib

from intake_eval.catalog.schema import DomainCatalog


def check_describes(catalog: DomainCatalog, where: str, problems: list[str]) -> None:
    """Append one line per problem (file, domain, symptom) to ``problems``."""
    domain_ids = sorted(domain.id for domain in catalog.domains)
    first: dict[str, tuple[list[str], str]] = {}  # symptom id -> (describes, first domain)
    for domain in catalog.domains:
        for symptom in domain.symptoms:
            at = f"{where}: domains[{domain.id}].symptoms[{symptom.id}].describes"
            for target in sorted({d for d in symptom.describes if symptom.describes.count(d) > 1}):
                problems.append(f"{at}: '{target}' is listed more than once")
            for target in symptom.describes:
                if target not in domain_ids:
                    close = difflib.get_close_matches(target, domain_ids, n=1)
                    hint = f" (did you mean '{close[0]}'?)" if close else ""
                    problems.append(f"{at}: unknown domain id '{target}'{hint}")
            declared, owner = first.setdefault(symptom.id, (sorted(symptom.describes), domain.id))
            if declared != sorted(symptom.describes):
                problems.append(f"{at}: differs from the same symptom id in domain '{owner}' "
                                "(a shared id means the same symptom; declare the same domains)")
