"""Benchmark: offline domain classifier speed (classify calls per second).

    .venv/bin/python scripts/bench_classifier.py [--rounds 5] [--json-out FILE]

Classifies every utterance of the probe corpus and the labelled sets (tests/data/) once per round
and reports the best round's calls/s and mean µs per call, plus the one-off lexicon load time, the
one-off build of the nearest-example index (scikit-learn import included), the cost of one nearest-example
query (timed over every utterance the fallback would be asked about if the lexicon found nothing).
Single process, single thread: the figure is per core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from intake_eval.catalog.classifier import (  # noqa: E402
    classify,
    example_document,
    fallback_query,
    load_lexicon,
)
from intake_eval.catalog.neighbours import shipped_index  # noqa: E402
from tests.helpers.classifier_probes import load_probes  # noqa: E402

LABELLED = ["classifier_labelled.tsv", "classifier_heldout.tsv"]


def utterances() -> list[str]:
    texts = [probe.text for probe in load_probes()]
    for name in LABELLED:
        for line in (ROOT / "tests" / "data" / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                texts.append(line.split("\t")[-1])
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    load_lexicon.cache_clear()
    started = time.perf_counter()
    load_lexicon()
    load_seconds = time.perf_counter() - started
    shipped_index.cache_clear()
    started = time.perf_counter()
    shipped_index(example_document)
    index_seconds = time.perf_counter() - started
    queries = [query for text in utterances() if (query := fallback_query(text))]
    started = time.perf_counter()
    for query in queries:
        shipped_index(example_document).nearest(query)
    query_seconds = (time.perf_counter() - started) / len(queries)

    texts = utterances()
    best = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        for text in texts:
            classify(text)
        best = min(best, time.perf_counter() - started)
    result = {
        "utterances": len(texts),
        "rounds": args.rounds,
        "calls_per_second": round(len(texts) / best),
        "microseconds_per_call": round(best / len(texts) * 1e6, 1),
        "lexicon_load_ms": round(load_seconds * 1000, 1),
        "neighbour_index_build_ms": round(index_seconds * 1000, 1),
        "neighbour_query_microseconds": round(query_seconds * 1e6, 1),
        "neighbour_queries_timed": len(queries),
    }
    print(f"classify: {result['calls_per_second']} calls/s ({result['microseconds_per_call']} µs/call, "
          f"{len(texts)} utterances, best of {args.rounds}); lexicon load {result['lexicon_load_ms']} ms; "
          f"nearest-example index build {result['neighbour_index_build_ms']} ms, "
          f"{result['neighbour_query_microseconds']} µs per query ({len(queries)} queries)")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
