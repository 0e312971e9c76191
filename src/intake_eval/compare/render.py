"""compare.md and compare.html (one self-contained page in the report's look) from a Comparison."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from markupsafe import escape

from intake_eval.compare.runs import LoadedRun
from intake_eval.metrics import registry
from intake_eval.metrics.sensitivity import ScorerView, Sensitivity, kendall_tau
from intake_eval.report import fmt
from intake_eval.report.cell_links import query

PAIRED_HEADER = ["Clinician", "Metric", "Pairs", "First run", "Later run", "Difference [95% CI]", "Permutation p",
                 "Holm-adjusted p"]
RUNS_HEADER = ["Run", "Conditions", "Patient mode", "Patient", "Judges (primary first)", "Scored conversations"]
RANK_HEADER = ["Run · judge", "Ranking by active coverage (=k: tied)", "Kendall's τ vs reference", "Verdict"]
TEST_HEADER = ["Run · judge", "Pair", "Conclusion (Holm-adjusted p < 0.05, paired permutation test)"]
PAIRED_METHOD = (
    "Later run minus first, on the profiles both interviewed, each run's primary judge. Difference: mean over profiles "
    "of the difference of the trial means; 95% CI: paired bootstrap over profiles (with repeated trials nested: each "
    "run's trials resampled within every drawn profile; the method is in compare_paired.csv's ci_method). p: paired "
    "sign-flip permutation test on the profile means; Holm-adjusted p: Holm's step-down adjustment over every row of "
    "that table (one family per pair of runs).")


@dataclass
class Comparison:
    runs: list[LoadedRun]
    entity_columns: list[str]
    paired: list[dict[str, Any]]
    views: list[ScorerView]
    sensitivities: list[Sensitivity]
    entities: list[str]

    @property
    def verdict(self) -> str:
        if len(self.entities) < 2:
            return "fewer than two clinicians were scored by every run and judge: no ranking to check"
        if not self.sensitivities:
            return "one scorer only: nothing to check the conclusions against"
        shaky = [s for s in self.sensitivities if s.flips or s.changed]
        if not shaky:
            return "every ranking and paired conclusion holds across " + \
                   ", ".join(s.scorer.label for s in self.sensitivities)
        return f"{len(shaky)} of {len(self.sensitivities)} alternatives change a conclusion: " + \
               "; ".join(f"{s.scorer.label}: {s.verdict}" for s in shaky)


def _difference(row: dict[str, Any], scale: registry.Scale) -> str:
    if fmt.missing(row["difference"]):
        return fmt.DASH
    return f"{scale.difference(row['difference'])} {scale.interval(row['ci_low'], row['ci_high'])}".strip()


def paired_table(comparison: Comparison) -> dict[str, list[list[str]]]:
    """'run_a → run_b' → formatted rows."""
    out: dict[str, list[list[str]]] = {}
    for row in comparison.paired:
        metric = registry.by_name()[row["metric"]]  # the metrics `compare` tests are declared ones
        out.setdefault(_pair_title(row), []).append([row["entity"], metric.label,
                                                     fmt.count(row["n_pairs"]), metric.scale.mean(row["mean_a"]),
                                                     metric.scale.mean(row["mean_b"]), _difference(row, metric.scale),
                                                     fmt.p_value(row["permutation_p"]),
                                                     fmt.p_value(row.get("permutation_p_holm"))])
    return out


def _pair_title(row: dict[str, Any]) -> str:
    return f"{row['run_b']} ({row['judge_b']}) − {row['run_a']} ({row['judge_a']})"


def transcript_links(comparison: Comparison, folder: Path) -> dict[tuple[str, str], str]:
    """(run name, entity) → a link from ``folder`` to that run's report viewer, filtered to the entity's
    arm and its scored conversations; only for runs whose report/index.html exists."""
    links: dict[tuple[str, str], str] = {}
    for loaded in comparison.runs:
        index = loaded.run.path / "report" / "index.html"
        if not index.exists():
            continue
        target = Path(os.path.relpath(index.resolve(), folder.resolve())).as_posix()
        for entity, group in loaded.frame.groupby("entity"):
            arm = {column: str(values.iloc[0]) for column, values in
                   ((c, group[c].astype(str)) for c in ("clinician", "condition", "patient_mode")) if values.nunique() == 1}
            links[(loaded.name, str(entity))] = f"{target}?{query(**arm, scored=1)}#transcript"
    return links


def runs_rows(comparison: Comparison) -> list[list[str]]:
    return [[r.name, r.facts["condition"], r.facts["patient mode"], r.facts["patient"] or fmt.DASH, r.facts["judge"],
             fmt.count(len(r.frame[r.frame["judge"] == r.judges[0]]) if r.judges else 0)] for r in comparison.runs]


def rank_rows(comparison: Comparison) -> list[list[str]]:
    against = {s.scorer: s for s in comparison.sensitivities}
    rows = []
    for i, view in enumerate(comparison.views):
        ranking = fmt.ranking(view.scores, view.ranking)
        found = against.get(view.scorer)
        tau = "reference" if i == 0 else (fmt.DASH if found is None else fmt.decimal(found.tau, signed=True))
        rows.append([view.scorer.label, ranking or fmt.DASH, tau, "reference" if i == 0 else found.verdict if found else ""])
    return rows


def tau_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """Kendall's τ between the rankings of every two scorers."""
    labels = [view.scorer.label for view in comparison.views]
    rows = []
    for view in comparison.views:
        cells = [fmt.decimal(kendall_tau(view.scores, other.scores), signed=True) for other in comparison.views]
        rows.append([view.scorer.label, *cells])
    return ["Kendall's τ", *labels], rows


