"""Report sections "When domains get probed" (leak-adjusted coverage, Kaplan–Meier curves) and
"Cost by role".

Listed in ``report.section_list`` under ``probe_curves`` (metrics/probe_curves.csv,
with the per-clinician numbers of metrics/clinicians.csv) and ``cost`` (metrics/cost.csv and
cost_per_domain.csv). Only the report judge's rows are shown where labels matter.
"""

from __future__ import annotations

from typing import Any

from intake_eval.report import fmt
from intake_eval.report.cell_links import arm_filter, viewer_link
from intake_eval.report.charts import survival_panels
from intake_eval.report.diagnosis_section import (
    _arm,
    _esc,
    _for_judge,
    _html_table,
    _primary,
    _read,
)
from intake_eval.report.html import Section
from intake_eval.report.load import RunData, domain_labels
from intake_eval.report.summary import _table as md_table

PROBE_TITLE = "When domains get probed"
PROBE_DEFINITIONS = (
    "A hidden domain leaks when the first turn that discloses it did not ask about it (the patient volunteered it). "
    "Leak-adjusted active coverage leaves leaked domains out of both numerator and denominator, so it measures what "
    "the clinician surfaced by asking; it is undefined for a conversation whose every hidden domain leaked. "
    "Overshared: conversations with at least one leaked domain. The curves are Kaplan–Meier estimates "
    "(scipy.stats.ecdf) with 95 % log-log bands: left, the share of hidden domains not yet asked about by each turn "
    "(a domain never asked is censored at the conversation's last turn); right, the share of conversations still "
    "probing, i.e. not yet in premature closure (a conversation that never closes is censored at its last turn).")
LEAK_HEADER = ["Clinician", "Judged", "Active coverage", "Leak-adjusted active coverage", "Overshared conversations"]
DOMAIN_HEADER_LEAD = "Domain"


def leak_rows(clinicians) -> list[list[str]]:
    rows = []
    for _, r in clinicians.iterrows():
        rows.append([_arm(r), fmt.count(r["judged"]), fmt.pct(r["mean_active_coverage"]),
                     fmt.pct(r["mean_leak_adjusted_active_coverage"]),
                     f"{fmt.count(r['conversations_overshared'])}/{fmt.count(r['judged'])}"])
    return rows


def _series(curves, curve: str, domain: str) -> dict[str, dict[str, Any]]:
    series: dict[str, dict[str, Any]] = {}
    chosen = curves[(curves["curve"] == curve) & (curves["domain"] == domain)]
    if not len(chosen):
        return series
    for arm, rows in chosen.groupby(chosen.apply(_arm, axis=1), sort=True):
        rows = rows.sort_values("turn")
        series[str(arm)] = {
            "turns": [int(t) for t in rows["turn"]], "survival": [float(v) for v in rows["survival"]],
            "lo": [None if fmt.missing(v) else float(v) for v in rows["ci_low"]],
            "hi": [None if fmt.missing(v) else float(v) for v in rows["ci_high"]],
            "n": int(rows["n"].iloc[0]),
        }
    return series


def domain_rows(curves, labels: dict[str, str] | None = None) -> tuple[list[str], list[list[str]], list[dict[int, str]]]:
    """Per domain (by its label) and clinician: the KM share of that domain asked about by the last turn;
    each cell links to the transcript viewer filtered to the arm's scored conversations with that domain hidden."""
    labels = labels or {}
    chosen = curves[(curves["curve"] == "not_yet_asked") & (curves["domain"] != "all")]
    if not len(chosen):
        return [], [], []
    chosen = chosen.assign(arm=chosen.apply(_arm, axis=1))
    arms = sorted(chosen["arm"].unique())
    last = chosen.sort_values("turn").groupby(["domain", "arm"]).tail(1).set_index(["domain", "arm"])
    rows, links = [], []
    for domain in sorted(chosen["domain"].unique(), key=lambda d: (labels.get(str(d), str(d)).lower(), str(d))):
        cells, hrefs = [labels.get(str(domain), str(domain))], {}
        for column, arm in enumerate(arms, start=1):
            if (domain, arm) in last.index:
                r = last.loc[(domain, arm)]
                cells.append(f"{fmt.pct(1 - float(r['survival']))} (n={fmt.count(r['n'])})")
                hrefs[column] = viewer_link(**arm_filter((str(r["clinician"]), str(r["condition"]), str(r["patient_mode"]))),
                                            domain=str(domain), scored=1)
            else:
                cells.append(fmt.DASH)
        rows.append(cells)
        links.append(hrefs)
    return [DOMAIN_HEADER_LEAD, *arms], rows, links


def probe_section(data: RunData) -> Section | None:
    judge = _primary(data)
    curves = _for_judge(_read(data, "probe_curves"), judge)
    if curves is None or not len(curves):
        return None
    parts = [f"<p class='lede'>{_esc(PROBE_DEFINITIONS)} Judge: {_esc(judge)}.</p>"]
    clinicians = _for_judge(_read(data, "clinicians"), judge)
    if clinicians is not None and len(clinicians) and "mean_leak_adjusted_active_coverage" in clinicians.columns:
        parts.append(_html_table(LEAK_HEADER, leak_rows(clinicians), strong=3))
    panels = {"Hidden domains not yet asked about": _series(curves, "not_yet_asked", "all"),
              "Conversations still probing": _series(curves, "still_probing", "all")}
    panels = {title: series for title, series in panels.items() if series}
    if panels:
        max_turn = int(curves["turn"].max())
        parts.append(survival_panels(panels, max_turn=max_turn, ylabel="share remaining (%), 95% band"))
    header, rows, links = domain_rows(curves, domain_labels(data))
    if rows:
        parts.append("<p class='lede'>Share of each hidden domain asked about by the last turn "
                     "(1 − Kaplan–Meier estimate; n = conversations where it was hidden). A cell opens its transcripts.</p>")
        parts.append(_html_table(header, rows, links=links))
    return Section("probe-curves", PROBE_TITLE, "".join(parts))


