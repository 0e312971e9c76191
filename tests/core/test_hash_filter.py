"""The hash filter never says "certainly not" of a string added, says "maybe" of few others, and keeps both
through its JSON form while it grows."""

from __future__ import annotations

import json

from intake_eval.core.hash_filter import FIRST_CAPACITY, HashFilter


def test_no_string_added_is_denied_and_few_others_pass_through_growth_and_json() -> None:
    kept = HashFilter()
    added = [f"request-{n:x}" for n in range(10 * FIRST_CAPACITY)]  # past three doublings
    for text in added:
        kept.add(text)
    again = HashFilter.from_json(json.loads(json.dumps(kept.as_json())))
    assert all(again.may_contain(text) for text in added)
    others = [f"other-{n:x}" for n in range(20000)]
    false_maybes = sum(again.may_contain(text) for text in others)
    assert false_maybes < 0.03 * len(others)  # four arrays of ≈ 0.6 % each
    assert not HashFilter().may_contain("anything")


def test_adding_after_a_restore_goes_on_in_the_last_array() -> None:
    kept = HashFilter()
    kept.add("a")
    again = HashFilter.from_json(kept.as_json())
    again.add("b")
    assert again.may_contain("a") and again.may_contain("b")
    assert len(again.as_json()["arrays"]) == 1 and again.as_json()["count"] == 2
