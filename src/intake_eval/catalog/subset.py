"""A catalog cut to some of its phenotypes (a study's ``phenotypes: [ids…]``): every domain stays
(hidden-domain pools name them), only the listed phenotypes are sampled. Its content hash is the
hash of what remains, so a subset equals a folder holding just those phenotype files."""

from __future__ import annotations

from collections.abc import Sequence

from intake_eval.catalog.identity import catalog_content_hash
from intake_eval.catalog.schema import Catalog
from intake_eval.core.errors import IntakeEvalError


def catalog_subset(catalog: Catalog, ids: Sequence[str], label: str = "phenotypes") -> Catalog:
    unknown = [pid for pid in ids if pid not in catalog.phenotypes]
    if unknown:
        raise IntakeEvalError(f"{label} unknown phenotype id{'s' if len(unknown) > 1 else ''} "
                              f"{', '.join(repr(pid) for pid in unknown)} (the catalog in {catalog.directory} has: "
                              f"{', '.join(catalog.phenotypes)})")
    kept = {pid: catalog.phenotypes[pid] for pid in sorted(set(ids))}
    return catalog.model_copy(update={
        "phenotypes": kept,
        "content_hash": catalog_content_hash(catalog.domains.values(), catalog.context, kept.values()),
    })
