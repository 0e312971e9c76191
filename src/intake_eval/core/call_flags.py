"""Two flags per call id (sent, answered) for a reader of the call ledger, held in about a byte a call.

A ledger of a large study names millions of calls; a dict of call id → flags would hold a string and a
slot per call (≈ 130 bytes). The ledger's own ids are ``<process prefix>-<n>``, ``n`` counting up from 1
within one process (llm/ledger.py), so each prefix keeps one ``bytearray`` indexed by ``n``. Any other
id (a batch answer's ``batch-<provider id>``, a hand-written ledger's) is held in a dict as it is.
"""

from __future__ import annotations

import base64
from typing import Any

SENT, ANSWERED = 1, 2


class CallFlags:
    """call id → an int of ``SENT | ANSWERED`` bits (0 for an id never marked)."""

    def __init__(self) -> None:
        self._counted: dict[str, bytearray] = {}  # process prefix → flags indexed by the call's number
        self._other: dict[Any, int] = {}

    @staticmethod
    def _split(call: Any) -> tuple[str, int] | None:
        if not isinstance(call, str):
            return None
        prefix, _, number = call.rpartition("-")
        # only plain decimal numbers: "07" or "+7" would name a different id than 7
        if not prefix or not number.isdigit() or not number.isascii() or number != str(int(number)):
            return None
        return prefix, int(number)

    def get(self, call: Any) -> int:
        split = self._split(call)
        if split is None:
            return self._other.get(call, 0)
        flags = self._counted.get(split[0])
        return flags[split[1]] if flags is not None and split[1] < len(flags) else 0

    def mark(self, call: Any, bits: int) -> int:
        """Add ``bits`` to the call's flags; returns the flags it had before."""
        split = self._split(call)
        if split is None:
            before = self._other.get(call, 0)
            self._other[call] = before | bits
            return before
        prefix, number = split
        flags = self._counted.setdefault(prefix, bytearray())
        if number >= len(flags):
            flags.extend(bytes(max(number + 1 - len(flags), len(flags) // 2)))  # amortised growth
        before = flags[number]
        flags[number] = before | bits
        return before

    def as_json(self) -> dict[str, Any]:
        """JSON-shaped (a kept read of the ledger): each prefix's flags base64-encoded, other ids as pairs."""
        return {"counted": [[prefix, base64.b64encode(flags).decode("ascii")] for prefix, flags in self._counted.items()],
                "other": [[call, bits] for call, bits in self._other.items()]}

    @classmethod
    def from_json(cls, value: Any) -> CallFlags:
        flags = cls()
        flags._counted = {prefix: bytearray(base64.b64decode(text)) for prefix, text in value["counted"]}
        flags._other = {call: int(bits) for call, bits in value["other"]}
        return flags
