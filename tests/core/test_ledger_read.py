"""A read of the call ledger kept and resumed on its appended lines gives exactly what a read of the whole ledger
gives (every figure, every float bit), wherever the ledger was cut; ``status`` reads only the appended lines; a
request in flight in the process holding the folder's lock is unanswered, not billed."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from intake_eval.core import ledger_read
from intake_eval.core.calls import ledger_figures, read_ledger
from intake_eval.core.ledger_read import LedgerRead
from intake_eval.core.lines import LineSpan
from intake_eval.core.record_facts import FolderFacts
from intake_eval.core.run_lock import RunLock
from intake_eval.core.store import RunPaths
from tests.core.test_calls import answer, sent


def _ledger_lines() -> list[dict[str, Any]]:
    """Every kind of line the reader treats apart, with prices that do not sum exactly in binary."""
    lines: list[dict[str, Any]] = [{"event": "opened", "records_cost_usd": 0.07, "cost_known": True}]
    for n in range(1, 8):
        call, request = f"11-aa-{n}", f"r{n % 5}"
        lines.append(sent(call, request, alias=f"doc{n % 3}", chars=300 + n))
        if n % 4 == 0:
            lines.append(answer(call, request, 0.0, alias=f"doc{n % 3}", error="timeout", known=False, latency=2.0))
        elif n % 5 != 3:
            lines.append(answer(call, request, 0.1 * n + 0.01, alias=f"doc{n % 3}", latency=0.3 * n))
    lines += [sent("11-aa-3", "r3", alias="doc0"),  # a repeated sent line counts once
              answer("12-bb-1", "r1", 0.13, cache_hit=True, billed=False),
              answer("11-aa-2", "r2", 9.0, alias="doc2"),  # a second answer of one call: only the first counts
              sent("12-bb-2", "r4", alias="doc1"),  # in flight at the end (another process's)
              sent("13-cc-1", "r1", alias="doc1"),  # caught in flight, priced by r1's answers
              answer("11-aa-6", "r1", 0.5, alias="doc0"),  # a second answer: not a price
              answer("batch-x", "r3", 0.2, alias="doc0")]
    return lines


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _kept_and_resumed(state: LedgerRead) -> LedgerRead:
    """Through the store's JSON form (object keys sorted, as the store writes them)."""
    resumed = LedgerRead.from_json(json.loads(json.dumps(state.as_json(), sort_keys=True)))
    assert resumed is not None
    return resumed


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("in_flight", [None, "12-bb-"])
def test_a_read_resumed_at_any_line_gives_the_whole_reads_figures_exactly(tmp_path: Path, in_flight: str | None,
                                                                          kept: bool) -> None:
    path = tmp_path / "calls.jsonl"
    lines = _ledger_lines()
    _write(path, lines)
    whole = read_ledger(path, in_flight)
    assert whole is not None and whole.billed_usd > 0 and whole.as_dict()["unanswered"] >= 1
    ends = [0]
    for line in lines:
        ends.append(ends[-1] + len(json.dumps(line)) + 1)
    for cut in range(1, len(lines)):
        first = LedgerRead(kept=kept)
        first.read(path, LineSpan(0, 1, ends[cut]))
        first.figures(path, in_flight)  # a status at the cut: may look prices up, which the state then keeps
        state = _kept_and_resumed(first)
        state.read(path, LineSpan(ends[cut], cut + 1, None))
        resumed = state.figures(path, in_flight)
        assert resumed.as_dict() == whole.as_dict(), cut
        assert [calls.billed_usd for calls in resumed.by_alias.values()] == \
               [calls.billed_usd for calls in whole.by_alias.values()]  # the same floats, bit for bit


def test_a_state_that_is_not_one_is_refused() -> None:
    assert LedgerRead.from_json({"totals": {}}) is None
    assert LedgerRead.from_json(None) is None


