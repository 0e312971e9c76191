"""The call ledger read back by hand-worked cases: a torn last line (a kill mid-write) is skipped, a request
whose answer never arrived is priced by the same request's later answer and weighted by the alias's billed
share of answer time (by count without latencies), a garbled 200 is billed, errors are not, cache hits are saved, never spent."""

from __future__ import annotations

import json
import warnings

import pytest

from intake_eval.core.calls import read_ledger


def sent(call, request, alias="doc", chars=400, estimate=0.5):
    return {"event": "sent", "call": call, "stage": "run", "role": "clinician", "alias": alias, "request": request,
            "attempt": 1, "prompt_chars": chars, "estimate_usd": estimate}


def answer(call, request, dollars, *, alias="doc", error=None, billed=True, known=True, cache_hit=False,
           retryable=False, latency=None):
    line = {"event": "answer", "call": call, "stage": "run", "role": "clinician", "alias": alias,
            "request": request, "attempt": 1, "status": 200, "error": error, "retryable": retryable,
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}, "dollars": dollars, "cost_known": known,
            "billed": billed, "cache_hit": cache_hit}
    if latency is not None:
        line["latency_s"] = latency
    return line


def write(path, lines, tail=""):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)


def test_hand_worked_ledger(tmp_path):
    path = tmp_path / "calls.jsonl"
    write(path, [
        sent("a", "r1"), answer("a", "r1", 0.10),                       # billed $0.10
        sent("b", "r2"), answer("b", "r2", 0.0, error="429", billed=False, retryable=True),  # a retry, not billed
        sent("c", "r2"), answer("c", "r2", 0.20),                       # billed $0.20
        sent("d", "r3"), answer("d", "r3", 0.0, error="bad_body", known=False, retryable=True),  # garbled 200
        sent("e", "r3"), answer("e", "r3", 0.30),                       # its retry: the garbled one cost $0.30 too
        sent("f", "r1"),                                                # killed in flight: same request as "a"
        answer("g", "r4", 0.05, cache_hit=True, billed=False),          # saved by the cache
    ], tail='{"event": "sent", "call": "h", "alias": "doc", "est')   # a torn last line
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        totals = read_ledger(path)
    assert totals is not None
    figures = totals.as_dict()
    # answers from the provider: 5, of which 4 billed → an unanswered request counts 4/5 of its twin's $0.10
    assert figures["billed_usd"] == pytest.approx(0.10 + 0.20 + 0.30 + 0.30 + 0.10 * 4 / 5)
    assert figures["billed_estimated_usd"] == pytest.approx(0.30 + 0.08)
    assert figures["billed_known"] is False
    assert figures["saved_by_cache_usd"] == pytest.approx(0.05)
    assert (figures["requests"], figures["retries"], figures["failed_attempts"], figures["unanswered"]) == (6, 2, 2, 1)
    assert figures["cache_hits"] == 1
    assert figures["by_alias"]["doc"]["failures_by_reason"] == {"429": 1, "bad_body": 1}


def test_a_request_caught_in_flight_is_weighted_by_the_billed_share_of_answer_time(tmp_path):
    # A kill catches a request in proportion to how long it is in flight: three billed answers of 2 s and
    # one 429 of 0.1 s make 6.0 of 6.1 answer-seconds billed (by count it would be 3 of 4).
    path = tmp_path / "calls.jsonl"
    write(path, [
        sent("a", "r1"), answer("a", "r1", 0.10, latency=2.0),
        sent("b", "r2"), answer("b", "r2", 0.0, error="429", billed=False, retryable=True, latency=0.1),
        sent("c", "r2"), answer("c", "r2", 0.10, latency=2.0),
        sent("d", "r3"), answer("d", "r3", 0.10, latency=2.0),
        sent("e", "r1"),                                                # killed in flight
    ])
    figures = read_ledger(path).as_dict()
    assert figures["billed_estimated_usd"] == pytest.approx(0.10 * 6.0 / 6.1)
    assert figures["billed_usd"] == pytest.approx(0.30 + 0.10 * 6.0 / 6.1)
    # a budget counts it in full
    assert read_ledger(path, unanswered_billed=True).billed_usd == pytest.approx(0.40)


