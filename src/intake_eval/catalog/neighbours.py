"""Nearest-example fallback for the offline classifier: when the lexicon finds no domain in a question,
the domains of the most similar shipped example clinician question.

The examples (``data/classifier_examples.tsv``) are the tuning part of the classifier probe corpus,
qualifying questions with their domains and non-qualifying lines (open invitations, empathy,
summaries, advice) with none; the held-out part is never shipped, nor a tuning item that contains a
held-out wording (scripts/export_classifier_examples.py writes the file; tests/catalog/test_neighbours.py checks). Utterances and examples are compared
by TF-IDF cosine over word and character n-grams of their asking sentences. The nearest example
decides: it must be at least ``MIN_SIMILARITY`` alike and be a qualifying one, so a wording closest
to an open invitation unlocks nothing. Of the nearest example's domains, those that also win a
similarity-weighted vote of the ``NEIGHBOURS`` nearest examples (half the weight) are the answer, so one
odd neighbour cannot unlock a domain and the example shown always carries the domains given.

Settings chosen by leave-one-round-out cross-validation on the tuning part only
(scripts/tune_classifier_fallback.py: each round's items are matched against the other 18 rounds'
examples; the most recall of the fallback on its own, subject to no non-qualifying item unlocking
anything at the threshold or up to 0.04 below it): word 1-2-grams plus character 2-5-grams (``char_wb``),
5 neighbours, similarity at least 0.22. CV estimate for the fallback on its own (as if the lexicon had
found nothing): recall 0.63 of (item, domain) pairs (2182 of 3440), precision 0.94 of the domains it
gives, specificity 1.0 (411 non-qualifying items, none unlocking anything down to similarity 0.18). It only ever runs on what the lexicon missed.

Deterministic: a fixed vocabulary, ties broken by example order. scikit-learn is imported on the
first fallback and the index is built once.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

EXAMPLES_PATH = Path(__file__).resolve().parents[1] / "data" / "classifier_examples.tsv"
HEADER = [
    "# Examples for the classifier's nearest-example fallback: the TUNING part of tests/data/classifier_probes.tsv",
    "# only (the held-out part is never shipped, nor a tuning item containing a held-out wording).",
    "# Written by scripts/export_classifier_examples.py; do not edit.",
    "# Columns: id, text, domains (comma-separated; empty for a line that must unlock nothing).",
    "id\ttext\tdomains",
]
WORD_NGRAMS = (1, 2)
CHAR_NGRAMS = (2, 5)
NEIGHBOURS = 5
MIN_SIMILARITY = 0.22


@dataclass(frozen=True)
class Example:
    id: str
    text: str
    domains: frozenset[str]


@dataclass(frozen=True)
class Nearest:
    text: str  # the nearest example
    similarity: float
    domains: tuple[str, ...]  # what the fallback answers; empty when it answers nothing

    def explain(self) -> str:
        shown = f"nearest example: '{self.text}' (similarity {self.similarity:.2f})"
        return shown if self.domains else f"{shown}; unlocks nothing"


def load_examples(path: Path = EXAMPLES_PATH) -> list[Example]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    return [Example(row["id"], row["text"], frozenset(d for d in row["domains"].split(",") if d)) for row in reader]


class NeighbourIndex:
    """TF-IDF vectors of the examples' documents (what ``prepare`` makes of each example's text).

    scikit-learn fits the vocabulary and weights; a query is weighted here the same way (sublinear tf
    times idf, each n-gram kind L2-normalised, then the whole), because a one-document ``transform`` costs
    milliseconds, and compared with only the example columns of its n-grams."""

    def __init__(
        self,
        examples: Sequence[Example],
        prepare: Callable[[str], str],
        word_ngrams: tuple[int, int] | None = WORD_NGRAMS,
        char_ngrams: tuple[int, int] | None = CHAR_NGRAMS,
    ) -> None:
        from scipy.sparse import hstack  # type: ignore[import-untyped]  # scipy ships no type stubs
        from sklearn.feature_extraction.text import TfidfVectorizer  # type: ignore[import-untyped]  # no stubs
        from sklearn.preprocessing import normalize  # type: ignore[import-untyped]  # scikit-learn ships no stubs

        self.examples = list(examples)
        vectorizers = []
        if word_ngrams:
            vectorizers.append(TfidfVectorizer(ngram_range=word_ngrams, sublinear_tf=True, lowercase=False))
        if char_ngrams:
            vectorizers.append(
                TfidfVectorizer(analyzer="char_wb", ngram_range=char_ngrams, sublinear_tf=True, lowercase=False)
            )
        documents = [prepare(example.text) for example in self.examples]
        parts = [vectorizer.fit_transform(documents) for vectorizer in vectorizers]
        self._columns = normalize(hstack(parts).tocsr()).tocsc()  # examples × n-grams, sliced by n-gram
        self._blocks = []  # (analyzer, vocabulary, idf, first column) per n-gram kind
        offset = 0
        for vectorizer in vectorizers:
            self._blocks.append((vectorizer.build_analyzer(), vectorizer.vocabulary_, vectorizer.idf_, offset))
            offset += len(vectorizer.vocabulary_)

    def _vector(self, document: str):
        """(columns, weights) of one document's unit TF-IDF vector."""
        import numpy

        columns, weights = [], []
        for analyzer, vocabulary, idf, offset in self._blocks:
            counts: dict[int, int] = {}
            for gram in analyzer(document):
                column = vocabulary.get(gram)
                if column is not None:
                    counts[column] = counts.get(column, 0) + 1
            if counts:
                found = numpy.fromiter(counts, dtype=numpy.int64, count=len(counts))
                weight = (1.0 + numpy.log(numpy.fromiter(counts.values(), dtype=float, count=len(counts)))) * idf[found]
                columns.append(found + offset)
                weights.append(weight / numpy.linalg.norm(weight))
        if not columns:
            return numpy.zeros(0, dtype=numpy.int64), numpy.zeros(0)
        weight = numpy.concatenate(weights)
        return numpy.concatenate(columns), weight / numpy.linalg.norm(weight)

    def similarities(self, document: str):
        """Cosine similarity of one prepared document to every example (a numpy array)."""
        import numpy

        columns, weights = self._vector(document)
        if not len(columns):
            return numpy.zeros(len(self.examples))
        return self._columns[:, columns] @ weights

    def nearest(
        self, document: str, *, neighbours: int = NEIGHBOURS, min_similarity: float = MIN_SIMILARITY
    ) -> Nearest | None:
        """The nearest example and the domains it gives, or None when no example is similar enough."""
        similarities = self.similarities(document)
        return decide(similarities, self.examples, neighbours, min_similarity)


def decide(similarities, examples: Sequence[Example], neighbours: int, min_similarity: float) -> Nearest | None:
    import numpy

    count = min(neighbours, len(examples))
    nearest = numpy.argpartition(-similarities, count - 1)[:count]
    order = nearest[numpy.lexsort((nearest, -similarities[nearest]))]  # most similar first, then example order
    best = examples[order[0]]
    similarity = float(similarities[order[0]])
    if similarity < min_similarity:
        return None
    if not best.domains:  # nearest to an open invitation, empathy line, summary or advice
        return Nearest(best.text, similarity, ())
    weights: dict[str, float] = {}
    for position in order:
        for domain in examples[position].domains:
            weights[domain] = weights.get(domain, 0.0) + float(similarities[position])
    total = float(sum(similarities[position] for position in order))
    return Nearest(best.text, similarity, tuple(sorted(d for d in best.domains if weights[d] >= total / 2)))


@lru_cache(maxsize=4)
def shipped_index(prepare: Callable[[str], str]) -> NeighbourIndex:
    """The index over the shipped examples, built once per ``prepare``."""
    return NeighbourIndex(load_examples(), prepare)
