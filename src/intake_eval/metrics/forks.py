"""Could it ask? Spontaneous vs nudged coverage and the capacity gap, from the fork arms.

For each intake (a parent, judged ok) and each fork arm (``<condition>+<nudge>@<at>``):
- spontaneous = the intake's active coverage;
- nudged = its fork's active coverage when it forked and the fork was judged ok; an intake that did not
  fork (it never closed, say) keeps its spontaneous coverage — there was no closure to undo;
- capacity gap = nudged − spontaneous, averaged over intakes, with a 95 % CI from resampling profiles.
Rows per clinician (scope "clinician"), per phenotype and per hidden domain (a domain's gap is the
share of intakes where the fork caught it minus the share where the intake did). Intakes whose fork
failed or was not judged are left out of both sides (counted in ``n_fork_missing``), never read as 0.
Written to metrics/capacity_gap.csv from metrics/conversations.csv and the conversations' fork links.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.metrics.long_rows import iter_rows, table_exists
from intake_eval.metrics.record_headers import ConversationHeader
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.stats import mean_ci

COLUMNS = ["judge", "clinician", "condition", "patient_mode", "fork_arm", "scope", "key", "n_intakes", "n_forked",
           "n_fork_missing", "n_profiles", "spontaneous", "nudged", "capacity_gap", "gap_ci_low", "gap_ci_high"]


# What capacity_rows reads of metrics/conversations.
_READ = ("conversation_id", "judge", "status", "active_coverage_rate", "caught_domains", "missed_domains", "clinician",
         "condition", "patient_mode", "profile_id", "phenotype")


def fork_links(paths: RunPaths) -> dict[str, tuple[str, str]]:
    """fork conversation id → (parent id, fork arm suffix ``+<nudge>@<at>``)."""
    links: dict[str, tuple[str, str]] = {}
    for path in paths.conversation_files():
        for data in iter_json_lines(path, model=ConversationHeader):
            fork = data.get("fork")
            if isinstance(fork, dict) and fork.get("parent"):
                links[str(data.get("conversation_id"))] = (str(fork["parent"]), f"+{fork.get('nudge')}@{fork.get('at')}")
    return links


def _rate(row: dict[str, str]) -> float | None:
    return float(row["active_coverage_rate"]) if row.get("status") == "ok" and row.get("active_coverage_rate") else None


def _caught(row: dict[str, str]) -> set[str]:
    return {d for d in (row.get("caught_domains") or "").split(";") if d}


def _hidden(row: dict[str, str]) -> list[str]:
    return sorted(_caught(row) | {d for d in (row.get("missed_domains") or "").split(";") if d})


def capacity_rows(rows: list[dict[str, str]], links: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """The capacity-gap table from conversations.csv rows (one per conversation × judge) and fork links."""
    by_key = {(row["conversation_id"], row["judge"]): row for row in rows}
    arms_of_parent: dict[str, dict[str, str]] = defaultdict(dict)  # parent id → arm suffix → fork id
    for linked_id, (parent_id, linked_arm) in links.items():
        arms_of_parent[parent_id][linked_arm] = linked_id
    arms = sorted({arm for _, arm in links.values()})
    pairs: dict[tuple, list[tuple[dict[str, str], dict[str, str] | None, bool]]] = defaultdict(list)
    for row in rows:
        if row["conversation_id"] in links or _rate(row) is None:
            continue  # forks are the other side of a pair; unjudged intakes have no pair
        for arm in arms:
            fork_id = arms_of_parent.get(row["conversation_id"], {}).get(arm)
            fork_row = by_key.get((fork_id, row["judge"])) if fork_id else None
            missing = fork_id is not None and (fork_row is None or _rate(fork_row) is None)
            group = (row["judge"], row["clinician"], row["condition"], row["patient_mode"], arm)
            pairs[group].append((row, fork_row if fork_id else None, missing))
    out: list[dict[str, Any]] = []
    for group, items in sorted(pairs.items()):
        usable = [(parent, fork) for parent, fork, missing in items if not missing]
        n_missing = sum(1 for *_, missing in items if missing)
        scopes: dict[tuple[str, str], list[tuple[str, float, float]]] = defaultdict(list)
        for parent, fork in usable:
            spontaneous = _rate(parent) or 0.0
            nudged = _rate(fork) if fork is not None else spontaneous
            assert nudged is not None, "a fork without a rate is counted missing, never usable"
            scopes[("clinician", group[1])].append((parent["profile_id"], spontaneous, nudged))
            scopes[("phenotype", parent["phenotype"])].append((parent["profile_id"], spontaneous, nudged))
            caught_before = _caught(parent)
            caught_after = _caught(fork) if fork is not None else caught_before
            for domain in _hidden(parent):
                scopes[("domain", domain)].append((parent["profile_id"], float(domain in caught_before),
                                                   float(domain in caught_after)))
        forked = sum(1 for _, fork in usable if fork is not None)
        for (scope, key), values in sorted(scopes.items(), key=lambda item: (item[0][0] != "clinician", item[0])):
            gaps: dict[str, list[float]] = defaultdict(list)
            for profile, before, after in values:
                gaps[profile].append(after - before)
            estimate = mean_ci(gaps, seed=f"capacity:{'|'.join(group)}:{scope}:{key}")
            out.append({
                "judge": group[0], "clinician": group[1], "condition": group[2], "patient_mode": group[3],
                "fork_arm": group[2] + group[4], "scope": scope, "key": key, "n_intakes": len(values),
                "n_forked": forked if scope == "clinician" else "", "n_fork_missing": n_missing if scope == "clinician" else "",
                "n_profiles": len(gaps), "spontaneous": sum(v[1] for v in values) / len(values),
                "nudged": sum(v[2] for v in values) / len(values), "capacity_gap": estimate.mean,
                "gap_ci_low": estimate.ci_low, "gap_ci_high": estimate.ci_high,
            })
    return out


def write_capacity_gap(paths: RunPaths) -> Path | None:
    """metrics/capacity_gap.csv when the run has forks (after metrics/conversations.csv is written)."""
    links = fork_links(paths)
    source = paths.metrics("conversations")
    target = paths.metrics("capacity_gap")
    if not links or not table_exists(source):
        if target.exists():
            target.unlink()
        return None
    rows = list(iter_rows(source, _READ))  # only the columns the pairs use: a few fields per row are kept
    return write_csv(target, COLUMNS, capacity_rows(rows, links))