def test_without_a_same_request_answer_the_alias_rate_per_character_prices_it(tmp_path):
    path = tmp_path / "calls.jsonl"
    write(path, [sent("a", "r1", chars=1000), answer("a", "r1", 0.10),
                 sent("b", "r9", chars=3000, estimate=9.0)])  # no answer, no twin: 3000 chars × $0.10/1000 chars
    assert read_ledger(path).billed_usd == pytest.approx(0.10 + 0.30)


def test_a_folder_without_a_ledger_has_no_billed_figure(tmp_path):
    assert read_ledger(tmp_path / "calls.jsonl") is None


def test_a_ledger_opened_on_a_folder_with_records_counts_what_they_cost_as_an_estimate(tmp_path):
    path = tmp_path / "calls.jsonl"
    write(path, [{"event": "opened", "records_cost_usd": 1.5, "cost_known": True}, sent("a", "r1"),
                 answer("a", "r1", 0.10)])
    totals = read_ledger(path)
    assert totals.billed_usd == pytest.approx(1.6) and totals.billed_known is False
    assert totals.as_dict()["by_alias"]["(before the call ledger)"]["billed_usd"] == pytest.approx(1.5)


def test_repeated_lines_count_once_and_an_unread_answer_is_priced_by_a_later_answer(tmp_path):
    path = tmp_path / "calls.jsonl"
    write(path, [
        sent("a", "r1", alias="late"),                                   # the first alias a sent line names
        answer("batch-1", "r9", 0.05), answer("batch-1", "r9", 0.05),    # a batch answer used again: one call
        sent("b", "r1"), answer("b", "r1", 0.0, error="timeout"),        # billed, unread: priced by r1's answer
        sent("b", "r1"),                                                 # its sent line again: one request
        answer("a", "r1", 0.30, alias="late"), answer("a", "r1", 0.30, alias="late"),
    ])
    totals = read_ledger(path)
    assert totals is not None
    assert list(totals.by_alias) == ["late", "doc"]  # as sent lines first name them
    doc, late = totals.by_alias["doc"], totals.by_alias["late"]
    assert (doc.requests, doc.answers, doc.unanswered) == (1, 2, 0)
    assert (late.requests, late.answers) == (1, 1)
    assert doc.billed_usd == pytest.approx(0.05 + 0.30) and doc.estimated_usd == pytest.approx(0.30)
    assert totals.billed_usd == pytest.approx(0.65)


def test_an_unread_request_is_priced_from_the_ledger_as_it_was_first_read(tmp_path):
    from intake_eval.core.ledger_read import _request_prices

    path = tmp_path / "calls.jsonl"
    write(path, [sent("p-1", "r1"), answer("p-1", "r1", 0.0, error="timeout"),
                 answer("p-2", "r1", 0.25, cache_hit=True), answer("p-3", "r1", 0.40)])
    first_read_end = len(path.read_bytes())
    with path.open("a") as ledger:  # a live stage appends after the first read
        ledger.write(json.dumps(answer("p-4", "r1", 9.0)) + "\n")
    assert _request_prices(path, {"r1"}, first_read_end) == {"r1": 0.40}  # billed beats the earlier cache hit
    assert _request_prices(path, {"r1"}, len(path.read_bytes())) == {"r1": 9.0}
    assert _request_prices(path, {"r2"}, len(path.read_bytes())) == {}


def test_the_second_read_parses_only_lines_that_may_answer_a_wanted_request():
    from intake_eval.core.ledger_read import _may_name

    wanted = {b"r1"}
    assert _may_name(b'{"event":"answer","request":"r1"}\n', wanted)
    assert _may_name(b'{"event": "answer", "request" : "r1"}\n', wanted)
    assert not _may_name(b'{"event":"answer","request":"r2","error":"bad_request"}\n', wanted)
    assert not _may_name(b'{"event":"opened"}\n', wanted)
    assert _may_name(b'{"event":"answer","request":"r\\"1"}\n', wanted)  # escaped: read by parsing it
    assert _may_name(b'{"meta":{"request":"r9"},"request":"r1"}\n', wanted)  # any field naming it
