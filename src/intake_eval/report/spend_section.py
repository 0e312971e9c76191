"""Report section "Spend per role": calls, prompt tokens, the share the providers' prompt caches
served, and dollars, per conversation role (clinician, formulation, patient, tracker) and per judge.

Summed from the records (core/usage.py), as `status` and `--budget` are. Registered with
``report.html.register_section``; ``summary_markdown`` gives the same table for report/summary.md.
"""

from __future__ import annotations

from intake_eval.core.records import Usage
from intake_eval.core.usage import judgment_usage, usage_by_role
from intake_eval.report import fmt
from intake_eval.report.diagnosis_section import _html_table
from intake_eval.report.html import Section, register_section
from intake_eval.report.load import RunData
from intake_eval.report.summary import _table as md_table

TITLE = "Spend per role"
DEFINITIONS = (
    "Prompt cache: the share of prompt tokens the provider served from its prompt cache (a repeated prefix: the "
    "static instructions and the conversation so far), billed at its cached rate; cache writes are the tokens "
    "Anthropic charged for storing a prefix. Answers our own response cache replayed keep the price they were "
    "first paid at. Summed over the latest record of every conversation and judgment.")
HEADER = ["Role", "Calls", "Prompt tokens", "Prompt cache", "Cache writes", "Output tokens (reasoning incl.)", "Cost"]


def role_usage(data: RunData) -> list[tuple[str, Usage]]:
    clinicians = sorted({str(c.get("clinician", "")) for c in data.conversations.values() if c.get("clinician")})
    roles = list(usage_by_role(data.paths, clinicians).items())
    roles += [(f"judge {label}", judgment_usage(data.paths, label)) for label in sorted(data.judgments)]
    return [(role, usage) for role, usage in roles if usage.calls]


def _share(part: int, whole: int) -> str:
    return fmt.pct(part / whole) if whole else fmt.DASH


def spend_rows(data: RunData) -> list[list[str]]:
    rows = []
    for role, usage in role_usage(data):
        cost = f"${usage.cost_usd:,.2f}" if usage.cost_known else f"≥ ${usage.cost_usd:,.2f}"
        rows.append([role, f"{usage.calls:,}", f"{usage.prompt_tokens:,}",
                     _share(usage.cached_prompt_tokens, usage.prompt_tokens), f"{usage.cache_write_tokens:,}",
                     f"{usage.completion_tokens:,}", cost])
    return rows


def spend_section(data: RunData) -> Section | None:
    rows = spend_rows(data)
    if not rows:
        return None
    return Section("spend", TITLE, f"<p class='lede'>{DEFINITIONS}</p>" + _html_table(HEADER, rows))


def summary_markdown(data: RunData) -> list[str]:
    rows = spend_rows(data)
    return [f"## {TITLE}", "", DEFINITIONS, "", *md_table(HEADER, rows), ""] if rows else []


register_section("spend", spend_section)
