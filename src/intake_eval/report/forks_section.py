"""The "Could it ask?" report section (metrics/capacity_gap.csv, from `run --fork-at … --nudge …`).

Per clinician and fork arm: spontaneous coverage (the intake as it ran), nudged coverage (its fork,
re-run from the closure turn after a supervisor's reminder) and the capacity gap between them with a
95 % CI over profiles; then the domains the nudge recovers most. Follows the report's judge.
"""

from __future__ import annotations

from intake_eval.report import fmt
from intake_eval.report.cell_links import arm_filter, viewer_link
from intake_eval.report.diagnosis_section import _for_judge, _html_table, _primary
from intake_eval.report.html import Section
from intake_eval.report.load import RunData, domain_labels

TITLE = "Could it ask? Capacity gap"
DEFINITIONS = (
    "Each finished intake was re-run from its fork point (e.g. the turn where the clinician closed into advice) "
    "with a short supervisor's note to review areas not yet covered; the turns before it are kept verbatim. "
    "Spontaneous = active coverage as the intake ran; nudged = coverage of its fork (an intake that never closed "
    "keeps its own). The capacity gap (nudged − spontaneous) is what the clinician could ask but did not; "
    "95% CI from resampling profiles (nested: then trials within each drawn profile, when a run repeats trials). Forks that failed or are not judged are left out, never read as 0.")
_NEEDS = ("clinician", "fork_arm", "scope", "key", "n_intakes", "n_forked", "spontaneous", "nudged", "capacity_gap",
          "gap_ci_low", "gap_ci_high")


def render(data: RunData) -> Section | None:
    table = _for_judge(data.tables.get("capacity_gap"), _primary(data))
    if table is None or not len(table) or any(column not in table.columns for column in _NEEDS):
        return None
    clinicians = table[table["scope"] == "clinician"]
    rows = [[str(r.clinician), str(r.fork_arm), fmt.count(r.n_intakes), fmt.count(r.n_forked), fmt.pct(r.spontaneous),
             fmt.pct(r.nudged), f"{fmt.points(r.capacity_gap)} {fmt.ci(r.gap_ci_low, r.gap_ci_high)}".strip()]
            for r in clinicians.itertuples(index=False)]
    html = [f"<p class='lede'>{DEFINITIONS}</p>",
            _html_table(["clinician", "fork arm", "intakes", "forked", "spontaneous", "nudged", "capacity gap [95% CI]"],
                        rows, strong=6)]
    domains = table[(table["scope"] == "domain") & (table["capacity_gap"] > 0)]
    if len(domains):
        top = domains.sort_values("capacity_gap", ascending=False).head(12)
        html.append("<h3>Domains the nudge recovers most</h3>")
        labels = domain_labels(data)
        domain_rows = list(top.itertuples(index=False))
        # each side opens its transcripts: the intakes as they ran, and their forks after the nudge
        links = [{3: viewer_link(**arm_filter((str(r.clinician), str(r.condition), str(r.patient_mode))), domain=str(r.key),
                                 scored=1),
                  4: viewer_link(**arm_filter((str(r.clinician), str(r.fork_arm), str(r.patient_mode))), domain=str(r.key),
                                 scored=1)} for r in domain_rows]
        html.append(_html_table(["domain", "clinician", "intakes", "caught spontaneously", "caught when nudged", "gap"],
                                [[labels.get(str(r.key), str(r.key)), str(r.clinician), fmt.count(r.n_intakes),
                                  fmt.pct(r.spontaneous), fmt.pct(r.nudged), fmt.points(r.capacity_gap)] for r in domain_rows],
                                links=links))
    return Section("capacity-gap", TITLE, "".join(html))
