"""The cited / design / realised table of optional hidden domains (``<run>/sampling_rates.csv``).

One row per phenotype × optional domain. ``design`` is the design inclusion probability among
profiles where the domain is not the presenting one: each design is built per phenotype and
presenting domain (one lift per pair, ``phenotypes rates`` shows them), and the presenting domain
is drawn uniformly from the phenotype's pool, so the row's design is the mean of the designs of
the presenting domains other than this domain. ``realised`` = ``n_included`` / ``n_eligible``
over the profiles of that phenotype whose presenting domain is not this domain.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from intake_eval.generate.design import catalog_rates

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

RATE_COLUMNS = ("phenotype", "domain", "source", "cited", "design", "lift", "realised", "n_eligible", "n_included",
                "hidden_count")


def rate_table(catalog: "Catalog", hidden_count: str,
               drawn: Iterable[tuple[str, str, Sequence[str]]]) -> list[dict[str, object]]:
    """Rows of the table from (phenotype, presenting domain, hidden domains) of every profile."""
    per_phenotype: dict[str, list[tuple[str, set[str]]]] = {}
    for phenotype, presenting, hidden in drawn:
        per_phenotype.setdefault(phenotype, []).append((presenting, set(hidden)))
    rows = []
    for rate in catalog_rates(catalog, hidden_count):
        profiles = [hidden for presenting, hidden in per_phenotype.get(rate.phenotype, []) if presenting != rate.domain]
        included = sum(rate.domain in hidden for hidden in profiles)
        rows.append({
            "phenotype": rate.phenotype, "domain": rate.domain, "source": rate.source,
            "cited": round(rate.cited, 6), "design": round(rate.design, 6),
            "lift": round(rate.lift, 6) if rate.lift is not None else "",
            "realised": round(included / len(profiles), 6) if profiles else "",
            "n_eligible": len(profiles), "n_included": included, "hidden_count": hidden_count,
        })
    return rows


def rates_csv(rows: list[dict[str, object]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=RATE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
