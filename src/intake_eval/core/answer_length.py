"""The longest answer a JSON schema allows, in tokens, so a grammar-constrained answer fits its cap.

Under constrained decoding a small model often spends every string's whole maxLength (it repeats
itself until the bound closes the string). If ``max_tokens`` is below the schema's longest answer,
the answer is cut before its closing braces and fails validation however well the grammar held.
Content is counted at one token per character (ASCII text never takes more); each gap where the
grammar allows whitespace gets two tokens (a newline and one run of indentation, which tokenisers
merge), which is how models indent JSON, though llama.cpp's grammar would allow up to 21 characters.
"""

from __future__ import annotations

import json
from typing import Any

WHITESPACE_PER_GAP = 2  # tokens: a newline and an indentation run
_SCALAR = {"boolean": len("false"), "null": len("null"), "integer": 20, "number": 32}


class UnboundedSchema(ValueError):
    """The schema allows answers of any length (a string without maxLength, an array without maxItems)."""


def longest_answer_tokens(schema: dict[str, Any]) -> int:
    """The tokens a JSON text valid under ``schema`` can take at most, whitespace included."""
    return _longest(schema) + WHITESPACE_PER_GAP


def _longest(schema: dict[str, Any]) -> int:
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"]) + WHITESPACE_PER_GAP
    kind = schema.get("type")
    if isinstance(kind, list):
        return max(_longest({**schema, "type": one}) for one in kind)
    if kind == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False:
            raise UnboundedSchema("an object that allows extra properties has no longest answer")
        # per property: its quoted key, a colon, its value, a comma, and the gaps between them
        inner = sum(len(json.dumps(key)) + 2 + 2 * WHITESPACE_PER_GAP + _longest(value)
                    for key, value in properties.items())
        return 2 + 2 * WHITESPACE_PER_GAP + inner
    if kind == "array":
        if "maxItems" not in schema:
            raise UnboundedSchema("an array without maxItems has no longest answer")
        item = _longest(schema.get("items", {}))
        return 2 + 2 * WHITESPACE_PER_GAP + schema["maxItems"] * (item + 1 + WHITESPACE_PER_GAP)
    if kind == "string":
        if "maxLength" not in schema:
            raise UnboundedSchema("a string without maxLength has no longest answer")
        # no escapes counted: written_text's pattern forbids quotes and backslashes
        return schema["maxLength"] + 2 + WHITESPACE_PER_GAP
    if kind in _SCALAR:
        return _SCALAR[kind] + WHITESPACE_PER_GAP
    raise UnboundedSchema(f"no longest answer for a schema of type {kind!r}")
