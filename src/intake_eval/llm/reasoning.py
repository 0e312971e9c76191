"""Keep a reasoning model's thinking apart from the utterance the other participant sees.

Providers deliver reasoning in one of four shapes: a ``reasoning_content`` field (DeepSeek,
Together, vLLM), a ``reasoning`` field (OpenRouter, newer vLLM), ``<think>…</think>`` inline in
the content (Qwen 3 served raw), or only the closing tag (``…</think>``) when the chat template
already opened the block in the prompt. A block that never closes means the model was cut off
while still thinking: the visible answer is empty.
"""

from __future__ import annotations

import re

_THINK_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_OPEN = re.compile(r"<think>", re.IGNORECASE)
_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def split_reasoning(content: str | None, *reasoning_fields: str | None) -> tuple[str, str | None]:
    """(visible text, reasoning or None) from a message's content and its reasoning fields."""
    text = content or ""
    parts = [field.strip() for field in reasoning_fields if field and field.strip()]

    # An unopened closing tag: everything before the last </think> was reasoning.
    closes = list(_CLOSE.finditer(text))
    if closes and not _OPEN.search(text[: closes[0].start()]):
        parts.append(text[: closes[0].start()].strip())
        text = text[closes[0].end():]

    def keep(match: re.Match[str]) -> str:
        parts.append(match.group(1).strip())
        return ""

    text = _THINK_BLOCK.sub(keep, text)
    # A block still open at the end was cut off mid-thought: none of it is visible.
    dangling = _OPEN.search(text)
    if dangling:
        parts.append(text[dangling.end():].strip())
        text = text[: dangling.start()]
    text = _CLOSE.sub("", text)  # stray closers left by malformed output

    reasoning = "\n\n".join(part for part in parts if part)
    return text.strip(), (reasoning or None)
