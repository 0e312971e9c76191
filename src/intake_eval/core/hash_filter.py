"""A set of strings that can only say "maybe" or "certainly not" (a Bloom filter), about 12 bits a string, kept
as JSON and grown without knowing its size in advance.

A kept read of the call ledger (core/ledger_read) must know, for a request billed unread, whether an earlier
answer priced the same request, without holding every request hash (millions) or reading the ledger again
each time. "Certainly not" is exact, so the filter only decides when the ledger need not be read again; a
"maybe" that is wrong (≈ 1 % of them) costs that read, never a wrong figure.

Each string is hashed by BLAKE2b (stable across processes, unlike ``hash``); its 16 bytes give ``PROBES``
bit positions. The filter is a list of bit arrays, each full at its capacity; a full one is followed by one
twice as large (a scalable Bloom filter, Almeida et al. 2007), so the error rate stays near each array's own.
Written by hand: the filters on PyPI either fix their capacity up front or hash with Python's salted
``hash`` unless given a Python callback, which leaves nothing for them to speed up here.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

BITS_PER_ITEM = 12
PROBES = 4  # with 12 bits an item: ≈ 0.6 % false "maybe"s per array
FIRST_CAPACITY = 4096


class HashFilter:
    """Strings added; ``may_contain`` is False only for one never added."""

    def __init__(self) -> None:
        self._arrays: list[tuple[int, bytearray]] = []  # (capacity, bits)
        self._count = 0  # items added to the last array

    @staticmethod
    def _positions(text: str, bits: int) -> list[int]:
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        return [int.from_bytes(digest[4 * n:4 * n + 4], "little") % bits for n in range(PROBES)]

    def add(self, text: str) -> None:
        if not self._arrays or self._count >= self._arrays[-1][0]:
            capacity = FIRST_CAPACITY if not self._arrays else 2 * self._arrays[-1][0]
            self._arrays.append((capacity, bytearray((capacity * BITS_PER_ITEM + 7) // 8)))
            self._count = 0
        capacity, array = self._arrays[-1]
        for position in self._positions(text, len(array) * 8):
            array[position >> 3] |= 1 << (position & 7)
        self._count += 1

    def may_contain(self, text: str) -> bool:
        for _capacity, array in self._arrays:
            if all(array[position >> 3] >> (position & 7) & 1 for position in self._positions(text, len(array) * 8)):
                return True
        return False

    def as_json(self) -> dict[str, Any]:
        return {"count": self._count,
                "arrays": [[capacity, base64.b64encode(array).decode("ascii")] for capacity, array in self._arrays]}

    @classmethod
    def from_json(cls, value: Any) -> HashFilter:
        kept = cls()
        kept._count = int(value["count"])
        kept._arrays = [(int(capacity), bytearray(base64.b64decode(text))) for capacity, text in value["arrays"]]
        return kept
