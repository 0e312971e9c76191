"""The classifier probe corpus (tests/data/classifier_probes.tsv): loading, the seeded tuning /
held-out split, and per-domain recall and specificity.

The split was made once, on the corpus as first written (round 1): a round-1 item is held out when
sha256(SPLIT_SEED + id) falls in the top HELD_OUT_SHARE of the hash range. Items added in later
rounds, while tuning, are tuning items, so the held-out part never grows or changes.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from intake_eval.catalog.classifier import normalize

CORPUS = Path(__file__).resolve().parents[1] / "data" / "classifier_probes.tsv"
SPLIT_SEED = "classifier-probes-v1:"
HELD_OUT_SHARE = 0.4
COLUMNS = ["id", "text", "expected", "kind", "instrument", "style", "round"]


@dataclass(frozen=True)
class Probe:
    id: str
    text: str
    expected: frozenset[str]
    kind: str  # qualifying | non_qualifying
    instrument: str
    style: str
    round: int

    @property
    def part(self) -> str:
        return "held_out" if self.round == 1 and is_held_out(self.id) else "tuning"


def is_held_out(item_id: str) -> bool:
    digest = hashlib.sha256((SPLIT_SEED + item_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 >= 1 - HELD_OUT_SHARE


def load_probes(path: Path = CORPUS) -> list[Probe]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    if reader.fieldnames != COLUMNS:
        raise ValueError(f"{path.name}: header must be {COLUMNS}, got {reader.fieldnames}")
    probes = []
    for row in reader:
        expected = frozenset(d for d in row["expected"].split(",") if d)
        probes.append(
            Probe(row["id"], row["text"], expected, row["kind"], row["instrument"], row["style"], int(row["round"]))
        )
    return probes


@dataclass
class Recall:
    items: int = 0
    found: int = 0

    @property
    def rate(self) -> float | None:
        return self.found / self.items if self.items else None


@dataclass
class PartScores:
    per_domain: dict[str, Recall]
    overall: Recall  # over (item, expected domain) pairs
    items_fully_found: Recall  # qualifying items whose every expected domain was returned
    specificity: Recall  # non-qualifying items that returned no domain
    # Item-level results stay out of the repr, so a failing held-out assertion never prints them.
    misses: list[tuple[Probe, list[str]]] = field(repr=False)  # (probe, domains returned)
    false_alarms: list[tuple[Probe, list[str]]] = field(repr=False)  # non-qualifying items given a domain


def score(probes: Iterable[Probe], domains_of: Callable[[str], list[str]], domain_ids: Iterable[str]) -> PartScores:
    per_domain = {domain: Recall() for domain in sorted(domain_ids)}
    overall, fully, specificity = Recall(), Recall(), Recall()
    misses, false_alarms = [], []
    for probe in probes:
        got = set(domains_of(probe.text))
        if probe.kind == "non_qualifying":
            specificity.items += 1
            specificity.found += not got
            if got:
                false_alarms.append((probe, sorted(got)))
            continue
        for domain in probe.expected:
            hit = domain in got
            per_domain[domain].items += 1
            per_domain[domain].found += hit
            overall.items += 1
            overall.found += hit
        fully.items += 1
        fully.found += probe.expected <= got
        if not probe.expected <= got:
            misses.append((probe, sorted(got)))
    return PartScores(per_domain, overall, fully, specificity, misses, false_alarms)


def _cell(recall: Recall) -> str:
    return "   -  " if recall.rate is None else f"{recall.rate:6.2f}"


def recall_table(tuning: PartScores, held_out: PartScores) -> str:
    """domain × (items, recall tuning, recall held-out), then the overall figures."""
    rows = [f"{'domain':26} {'items':>5} {'tune n':>6} {'tune':>6} {'held n':>6} {'held':>6}"]
    for domain in tuning.per_domain:
        t, h = tuning.per_domain[domain], held_out.per_domain[domain]
        rows.append(f"{domain:26} {t.items + h.items:5d} {t.items:6d} {_cell(t)} {h.items:6d} {_cell(h)}")
    for label, t, h in [
        ("overall recall (pairs)", tuning.overall, held_out.overall),
        ("items fully found", tuning.items_fully_found, held_out.items_fully_found),
        ("specificity (non-qual.)", tuning.specificity, held_out.specificity),
    ]:
        rows.append(f"{label:26} {t.items + h.items:5d} {t.items:6d} {_cell(t)} {h.items:6d} {_cell(h)}")
    return "\n".join(rows)


def shippable_examples(probes: list[Probe]) -> list[Probe]:
    """The tuning items the classifier may ship as nearest examples: all but those holding a held-out
    item's wording (a compound question containing a shorter held-out one)."""
    held_out = [normalize(probe.text) for probe in probes if probe.part == "held_out"]
    return [
        probe for probe in probes
        if probe.part == "tuning" and not any(text in normalize(probe.text) for text in held_out)
    ]