def test_rows(comparison: Comparison) -> list[list[str]]:
    return [[view.scorer.label, f"{a} vs {b}", result] for view in comparison.views
            for (a, b), result in sorted(view.tests.items())]


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def clean(text: object) -> str:
        return str(text).replace("|", "\\|")

    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(":---" if i == 0 else "---:" for i in range(len(header))) + " |"]
    return lines + ["| " + " | ".join(clean(c) for c in row) + " |" for row in rows]


def _no_pairs(comparison: Comparison) -> str:
    return "One run: no run-to-run differences." if len(comparison.runs) == 1 else "No matched profiles."


def markdown(comparison: Comparison) -> str:
    lines = ["# Comparison: " + " vs ".join(r.name for r in comparison.runs), "", f"**Verdict:** {comparison.verdict}", "",
             "## Runs", ""] + _md_table(RUNS_HEADER, runs_rows(comparison)) + [""]
    lines += ["## Paired differences (later run minus first, matched profiles)", "", PAIRED_METHOD, ""]
    for title, rows in paired_table(comparison).items():
        lines += [f"### {title}", ""] + _md_table(PAIRED_HEADER, rows) + [""]
    if not comparison.paired:
        lines += [_no_pairs(comparison), ""]
    lines += ["## Sensitivity of conclusions", "", "Reference: the first run's primary judge.", ""]
    lines += _md_table(RANK_HEADER, rank_rows(comparison)) + ["", "### Kendall's τ between every two rankings", ""]
    lines += _md_table(*tau_table(comparison)) + ["", "### Paired tests per scorer", ""]
    lines += _md_table(TEST_HEADER, test_rows(comparison))
    return "\n".join(lines) + "\n"


def _html_table(header: list[str], rows: list[list[str]], links: list[dict[int, str]] | None = None) -> str:
    """``links``: per row, column index → href of that cell (escaped here)."""
    def cell(i: int, text: str, href: str | None) -> str:
        inner = f"<a class='to-viewer' href='{escape(href)}'>{escape(text)}</a>" if href else escape(text)
        return f"<td class='{'l' if i < 2 else ''}'>{inner}</td>"

    head = "".join(f"<th class='{'l' if i < 2 else ''}'>{escape(h)}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(cell(i, c, (links[r] if links else {}).get(i)) for i, c in enumerate(row)) + "</tr>"
                   for r, row in enumerate(rows))
    return f"<div class='scroll'><table class='data'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _card(section_id: str, title: str, lede: str, body: str) -> str:
    return (f"<section class='card' id='{section_id}'><h2>{escape(title)}</h2>"
            f"<p class='lede'>{escape(lede)}</p>{body}</section>")


def page(comparison: Comparison, folder: Path | None = None) -> str:
    """compare.html; written into ``folder``, the run values of the paired table link to each run's
    transcript viewer filtered to that clinician."""
    css = resources.files("intake_eval.report").joinpath("assets/report.css").read_text(encoding="utf-8")
    names = " vs ".join(r.name for r in comparison.runs)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    viewer = transcript_links(comparison, folder) if folder is not None else {}
    row_links: dict[str, list[dict[int, str]]] = {}
    for row in comparison.paired:  # the same order as paired_table's rows
        found = {3: viewer.get((row["run_a"], row["entity"])), 4: viewer.get((row["run_b"], row["entity"]))}
        row_links.setdefault(_pair_title(row), []).append({i: href for i, href in found.items() if href})
    paired = "".join(f"<h3>{escape(title)}</h3>" + _html_table(PAIRED_HEADER, rows, row_links.get(title))
                     for title, rows in paired_table(comparison).items()) or f"<p class='empty'>{escape(_no_pairs(comparison))}</p>"
    cards = [
        _card("verdict", "Verdict", "Does every ranking and paired conclusion hold across judges and runs?",
              f"<p><b>{escape(comparison.verdict)}</b></p>"),
        _card("runs", "Runs", "Profiles come from the same generate configuration in every run.",
              _html_table(RUNS_HEADER, runs_rows(comparison))),
        _card("paired", "Paired differences", f"{PAIRED_METHOD} A run's value opens that run's report on the "
              "clinician's transcripts.", paired),
        _card("sensitivity", "Sensitivity of conclusions", "Clinicians ranked by mean active coverage for every run × judge; "
              "Kendall's τ and flipped orderings against the reference (the first run's primary judge).",
              _html_table(RANK_HEADER, rank_rows(comparison)) + "<h3>Kendall's τ between every two rankings</h3>"
              + _html_table(*tau_table(comparison)) + "<h3>Paired tests per scorer</h3>"
              + _html_table(TEST_HEADER, test_rows(comparison))),
    ]
    nav = "".join(f"<a href='#{i}'>{t}</a>" for i, t in (("verdict", "Verdict"), ("runs", "Runs"), ("paired", "Paired differences"),
                                                          ("sensitivity", "Sensitivity")))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>intake-eval · compare {escape(names)}</title><style>{css}</style></head><body>"
            f"<header class='top'><h1>Comparison of runs</h1><div class='sub'>{escape(names)} · generated {generated}</div></header>"
            f"<nav class='toc'>{nav}</nav><main>{''.join(cards)}</main></body></html>\n")
