"""Spend by role: metrics/cost.csv, cost_conversations.csv and cost_per_domain.csv.

Every conversation record carries its usage per role (clinician, formulation, patient, tracker)
and every judgment its judge's usage; the judge role sums every judge of the run (the primary and
each cross-check), since all of them are spent on the study. Failed conversations and failed
judgments count too: their calls were paid for. A dollar figure whose prices were not all known
is a lower bound (``cost_known`` false).

- cost_conversations.csv: one row per conversation, tokens and dollars per role and in total.
- cost.csv: per clinician arm × role (and ``all``), totals and per-conversation means.
- cost_per_domain.csv: per judge × clinician arm, dollars (all roles) per hidden domain that
  judge saw actively surfaced.

The dollars of these three are the *records' cost*: what the kept results would cost to reproduce.
What providers *billed* (every retried, truncated or lost attempt included) and what the response cache
*saved* are the call ledger's (core/calls.py), in cost_billed.csv: one row per model alias and ``all``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from intake_eval.core.calls import read_ledger
from intake_eval.core.records import Usage
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths
from intake_eval.metrics.collect import USAGE_FIELDS, Collected
from intake_eval.metrics.columnar import ParquetRows, conversation_ranges, distinct, sorted_rows

ROLES = ("clinician", "formulation", "patient", "tracker", "judge")
ALL_ROLES = "all"
ARM = ("clinician", "condition", "patient_mode")
COST_CONVERSATION_COLUMNS = (
    "conversation_id", *ARM, "profile_id", "status",
    *(f"{role}_{what}" for role in ROLES for what in ("tokens", "cost_usd")),
    "total_tokens", "total_cost_usd", "cost_known",
)
COST_COLUMNS = (*ARM, "role", "conversations", "calls", "prompt_tokens", "completion_tokens", "tokens", "cost_usd",
                "cost_known", "share_of_cost", "tokens_per_conversation", "cost_usd_per_conversation",
                "cached_prompt_tokens", "prompt_cache_share")
COST_BILLED_COLUMNS = ("alias", "requests", "retries", "failed_attempts", "unanswered", "cache_hits", "billed_usd",
                       "billed_estimated_usd", "billed_known", "saved_by_cache_usd", "records_cost_usd",
                       "records_cost_known")
COST_PER_DOMAIN_COLUMNS = ("judge", *ARM, "conversations", "surfaced_domains", "hidden_domains", "calls", "tokens",
                           "cost_usd", "cost_known", "cost_usd_per_surfaced_domain", "tokens_per_surfaced_domain",
                           "calls_per_surfaced_domain")


def judge_usage(row: Mapping[str, Any]) -> Usage:
    """The judge's usage from a metrics/conversations.csv row (an unknown price is ``judge_cost_usd`` None)."""
    cost = row["judge_cost_usd"]
    return Usage(calls=row["judge_calls"], prompt_tokens=row["judge_prompt_tokens"],
                 completion_tokens=row["judge_completion_tokens"], cost_usd=cost or 0.0, cost_known=cost is not None,
                 cached_prompt_tokens=row.get("judge_cached_prompt_tokens") or 0)


def _tokens(usage: Usage) -> int:
    return usage.prompt_tokens + usage.completion_tokens


def spend_by_conversation(conversations: Mapping[str, Mapping[str, Any]],
                          judgment_rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Usage]]:
    """conversation_id -> role -> Usage. ``conversations[cid]["usage"]`` is the record's role -> Usage."""
    spend: dict[str, dict[str, Usage]] = {cid: dict(meta.get("usage") or {}) for cid, meta in conversations.items()}
    for row in judgment_rows:
        roles = spend.setdefault(row["conversation_id"], {})
        roles["judge"] = roles.get("judge", Usage()).add(judge_usage(row))
    return spend


def _total(roles: Mapping[str, Usage]) -> Usage:
    total = Usage()
    for usage in roles.values():
        total = total.add(usage)
    return total


