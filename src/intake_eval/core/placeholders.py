"""Template placeholders copied from a prompt's example instead of an answer.

A model that cannot do the task (or a small one under a grammar) often returns the example's
shape with its placeholders: ``"..."``, ``"…"``, ``"<one sentence>"``, ``"<why …>"``, or the name of
the type (``"string"``). Such a value is schema-valid and means nothing, so validators treat it
as invalid output and send their one repair request. ``written_text`` is the schema for a
free-text answer that keeps a grammar-constrained model from producing one in the first place
(it must start with a letter or digit, carries no angle brackets, and is bounded, so a model that
starts repeating itself still closes its JSON before max_tokens).
"""

from __future__ import annotations

import re

_TEMPLATE = re.compile(r"^<[^<>]+>$")  # the whole value is an angle-bracket template: <one sentence>
_NO_WORDS = re.compile(r"^[\W_]*$")  # only dots, ellipses, dashes, brackets…
_TYPE_NAMES = frozenset({"string", "str", "text", "type", "value", "your answer", "answer here", "tbd", "todo",
                         "lorem ipsum", "example"})


def is_placeholder(value: str) -> bool:
    """True for a template placeholder (an empty string is not one: callers decide whether empty is allowed)."""
    text = value.strip().strip("\"'`").strip()
    if not text:
        return False
    if _NO_WORDS.match(text) or _TEMPLATE.match(text):
        return True
    if text.lower() in _TYPE_NAMES:
        return True
    # "[...]", "(…)", "<area id>, ...": the value is nothing but placeholders and punctuation
    return _NO_WORDS.match(re.sub(r"<[^<>]*>|\.\.\.|…", "", text)) is not None


def placeholder_problem(field: str, value: str, *, allow_empty: bool = True) -> str | None:
    """One line naming the field when its value is empty (and that is not allowed) or a placeholder."""
    if not value.strip():
        return None if allow_empty else f"{field} is empty"
    if is_placeholder(value):
        shown = value.strip()
        shown = shown if len(shown) <= 40 else shown[:40] + "…"
        return f"{field} is a placeholder ({shown!r}) copied from the example, not an answer"
    return None


def written_text(max_chars: int) -> dict[str, object]:
    """JSON schema of a free-text answer: non-empty, bounded, not a placeholder. The pattern also
    excludes double quotes, backslashes and control characters: a grammar built from it emits the
    characters raw, so a newline it allowed would be a raw newline inside the JSON string."""
    return {"type": "string", "minLength": 1, "maxLength": max_chars,
            "pattern": f'^[A-Za-z0-9][^"\\\\<>\\x00-\\x1f]{{0,{max_chars - 1}}}$'}
