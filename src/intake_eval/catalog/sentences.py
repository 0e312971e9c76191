"""Text as the classifier reads it: lower-cased, apostrophes removed, split into sentences."""

from __future__ import annotations

import re

_APOSTROPHES = re.compile(r"['’‘`´]")
_SPACES = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\s*\n+\s*|\s+(?=[-–—]\s)")
_DASHES = ("-", "–", "—")
_LEADING_PUNCT = re.compile(r"^[\s\"“”(\-–—*•:,]+")
# Contractions whose apostrophe-free spelling is another word ("we're" -> "were").
_AMBIGUOUS_CONTRACTIONS = re.compile(r"\bwe['’](re|ll)\b")


def normalize(text: str) -> str:
    text = _AMBIGUOUS_CONTRACTIONS.sub(lambda m: "we are" if m.group(1) == "re" else "we will", text.lower())
    return _SPACES.sub(" ", _APOSTROPHES.sub("", text)).strip()


def split_clauses(text: str) -> list[tuple[str, bool]]:
    """(normalized sentence, whether a dash opened it); a dash starting a new clause also splits
    ("That sounds hard — how's your sleep?")."""
    parts = _SENTENCE_END.split(normalize(text))
    return [(cleaned, part.lstrip().startswith(_DASHES)) for part in parts
            if (cleaned := _LEADING_PUNCT.sub("", part).strip())]


def split_sentences(text: str) -> list[str]:
    return [sentence for sentence, _ in split_clauses(text)]
