"""A parsed catalog's identity: the same contents give the same hash wherever the files live (a
folder, a phenotype subset of another catalog, the run folder's copy). Part of the generate stage's
config, so the guard compares contents, not locations."""

from __future__ import annotations

from collections.abc import Iterable

from intake_eval.catalog.schema import ContextPools, Domain, Phenotype
from intake_eval.core.store import stable_hash


def catalog_content_hash(domains: Iterable[Domain], context: ContextPools, phenotypes: Iterable[Phenotype]) -> str:
    """16 hex of the domains (in file order), the context pools and the phenotypes (by id)."""
    content = {
        "domains": [d.model_dump(mode="json") for d in domains],
        "context": context.model_dump(mode="json"),
        "phenotypes": [p.model_dump(mode="json") for p in sorted(phenotypes, key=lambda p: p.id)],
    }
    return stable_hash(content)[:16]
