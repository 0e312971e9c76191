"""The ledger reader's call flags: the same answers as a dict of call id → flags, for the ledger's own ids
(``<prefix>-<n>``), ids that only look numbered ("07", "+7"), batch ids and non-text ids; and about a byte
a call for the ledger's own ids."""

from __future__ import annotations

import random
import tracemalloc

from intake_eval.core.call_flags import ANSWERED, SENT, CallFlags


def test_call_flags_answer_like_a_dict_of_flags():
    rng = random.Random(7)
    ids = [f"123-abcd{p}-{n}" for p in range(3) for n in range(1, 60)]
    ids += ["batch-resp_1", "batch-resp_2", "x-07", "x-7", "x-+7", "x-٣", "plain", "-5", None, 5]
    reference: dict[object, int] = {}
    flags = CallFlags()
    for _ in range(3000):
        call, bits = rng.choice(ids), rng.choice((SENT, ANSWERED))
        assert flags.get(call) == reference.get(call, 0)
        assert flags.mark(call, bits) == reference.get(call, 0)
        reference[call] = reference.get(call, 0) | bits
    assert all(flags.get(call) == reference.get(call, 0) for call in ids)
    assert flags.get("123-abcd0-100000") == 0  # past the end of its prefix's flags


def test_the_ledgers_own_ids_take_about_a_byte_a_call():
    flags = CallFlags()
    calls = 200_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for number in range(1, calls + 1):
            flags.mark(f"4242-0badcafe-{number}", SENT)
            flags.mark(f"4242-0badcafe-{number}", ANSWERED)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 3 * calls  # a dict of the ids would hold ≈ 130 bytes a call
    assert flags.get("4242-0badcafe-1") == SENT | ANSWERED