def _arm_of(cid: str, conversations: Mapping[str, Mapping[str, Any]],
            judgment_rows: Mapping[str, Mapping[str, Any]]) -> tuple[str, str, str]:
    meta = conversations.get(cid) or judgment_rows.get(cid) or {}
    return (str(meta.get("clinician", "")), str(meta.get("condition", "minimal")),
            str(meta.get("patient_mode", "prompted")))


def cost_conversation_rows(spend: Mapping[str, Mapping[str, Usage]],
                           conversations: Mapping[str, Mapping[str, Any]],
                           judgment_rows: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for cid in sorted(spend):
        roles, meta = spend[cid], conversations.get(cid) or {}
        total = _total(roles)
        row: dict[str, Any] = {"conversation_id": cid, **dict(zip(ARM, _arm_of(cid, conversations, judgment_rows))),
                               "profile_id": meta.get("profile_id", (judgment_rows.get(cid) or {}).get("profile_id", "")),
                               "status": meta.get("status", "")}
        for role in ROLES:
            usage = roles.get(role, Usage())
            row[f"{role}_tokens"], row[f"{role}_cost_usd"] = _tokens(usage), usage.cost_usd
        row.update(total_tokens=_tokens(total), total_cost_usd=total.cost_usd, cost_known=total.cost_known)
        out.append(row)
    return out


def _role_order(roles: Iterable[str]) -> list[str]:
    found = set(roles)
    return [r for r in ROLES if r in found] + sorted(found - set(ROLES))


def add_arm_spend(spend: Mapping[str, Mapping[str, Usage]], conversations: Mapping[str, Mapping[str, Any]],
                  judgment_rows: Mapping[str, Mapping[str, Any]], per_arm: dict[tuple, dict[str, Usage]],
                  counts: dict[tuple, int]) -> None:
    """Add these conversations' spend to the per-arm totals (role → usage) and conversation counts, in order."""
    for cid, roles in spend.items():
        arm = _arm_of(cid, conversations, judgment_rows)
        counts[arm] = counts.get(arm, 0) + 1
        arm_roles = per_arm.setdefault(arm, {})
        for role, usage in roles.items():
            arm_roles[role] = arm_roles.get(role, Usage()).add(usage)


def cost_rows(per_arm: Mapping[tuple, Mapping[str, Usage]], counts: Mapping[tuple, int]) -> list[dict[str, Any]]:
    """metrics/cost.csv: per arm × role (and ``all``), from ``add_arm_spend``'s totals."""
    out = []
    for arm in sorted(counts):
        roles, n = per_arm[arm], counts[arm]
        total = _total(roles)
        for role in [*_role_order(roles), ALL_ROLES]:
            usage = total if role == ALL_ROLES else roles[role]
            out.append({
                **dict(zip(ARM, arm)), "role": role, "conversations": n, "calls": usage.calls,
                "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                "tokens": _tokens(usage), "cost_usd": usage.cost_usd, "cost_known": usage.cost_known,
                "share_of_cost": usage.cost_usd / total.cost_usd if total.cost_usd else None,
                "tokens_per_conversation": _tokens(usage) / n, "cost_usd_per_conversation": usage.cost_usd / n,
                # the share of prompt tokens the provider's prompt cache served (billed at its cached rate)
                "cached_prompt_tokens": usage.cached_prompt_tokens,
                "prompt_cache_share": usage.cached_prompt_tokens / usage.prompt_tokens if usage.prompt_tokens else None,
            })
    return out


def cost_per_domain_rows(arm_spend: Mapping[tuple, Usage], arm_size: Mapping[tuple, int],
                         surfaced: Mapping[tuple, Sequence[int]]) -> list[dict[str, Any]]:
    """Per judge × arm: all-role spend of the arm's conversations ÷ hidden domains that judge saw
    actively surfaced in them (ok judgments only; undefined when none was surfaced). ``surfaced``:
    (judge, *arm) → (surfaced, hidden) domains, every judge with every arm."""
    out = []
    for key in sorted(surfaced):
        caught, hidden = surfaced[key]
        usage = arm_spend.get(key[1:], Usage())
        out.append({
            "judge": key[0], **dict(zip(ARM, key[1:])), "conversations": arm_size.get(key[1:], 0),
            "surfaced_domains": caught, "hidden_domains": hidden, "calls": usage.calls, "tokens": _tokens(usage),
            "cost_usd": usage.cost_usd, "cost_known": usage.cost_known,
            "cost_usd_per_surfaced_domain": usage.cost_usd / caught if caught else None,
            "tokens_per_surfaced_domain": _tokens(usage) / caught if caught else None,
            "calls_per_surfaced_domain": usage.calls / caught if caught else None,
        })
    return out


_JUDGE_USAGE = ("judge", "conversation_id", "judge_calls", "judge_prompt_tokens", "judge_completion_tokens",
                "judge_cost_usd", "judge_cached_prompt_tokens", "clinician", "condition", "patient_mode", "profile_id")
_COST_CONVERSATION_TYPES = {**{column: "int64" for column in COST_CONVERSATION_COLUMNS if column.endswith("_tokens")},
                            **{column: "float64" for column in COST_CONVERSATION_COLUMNS if column.endswith("_usd")},
                            "cost_known": "bool"}


_CONVERSATIONS_AT_A_TIME = 2_000  # conversations whose usage (a Usage per role) is held at once


class _CostTally:
    """The three cost tables, added one clinician's conversations at a time."""

    def __init__(self, collected: Collected, judges: Sequence[str]) -> None:
        self.judges = judges
        self.conversation_rows = ParquetRows(collected.folder / "cost_conversations.parquet",
                                             COST_CONVERSATION_COLUMNS, _COST_CONVERSATION_TYPES, row_group_rows=5_000)
        self.per_arm: dict[tuple, dict[str, Usage]] = {}
        self.counts: dict[tuple, int] = {}
        self.arm_spend: dict[tuple, Usage] = defaultdict(Usage)
        self.arm_size: dict[tuple, int] = defaultdict(int)
        self.surfaced: dict[tuple, list[int]] = {}

    def add(self, collected: Collected, clinician: str) -> None:
        """One clinician's conversations, a range of conversation ids at a time."""
        for filters in conversation_ranges(collected.meta, {"clinician": clinician}, rows=_CONVERSATIONS_AT_A_TIME):
            self._add_range(collected, clinician, filters)

    def _add_range(self, collected: Collected, clinician: str, filters: list[tuple]) -> None:
        conversations: dict[str, dict[str, Any]] = {}
        for cid, condition, mode, profile, status in sorted_rows(
                collected.meta, ("conversation_id", "condition", "patient_mode", "profile_id", "status"),
                ("conversation_id",), filters=filters):
            conversations[cid] = {"clinician": clinician, "condition": condition, "patient_mode": mode,
                                  "profile_id": profile, "status": status}
        usage: dict[str, dict[str, Usage]] = {cid: {} for cid in conversations}
        for cid, role, *fields in sorted_rows(collected.usage, ("conversation_id", "role", *USAGE_FIELDS),
                                              ("conversation_id",), filters=filters):
            usage.setdefault(cid, {})[role] = Usage(**dict(zip(USAGE_FIELDS, fields)))
        for cid, meta in conversations.items():
            meta["usage"] = usage.get(cid, {})
        del usage
        judgment_rows = {(row["judge"], row["conversation_id"]): row for row in (
            dict(zip(_JUDGE_USAGE, values)) for values in sorted_rows(collected.conversations, _JUDGE_USAGE,
                                                                       ("conversation_id",), filters=filters))}
        spend = spend_by_conversation(conversations, judgment_rows.values())
        by_cid = {cid: row for (_, cid), row in judgment_rows.items()}
        for row in cost_conversation_rows(spend, conversations, by_cid):
            self.conversation_rows.add(row["conversation_id"], [tuple(row[c] for c in COST_CONVERSATION_COLUMNS)])
        add_arm_spend(spend, conversations, by_cid, self.per_arm, self.counts)
        arms = set()
        for cid, roles in spend.items():
            arm = _arm_of(cid, conversations, by_cid)
            self.arm_spend[arm] = self.arm_spend[arm].add(_total(roles))
            self.arm_size[arm] += 1
            arms.add(arm)
        for judge in self.judges:  # every judge gets a row for every arm, even with nothing surfaced
            for arm in arms:
                self.surfaced.setdefault((judge, *arm), [0, 0])
        for judge, cid, covered in sorted_rows(collected.domain_events,
                                               ("judge", "conversation_id", "actively_covered"),
                                               ("conversation_id",), filters=filters):
            tally = self.surfaced.setdefault((judge, *_arm_of(cid, conversations, by_cid)), [0, 0])
            tally[0] += covered
            tally[1] += 1

    def tables(self) -> dict[str, tuple[Sequence[str], Iterable[Sequence[Any]]]]:
        """name → (columns, rows as sequences in columns order); cost_conversations streamed in conversation order."""
        path = self.conversation_rows.close()
        per_domain = cost_per_domain_rows(self.arm_spend, self.arm_size, self.surfaced)
        return {
            "cost_conversations": (COST_CONVERSATION_COLUMNS,
                                   sorted_rows(path, COST_CONVERSATION_COLUMNS, ("conversation_id",))),
            "cost": (COST_COLUMNS, [[row.get(column) for column in COST_COLUMNS]
                                    for row in cost_rows(self.per_arm, self.counts)]),
            "cost_per_domain": (COST_PER_DOMAIN_COLUMNS,
                                [[row.get(column) for column in COST_PER_DOMAIN_COLUMNS] for row in per_domain]),
        }


def cost_tables(collected: Collected, judges: Sequence[str]) -> dict[str, tuple[Sequence[str], Iterable[Sequence[Any]]]]:
    """name -> (columns, rows as sequences in columns order) of the three cost tables from the metrics pass,
    one clinician at a time; ``judges``: every judge of the run."""
    tally = _CostTally(collected, judges)
    clinicians = {str(c) for (c,) in distinct(collected.meta, ["clinician"])}
    clinicians |= {str(c) for (c,) in distinct(collected.conversations, ["clinician"])}
    for clinician in sorted(clinicians):
        tally.add(collected, clinician)
    return tally.tables()


def cost_billed_rows(paths: RunPaths, kinds: StageKinds) -> list[dict[str, Any]]:
    """Per model alias (and ``all``): the call ledger's billed and saved-by-the-cache dollars, retries and
    failed attempts beside the records' cost. Without a ledger the billed columns are empty."""
    try:
        manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}  # no readable manifest: the records' cost per stage cannot be attributed
    manifest = manifest if isinstance(manifest, dict) else {}
    ledger = read_ledger(paths.calls)
    calls = {alias: figures.as_dict() for alias, figures in ledger.by_alias.items()} if ledger is not None else {}
    records = kinds.records_cost_by_alias(paths, manifest)
    rows = []
    for alias in sorted(set(calls) | set(records)):
        rows.append(_billed_row(alias, calls.get(alias), records.get(alias), known_ledger=ledger is not None))
    total_calls = ledger.as_dict() if ledger is not None else None
    total_records = Usage()
    for usage in records.values():
        total_records = total_records.add(usage)
    if rows:
        rows.append(_billed_row(ALL_ROLES, total_calls, total_records, known_ledger=ledger is not None))
    return rows


def _billed_row(alias: str, calls: Mapping[str, Any] | None, records: Usage | None, *, known_ledger: bool
                ) -> dict[str, Any]:
    row: dict[str, Any] = {"alias": alias, "records_cost_usd": records.cost_usd if records is not None else 0.0,
                           "records_cost_known": records.cost_known if records is not None else True}
    if calls is None:
        empty = 0 if known_ledger else None  # an alias without a provider call (offline) billed nothing
        row.update({name: empty for name in ("requests", "retries", "failed_attempts", "unanswered", "cache_hits",
                                             "billed_usd", "billed_estimated_usd", "saved_by_cache_usd")})
        row["billed_known"] = known_ledger
        return row
    row.update({name: calls[name] for name in ("requests", "retries", "failed_attempts", "unanswered", "cache_hits",
                                               "billed_usd", "billed_estimated_usd", "billed_known",
                                               "saved_by_cache_usd")})
    return row