def test_status_reads_only_the_appended_lines_and_equals_a_whole_read(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    paths = RunPaths(tmp_path)
    lines = _ledger_lines()
    _write(paths.calls, lines[:10])
    facts = FolderFacts(paths, [], keep=True)
    ledger_figures(paths, facts)
    facts.save()
    with paths.calls.open("a") as ledger:
        ledger.write("".join(json.dumps(line) + "\n" for line in lines[10:]))
    spans: list[LineSpan | None] = []
    real = ledger_read.iter_json_lines_at

    def counting(path: Path, stats: Any = None, model: Any = None, span: LineSpan | None = None) -> Any:
        spans.append(span)
        return real(path, stats, model, span)

    monkeypatch.setattr(ledger_read, "iter_json_lines_at", counting)
    folded = ledger_figures(paths, FolderFacts(paths, [], keep=False))
    assert [span.begin if span else 0 for span in spans] == [len("".join(json.dumps(line) + "\n"
                                                                         for line in lines[:10]))]
    whole = read_ledger(paths.calls)
    assert whole is not None and folded == json.loads(json.dumps(whole.as_dict()))


def test_a_half_written_last_line_counts_when_it_parses_and_is_read_again_next_time(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    lines = _ledger_lines()
    _write(paths.calls, lines[:6])
    facts = FolderFacts(paths, [], keep=True)
    ledger_figures(paths, facts)
    facts.save()
    with paths.calls.open("a") as ledger:
        ledger.write(json.dumps(lines[6]))  # no newline yet: a write under way
    facts = FolderFacts(paths, [], keep=True)
    assert ledger_figures(paths, facts) == json.loads(json.dumps(read_ledger(paths.calls).as_dict()))  # type: ignore[union-attr]
    facts.save()
    with paths.calls.open("a") as ledger:
        ledger.write("\n" + "".join(json.dumps(line) + "\n" for line in lines[7:]))
    assert ledger_figures(paths, FolderFacts(paths, [], keep=False)) == \
        json.loads(json.dumps(read_ledger(paths.calls).as_dict()))  # type: ignore[union-attr]


def test_a_rewritten_ledger_is_read_whole(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    lines = _ledger_lines()
    _write(paths.calls, lines)
    facts = FolderFacts(paths, [], keep=True)
    ledger_figures(paths, facts)
    facts.save()
    _write(paths.calls, lines[:3] + [answer("11-aa-1", "r1", 5.5, alias="doc1")] + lines[4:] + lines[2:5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ledger_figures(paths, FolderFacts(paths, [], keep=False)) == \
            json.loads(json.dumps(read_ledger(paths.calls).as_dict()))  # type: ignore[union-attr]


def test_a_request_in_flight_in_the_lock_holder_is_unanswered_not_billed(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path)
    mine = f"{os.getpid()}-deadbeef"
    _write(paths.calls, [sent(f"{mine}-1", "r1"), answer(f"{mine}-1", "r1", 0.25, latency=1.0),
                         sent(f"{mine}-2", "r2", chars=400)])
    with RunLock(paths):
        assert RunLock.holder(paths) == os.getpid()
        live = ledger_figures(paths, FolderFacts(paths, [], keep=False))
    assert live is not None and (live["billed_usd"], live["unanswered"], live["billed_known"]) == (0.25, 1, True)
    assert RunLock.holder(paths) is None
    after = ledger_figures(paths, FolderFacts(paths, [], keep=False))  # its process gone: caught in flight
    assert after is not None and after["billed_usd"] == pytest.approx(0.25 + 0.25) and after["billed_known"] is False


def test_a_request_billed_unread_that_no_answer_priced_needs_no_second_read(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "calls.jsonl"
    _write(path, [sent("1-a-1", "r1"), answer("1-a-1", "r1", 0.2, latency=1.0)])
    state = LedgerRead(kept=True)
    state.read(path)
    second_reads: list[set[str]] = []
    real = ledger_read._request_prices

    def counting(path: Path, wanted: Any, end: int) -> dict[str, float]:
        second_reads.append(set(wanted))
        return real(path, wanted, end)

    monkeypatch.setattr(ledger_read, "_request_prices", counting)
    begin = path.stat().st_size
    with path.open("a") as ledger:
        ledger.write(json.dumps(sent("1-a-2", "r2", chars=200)) + "\n")  # caught in flight: r2 never priced
        ledger.write(json.dumps(sent("1-a-3", "r1", chars=200)) + "\n")  # caught in flight: r1 was priced
    state.read(path, LineSpan(begin, 3, None))
    figures = state.figures(path)
    assert second_reads == [{"r1"}]  # only the hash an answer may have priced is looked up
    whole = read_ledger(path)
    assert whole is not None and figures.as_dict() == whole.as_dict()
