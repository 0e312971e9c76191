"""Judge agreement for the report: κ per label (metrics/agreement.csv) and where the judges
disagree most (by domain, by question type, by conversation), from the judgments' labels."""

from __future__ import annotations

from collections import Counter
from typing import Any

from intake_eval.report.load import RunData
from intake_eval.report.tables import _num, table_rows


def kappa_rows(data: RunData, judges: list[str]) -> list[dict[str, Any]]:
    """metrics/agreement.csv, the primary judge named first in each pair."""
    primary = judges[0] if judges else None
    rows = []
    for row in table_rows(data, "agreement"):
        a, b = str(row["judge_a"]), str(row["judge_b"])
        if b == primary:
            a, b = b, a
        rows.append({"judge_a": a, "judge_b": b, "label": str(row["label"]), "n": int(_num(row.get("n")) or 0),
                     "conversations": int(_num(row.get("conversations")) or 0),
                     "raw_agreement": _num(row.get("raw_agreement")), "kappa": _num(row.get("kappa")), "scope": "all"})
    return rows


def _signature_turns(judgment: dict[str, Any]) -> list[tuple[int | None, tuple[str | None, str]]]:
    """A slim judgment's label signature (``slim_records.slim_judgment``) as (turn, (question type, codes)) pairs."""
    out = []
    for part in judgment.get("sig", "").split("\x1e") if judgment.get("sig") else []:
        number, qtype, codes = part.split("\x1f")
        out.append((int(number) if number else None, (None if qtype == "\x00" else qtype, codes)))
    return out


def hotspots(data: RunData, judges: list[str], top: int = 10) -> dict[str, Any]:
    """Primary judge vs each other judge: disagreement rates by domain and the worst conversations."""
    if len(judges) < 2:
        return {}
    primary, other = judges[0], judges[1]
    by_domain: dict[str, list[int]] = {}  # domain → [differing cells, cells]
    qtype_pairs: Counter = Counter()
    qtype_total = 0
    compared = 0
    worst: list[tuple[int, int, str]] = []  # (differing, cells, cid) of the most disagreeing conversations so far
    for cid, a in data.judgments[primary].items():
        b = data.judgments[other].get(cid)
        if b is None or a.get("status", "ok") != "ok" or b.get("status", "ok") != "ok":
            continue
        hidden = a["hidden"]  # the conversation's profile's hidden domains, kept with the signature
        turns_b = dict(_signature_turns(b))
        differing = cells = 0
        for number, (qtype_a, codes_a) in _signature_turns(a):
            if number not in turns_b:
                continue
            qtype_b, codes_b = turns_b[number]
            if number is not None and number >= 1:
                qtype_total += 1
                if qtype_a != qtype_b:
                    qtype_pairs[(qtype_a, qtype_b)] += 1
            for domain, la, lb in zip(hidden, codes_a, codes_b):
                if la == "-" or lb == "-":
                    continue
                diff = int(la != lb)  # the code is asked + 2 × disclosed
                tally = by_domain.setdefault(domain, [0, 0])
                tally[0] += diff
                tally[1] += 1
                differing += diff
                cells += 1
        if cells:
            compared += 1
            if differing:
                worst.append((differing, cells, cid))
                if len(worst) > 4 * top:  # keep the list short: only the top ones can be shown
                    worst = _most_disagreeing(worst, top)
    rates = sorted(((d, n_diff / n, n) for d, (n_diff, n) in by_domain.items()), key=lambda r: (-r[1], r[0]))
    domains = [{"domain": d, "rate": rate, "n": n} for d, rate, n in rates]
    confusions = [{"a": a, "b": b, "count": n, "share": n / qtype_total} for (a, b), n in qtype_pairs.most_common(5)]
    shown = [{"conversation_id": cid, "clinician": data.conversations.get(cid, {}).get("clinician", ""),
              "differing": d, "cells": c} for d, c, cid in _most_disagreeing(worst, top)]
    return {"primary": primary, "other": other, "domains": domains[:12], "confusions": confusions, "worst": shown,
            "n_conversations": compared}


def _most_disagreeing(entries: list[tuple[int, int, str]], top: int) -> list[tuple[int, int, str]]:
    """The ``top`` entries with the most differing cells, ties by conversation id."""
    return sorted(entries, key=lambda r: (-r[0], r[2]))[:top]
