"""Cross-validate the classifier's nearest-example fallback on the probe corpus's TUNING part only.

    .venv/bin/python scripts/tune_classifier_fallback.py [--json-out FILE]

Leave one round out: each tuning round's items are matched against an index of the other rounds'
items (rounds were written one after another, so a round's wordings are new to the others, as
unseen wordings are to the shipped examples). The fallback is scored ON ITS OWN, as if the lexicon
had found nothing (the lexicon was tuned on every round, so lexicon plus fallback would score ~1.0
here and say nothing): recall over (item, expected domain) pairs, specificity over the non-qualifying
items, and the precision of the domains it returns. For each n-gram setting and number of neighbours
k it prints the best similarity threshold, then the chosen setting: the most recall with specificity
1.0 at that threshold AND at every threshold down to MARGIN below it, because the edge is sharp (one
grid step lower often lets a non-qualifying line through) and a fresh line may sit slightly nearer an
example than any tuning line does. Ties go to precision, then the higher threshold.
The held-out part is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from intake_eval.catalog.classifier import example_document, fallback_query  # noqa: E402
from intake_eval.catalog.neighbours import Example, NeighbourIndex, decide  # noqa: E402
from tests.helpers.classifier_probes import load_probes, shippable_examples  # noqa: E402

WORD_NGRAMS = [None, (1, 1), (1, 2)]
CHAR_NGRAMS = [None, (2, 4), (3, 5), (2, 5)]
NEIGHBOURS = [1, 3, 5]
THRESHOLDS = [round(0.20 + 0.02 * step, 2) for step in range(36)]  # 0.20 .. 0.90
MARGIN = 0.04


def evaluate(probes, word, char, neighbours) -> list[tuple[object, dict[int, tuple[float, frozenset[str]]] | None]]:
    """(probe, k -> (top similarity, domains the fallback gives)) for every tuning probe; None when the
    fallback would not answer it (advice, statements, small talk)."""
    documents = {probe.text: example_document(probe.text) for probe in probes}
    out = []
    for round_ in sorted({probe.round for probe in probes}):
        train = [Example(p.id, p.text, p.expected) for p in probes if p.round != round_]
        index = NeighbourIndex(train, documents.__getitem__, word, char)
        for probe in (p for p in probes if p.round == round_):
            query = fallback_query(probe.text)
            if query is None:
                out.append((probe, None))
                continue
            similarities = index.similarities(query)
            found = {k: decide(similarities, train, k, 0.0) for k in neighbours}
            out.append((probe, {k: (nearest.similarity, frozenset(nearest.domains)) for k, nearest in found.items()}))
    return out


def sweep(rows, k):
    """Per threshold: (recall, specificity, precision, pairs found, pairs, false alarms, non-qualifying)."""
    table = {}
    for threshold in THRESHOLDS:
        found = pairs = alarms = nonqual = returned = correct = 0
        for probe, results in rows:
            similarity, domains = results[k] if results else (0.0, frozenset())
            given = domains if similarity >= threshold else frozenset()
            if probe.kind == "non_qualifying":
                nonqual += 1
                alarms += bool(given)
                continue
            pairs += len(probe.expected)
            found += len(probe.expected & given)
            returned += len(given)
            correct += len(probe.expected & given)
        table[threshold] = (found / pairs, 1 - alarms / nonqual, correct / returned if returned else 1.0,
                            found, pairs, alarms, nonqual)
    return table


def ngrams(span: tuple[int, int] | None) -> str:
    return "-" if span is None else f"{span[0]}-{span[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    probes = shippable_examples(load_probes())  # the tuning items the classifier ships
    eligible = sum(fallback_query(probe.text) is not None for probe in probes if probe.kind == "qualifying")
    print(f"tuning part: {len(probes)} items, rounds {sorted({p.round for p in probes})}; "
          f"{eligible} qualifying items are questions the fallback would answer")
    print(f"{'word':>6} {'char':>6} {'k':>2} {'thresh':>6} {'recall':>7} {'spec':>5} {'prec':>5}  pairs found  "
          f"| recall at 0.40 / 0.50 / 0.60 (spec)")
    rows_out, best = [], None
    for word in WORD_NGRAMS:
        for char in CHAR_NGRAMS:
            if word is None and char is None:
                continue
            rows = evaluate(probes, word, char, NEIGHBOURS)
            for k in NEIGHBOURS:
                table = sweep(rows, k)
                safe = [t for t in THRESHOLDS if all(table[x][1] == 1.0 for x in THRESHOLDS if x >= t - MARGIN - 1e-9)]
                t = min(safe, key=lambda t: (-table[t][0], -table[t][2], -t)) if safe else None
                extra = " / ".join(f"{table[x][0]:.3f} ({table[x][1]:.2f})" for x in (0.4, 0.5, 0.6))
                setting = f"{ngrams(word):>6} {ngrams(char):>6} {k:2d}"
                if t is None:
                    print(f"{setting}      -   no threshold keeps specificity 1.0       | {extra}")
                    continue
                recall, spec, prec, found, pairs, _, _ = table[t]
                print(f"{setting} {t:6.2f} {recall:7.3f} {spec:5.2f} {prec:5.2f}  {found:5d}/{pairs}  | {extra}")
                rows_out.append({"word": word, "char": char, "k": k, "threshold": t, "recall": recall,
                                 "specificity": spec, "precision": prec})
                key = (recall, prec, t)
                if best is None or key > best[0]:
                    best = (key, rows_out[-1])
    print(f"chosen (specificity 1.0 down to {MARGIN} below the threshold): {best[1]}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"table": rows_out, "chosen": best[1]}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
