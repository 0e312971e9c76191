"""Links from the report's matrices to the transcript viewer, filtered to one cell.

A link is ``#transcript?<query>`` (or ``index.html?<query>#transcript`` from another page); the
viewer (assets/transcripts.js) reads the query on load and on every hash change, lists only the
conversations that match, names the active filter and lets the user clear it. Keys:
``clinician``, ``condition``, ``patient_mode`` (one arm), ``phenotype``, ``domain`` (a hidden domain
of the profile), ``alignment``, ``profile`` and ``scored=1`` (scored by the report's primary judge,
which is what the matrices' n counts).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

Arm = tuple[str, str, str]
FILTER_KEYS = ("clinician", "condition", "patient_mode", "phenotype", "domain", "alignment", "profile", "scored")


def query(**params: Any) -> str:
    """The viewer's filter as a URL query (keys in FILTER_KEYS; empty values left out)."""
    unknown = set(params) - set(FILTER_KEYS)
    if unknown:
        raise ValueError(f"not a viewer filter: {sorted(unknown)}")
    return urlencode([(key, str(params[key])) for key in FILTER_KEYS if params.get(key) not in (None, "")])


def viewer_link(**params: Any) -> str:
    """A link inside index.html to the transcript viewer filtered by ``params``."""
    return "#transcript?" + query(**params)


def arm_filter(arm: Arm) -> dict[str, str]:
    return {"clinician": arm[0], "condition": arm[1], "patient_mode": arm[2]}


def grid_links(rows: list[str], arms: list[Arm], counts: list[list[int | None]], key: str) -> list[list[str | None]]:
    """One link per non-empty cell of a rows × arms matrix, filtering by ``key`` = the row's id."""
    return [[viewer_link(**arm_filter(arm), **{key: row}, scored=1) if counts[i][j] else None
             for j, arm in enumerate(arms)] for i, row in enumerate(rows)]


def add_links(views: dict[str, Any]) -> None:
    """Give the matrix, domain heatmap, masking table and headline rows their viewer links (in place)."""
    arms = views["arms"]
    matrix, domains = views["matrix"], views["domains"]
    matrix["links"] = grid_links(matrix["phenotypes"], arms, matrix["counts"], "phenotype")
    domains["links"] = grid_links(domains["domains"], arms, domains["counts"], "domain")
    by_label = {views["arm_labels"][arm]: arm for arm in arms}
    for entry in matrix["masking"]:
        arm = by_label.get(entry["arm"])
        for kind in ("masked", "aligned"):
            entry[f"{kind}_link"] = (viewer_link(**arm_filter(arm), alignment=kind, scored=1)
                                     if arm is not None and entry[f"{kind}_n"] else None)
    for row in views["headline"]:
        arm = (row["clinician"], row["condition"], row["patient_mode"])
        row["link"] = viewer_link(**arm_filter(arm), scored=1) if row["n_scored"] else None