COST_TITLE = "Cost by role"
COST_DEFINITIONS = (
    "Calls, tokens and records' cost per role, summed from the records (failed conversations and judgments included: they "
    "were paid for). The judge role sums every judge of the run. A dollar figure marked ≥ had calls without a known "
    "price. Per surfaced domain: the arm's spend over all roles ÷ hidden domains the report judge saw actively "
    "surfaced. Simulated (offline) participants make calls but use no tokens and cost nothing. Prompt cache: the "
    "share of prompt tokens the provider served from its prompt cache (the repeated prefix: instructions and the "
    "conversation so far), billed at its cached rate.")
COST_HEADER = ["Clinician", "Role", "Calls", "Tokens", "Tokens / conversation", "Prompt cache", "Records' cost",
               "Records' cost / conversation", "Share of cost"]
PER_DOMAIN_HEADER = ["Clinician", "Surfaced / hidden domains", "Calls / surfaced domain", "Tokens / surfaced domain",
                     "Cost / surfaced domain"]


def _known(row: Any) -> bool:
    return str(row["cost_known"]).lower() == "true"


def cost_table_rows(table) -> list[list[str]]:
    rows = []
    for _, r in table.iterrows():
        rows.append([_arm(r), str(r["role"]), fmt.count(r["calls"]), fmt.count(r["tokens"]),
                     fmt.count(r["tokens_per_conversation"]), fmt.pct(r.get("prompt_cache_share")),
                     fmt.dollars(r["cost_usd"], _known(r)),
                     fmt.dollars(r["cost_usd_per_conversation"], _known(r)), fmt.pct(r["share_of_cost"])])
    return rows


def per_domain_rows(table) -> list[list[str]]:
    rows = []
    for _, r in table.iterrows():
        rows.append([_arm(r), f"{fmt.count(r['surfaced_domains'])}/{fmt.count(r['hidden_domains'])}",
                     fmt.turn(r["calls_per_surfaced_domain"]), fmt.count(r["tokens_per_surfaced_domain"]),
                     fmt.dollars(r["cost_usd_per_surfaced_domain"], _known(r))])
    return rows


def money_sentence(data: RunData) -> str | None:
    """The run folder's three money figures in one sentence (metrics/cost_billed.csv, row ``all``)."""
    billed = _read(data, "cost_billed")
    if billed is None or not len(billed):
        return None
    total = billed[billed["alias"].astype(str) == "all"]
    if not len(total):
        return None
    row = total.iloc[0]
    records = fmt.dollars(row["records_cost_usd"], str(row["records_cost_known"]).lower() == "true")
    if str(row["billed_usd"]) in ("", "nan", "None"):
        return f"Records' cost {records} (what the kept results would cost to reproduce); billed: unknown (no call ledger)."
    return (f"Billed {fmt.dollars(row['billed_usd'], str(row['billed_known']).lower() == 'true')} (what providers "
            f"charged, from calls.jsonl: retried and truncated attempts and calls in flight at a kill included) · "
            f"saved by the cache {fmt.dollars(row['saved_by_cache_usd'], True)} · records' cost {records} (what the "
            "kept results would cost to reproduce: the tables below).")


def cost_section(data: RunData) -> Section | None:
    table = _read(data, "cost")
    if table is None or not len(table):
        return None
    judge = _primary(data)
    money = money_sentence(data)
    parts = ([f"<p class='lede'>{_esc(money)}</p>"] if money else []) + [
        f"<p class='lede'>{_esc(COST_DEFINITIONS)} Judge: {_esc(judge)}.</p>",
        _html_table(COST_HEADER, cost_table_rows(table), strong=6)]
    per_domain = _for_judge(_read(data, "cost_per_domain"), judge)
    if per_domain is not None and len(per_domain):
        parts.append(_html_table(PER_DOMAIN_HEADER, per_domain_rows(per_domain), strong=4))
    return Section("cost", COST_TITLE, "".join(parts))


def summary_markdown(data: RunData) -> list[str]:
    """Markdown lines for report/summary.md: leak-adjusted coverage and cost per surfaced domain."""
    out: list[str] = []
    judge = _primary(data)
    clinicians = _for_judge(_read(data, "clinicians"), judge)
    if clinicians is not None and len(clinicians) and "mean_leak_adjusted_active_coverage" in clinicians.columns:
        out += ["## Leak-adjusted coverage", "", PROBE_DEFINITIONS.split(" The curves")[0], "",
                *md_table(LEAK_HEADER, leak_rows(clinicians)), ""]
    per_domain = _for_judge(_read(data, "cost_per_domain"), judge)
    if per_domain is not None and len(per_domain):
        out += ["## Cost per surfaced domain", "", COST_DEFINITIONS, "",
                *md_table(PER_DOMAIN_HEADER, per_domain_rows(per_domain)), ""]
    cost = _read(data, "cost")
    if cost is not None and len(cost):
        money = money_sentence(data)
        out += [f"## {COST_TITLE}", "", *([money, ""] if money else []), *md_table(COST_HEADER, cost_table_rows(cost)), ""]
    return out
