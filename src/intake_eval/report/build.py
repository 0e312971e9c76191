"""Orchestration: run folder → metrics CSVs (refreshed) → view model → index.html, summary.md,
headline.csv and the viewer's conversation shards."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from intake_eval.core.records import QUESTION_TYPES
from intake_eval.core.spill import SpilledRows, SpilledSet
from intake_eval.core.store import RunPaths, write_text_atomic
from intake_eval.metrics import registry
from intake_eval.metrics.reading import csv_text
from intake_eval.report import (
    agreement_view,
    cell_links,
    charts,
    figure_files,
    fmt,
    html,
    section_list,
    summary,
    tables,
    viewer,
)
from intake_eval.report.conversation_index import place_index
from intake_eval.report.load import (
    RunData,
    domain_labels,
    in_key_order,
    items_in_key_order,
    load_run,
    order_judges,
    spill_store,
)
from intake_eval.report.metric_tables import read_columns
from intake_eval.report.tables import arm_of, judged_outcomes
from intake_eval.report.shards import ShardAssignment, sources_fingerprint, write_shards
from intake_eval.report.viewer import bleed_flags, outcome_codes

_HEADLINE_ARM = ("arm", "clinician", "condition", "patient_mode", "n_conversations", "n_scored", "n_profiles")
_HEADLINE_INTEGRITY = ("failures", "judge_errors", "not_judged", "tokens", "cost_usd", "cost_known")


def headline_columns() -> list[str]:
    """report/headline.csv: the arm, its declared headline metrics (metrics/registry), integrity and spend."""
    return [*_HEADLINE_ARM, *(column.key for column in registry.headline_columns()), *_HEADLINE_INTEGRITY]


@dataclass
class ReportResult:
    index: Path
    summary: Path
    headline_csv: Path
    views: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)  # report/figures/* when asked for


def _steps(progress: Callable[[str], None] | None):
    import time

    timings: dict[str, float] = {}
    current: str | None = None
    started = time.perf_counter()

    def step(name: str | None) -> None:
        nonlocal current, started
        now = time.perf_counter()
        if current:
            timings[current] = round(now - started, 3)
        current, started = name, now
        if name and progress:
            progress(name)

    return step, timings


def build_views(data: RunData, judges: list[str]) -> dict[str, Any]:
    primary = judges[0] if judges else None
    arms = sorted({tables.arm_of(c) for c in data.conversations.values()})
    labels = tables.arm_labels(arms)
    lines, mixes, max_turn = tables.trajectories(data, arms, labels, primary)
    max_turn = max([max_turn] + [c.get("n_turns", 0) for c in data.conversations.values()])
    return {
        "primary": primary, "judges": judges, "arms": arms, "arm_labels": labels,
        "headline": tables.headline(data, arms, labels, primary),
        "answers": tables.answer_banner(data),
        "matrix": tables.matrix(data, arms, labels, primary),
        "domains": tables.domain_breakdown(data, arms, labels, primary),
        "trajectories": lines, "qmix": mixes, "max_turn": max_turn,
        "comparisons": tables.comparisons(data, primary), "intervals": tables.intervals(data),
        "agreement": agreement_view.kappa_rows(data, judges), "hotspots": agreement_view.hotspots(data, judges),
    }


def render_charts(views: dict[str, Any], labels: dict[str, str], names: dict[str, str] | None = None) -> dict[str, str]:
    """Every chart of the page as inline SVG; ``names``: phenotype id → name for the matrix rows.
    The matrix and domain heatmaps link their cells to the viewer when the views carry ``links``."""
    names = names or {}
    out = {"forest": "", "matrix": "", "domains": "", "domain_rates": "", "trajectory": "", "qmix": ""}
    nested = "nested" in (views.get("intervals") or {}).get("headline", "")
    ci_words = "95% CI over profiles, then trials (nested)" if nested else charts.CI_OVER_PROFILES
    head = [r for r in views["headline"] if r["coverage_mean"] is not None]
    if head:
        out["forest"] = charts.forest([{"label": r["arm"], "mean": r["coverage_mean"], "lo": r["coverage_ci_low"],
                                        "hi": r["coverage_ci_high"], "n": r["n_scored"]} for r in head],
                                      title=f"Mean active coverage by clinician (judge: {views['primary']})",
                                      ci_words=ci_words)
    m = views["matrix"]
    if m["phenotypes"]:
        marks = ["▲ masked" if m["alignment"].get(p) == "masked" else "" for p in m["phenotypes"]]
        out["matrix"] = charts.heatmap(m["values"], m["counts"], title="Active coverage (%) by phenotype and clinician",
                                       row_labels=[names.get(p, p) for p in m["phenotypes"]], col_labels=m["arms"],
                                       row_marks=marks, links=m.get("links"))
    d = views["domains"]
    if d["domains"]:
        out["domains"] = charts.heatmap(d["values"], d["counts"], title="Hidden domain actively surfaced (% of conversations)",
                                        row_labels=[labels.get(x, x) for x in d["domains"]], col_labels=d["arms"],
                                        cbar_label="conversations surfacing the domain (%)", links=d.get("links"))
        out["domain_rates"] = charts.domain_rates(d, labels, ci_words)
    if views["trajectories"]:
        out["trajectory"] = charts.trajectories(views["trajectories"], max_turn=views["max_turn"], ci_words=ci_words)
        out["qmix"] = charts.question_mix(views["qmix"], qtypes=list(QUESTION_TYPES), max_turn=views["max_turn"])
    return out


def provenance(data: RunData) -> dict[str, Any]:
    manifest = data.manifest
    models = []
    for role, specs in sorted((manifest.get("models") or {}).items()):
        specs = specs if isinstance(specs, list) else [specs]
        names = [f"{s.get('alias')} ({s.get('model')})" if isinstance(s, dict) and s.get("model") and s.get("model") != s.get("alias")
                 else str(s.get("alias") if isinstance(s, dict) else s) for s in specs]
        models.append((role, ", ".join(names)))
    stages = [{"name": name, "status": info.get("status", ""), "finished": info.get("finished", ""),
               "hash": str(info.get("config_hash", ""))[:12]}
              for name, info in sorted((manifest.get("stages") or {}).items()) if isinstance(info, dict)]
    versions = manifest.get("versions") or {}
    return {"root": str(data.paths.root), "config_hash": manifest.get("config_hash", ""), "models": models, "stages": stages,
            "versions": " · ".join(f"{k} {v}" for k, v in versions.items() if v != "not installed") or "–",
            "created": manifest.get("created", ""), "updated": manifest.get("updated", "")}


def headline_csv(rows: list[dict[str, Any]]) -> str:
    return csv_text(headline_columns(), rows)


def _viewer_rows(data: RunData, views: dict[str, Any], shard_of: ShardAssignment,
                 coverage: Mapping[str, float | None]) -> Iterator[tuple[list[Any], str | None]]:
    """Per conversation in id order: its viewer entry [id, shard, arm, profile, status, drill-down codes,
    trial, coverage] and its bleed flags per hidden domain when it bled (shown on the drill-down squares,
    caught ones too), else None."""
    arm_index = {arm: i for i, arm in enumerate(views["arms"])}
    judged_of = in_key_order(data.judgments.get(views["primary"], {}) if views["primary"] else {})
    coverage_of = in_key_order(coverage)
    conversations = items_in_key_order(data.conversations)
    last_profile: tuple[str | None, dict[str, Any], str] = (None, {}, "")  # a profile's conversations sort together
    for cid, conv in conversations:
        pid = conv.get("profile_id", "")
        if pid != last_profile[0]:
            last_profile = (pid, data.profiles.get(pid, {}), shard_of.of_profile(pid))
        _, profile, shard = last_profile
        hidden = [d["domain"] for d in profile.get("hidden", [])]
        status = conv.get("status", "ok")
        judged = judged_of(cid)
        outcomes = judged_outcomes(conv, judged)
        if status == "ok" and judged is not None and judged.get("status", "ok") != "ok":
            status = f"judge: {judged.get('status')}"
        flags = None
        if judged is not None and status == "ok" and "1" in (bleed := bleed_flags(judged.get("sig", ""), len(hidden))):
            flags = bleed
        yield ([cid, shard, arm_index[arm_of(conv)], pid, status, outcome_codes(outcomes, hidden), conv.get("trial", 0),
                coverage_of(cid)], flags)


def count_profiles(data: RunData) -> int:
    """How many distinct profiles the conversations are of (counted in the spill store, not a set in memory)."""
    seen = SpilledSet(spill_store(data))
    for conv in data.conversations.values():
        seen.add(json.dumps(conv.get("profile_id")))
    return len(seen)


def viewer_index(data: RunData, views: dict[str, Any], shard_of: ShardAssignment, labels: dict[str, str],
                 names: dict[str, str], report_dir: Path, n_profiles: int,
                 coverage: Mapping[str, float | None]) -> dict[str, Any]:
    """The viewer's index as index.html carries it (``conversation_index.place_index``: paged when large),
    with each conversation's active coverage by the primary judge (``tables.conversation_coverage``)."""

    def profile_entry(pid: str) -> list[Any]:
        profile = data.profiles.get(pid, {})
        demo = profile.get("demographics", {})
        who = ", ".join(str(x) for x in (demo.get("age"), demo.get("sex")) if x)
        presenting = profile.get("presenting", {}).get("domain", "")
        return [profile.get("phenotype", "?"), profile.get("alignment", ""),
                [d["domain"] for d in profile.get("hidden", [])],
                " · ".join(x for x in (who, f"presents with {labels.get(presenting, presenting)}" if presenting else "") if x)]

    placed = place_index(_viewer_rows(data, views, shard_of, coverage), n_profiles, profile_entry, report_dir,
                         len(data.conversations))
    return {"judges": views["judges"], "primary": views["primary"], "labels": labels, "convs": placed.convs,
            "bled": placed.bled, "profiles": placed.profiles,
            "phenotype_names": {p: names[p] for p in sorted(placed.phenotypes) if p in names},
            "arms": [{"label": views["arm_labels"][a], "clinician": a[0], "condition": a[1], "mode": a[2]} for a in views["arms"]],
            "start": placed.start, **placed.paging}


def build_report(run_dir: Path, *, judge: str | None = None, progress: Callable[[str], None] | None = None,
                 shard_progress: Callable[[int], None] | None = None, figures: tuple[str, ...] = ()) -> ReportResult:
    step, timings = _steps(progress)
    paths = RunPaths(Path(run_dir))
    step("reading records and metrics")
    data = load_run(paths, spill_in=paths.report_dir)
    try:
        result = _build(data, paths, judge, step, timings, shard_progress)
        if figures:
            step("writing figure files")
            result.figures = figure_files.write_figures(render_charts, result.views, domain_labels(data),
                                                        paths.report_dir / "figures", figures,
                                                        sections=lambda: section_list.optional_sections(data),
                                                        run_root=paths.root)
            step(None)
        return result
    finally:
        data.close()  # the record files held open for the viewer shards


def _build(data: RunData, paths: RunPaths, judge: str | None, step, timings: dict[str, float],
           shard_progress: Callable[[int], None] | None) -> ReportResult:
    judges = order_judges(data.judgments, data.manifest, judge)
    data.primary_judge = judges[0] if judges else None
    step("computing views")
    views = build_views(data, judges)
    # read now: read in the index.html step, beside the sections' own long-table reads, it raised the peak (measured)
    coverage = tables.conversation_coverage(data, views["primary"])
    cell_links.add_links(views)
    labels = domain_labels(data)
    names = figure_files.phenotype_names(paths.root)
    step("drawing charts")
    chart_svgs = render_charts(views, labels, names)
    step("writing transcript shards")
    fingerprint = sources_fingerprint([paths.profiles, *paths.conversation_files(), *paths.judgment_files(),
                                              paths.metrics("diagnosis")], judges)
    shard_of = write_shards(paths.report_shards_dir, data.profiles, data.conversations, data.index, judges,
                            progress=shard_progress,
                            fingerprint=fingerprint, diagnosis=viewer.diagnosis_facts(
                                read_columns(data.tables, "diagnosis", viewer.DIAGNOSIS_FACT_COLUMNS),
                                into=SpilledRows(spill_store(data))))
    step("writing index.html and summary.md")
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_profiles = count_profiles(data)
    run = {"name": data.manifest.get("run_name") or paths.root.name, "primary": views["primary"], "judges": judges,
           "generated": generated, "n_profiles": n_profiles,
           "n_conversations": len(data.conversations), "n_clinicians": len({a[0] for a in views["arms"]}),
           "max_turn": views["max_turn"]}
    for row in views["headline"]:
        row["fmt"] = fmt.headline_cells(row)
    for m in views["matrix"]["masking"]:
        m["masked_fmt"], m["aligned_fmt"] = fmt.pct(m["masked_mean"]), fmt.pct(m["aligned_mean"])
        m["masked_ci"], m["aligned_ci"] = fmt.ci(m["masked_lo"], m["masked_hi"]), fmt.ci(m["aligned_lo"], m["aligned_hi"])
        m["diff_fmt"] = fmt.points(m["difference"])
        m["model_fmt"] = f"{fmt.points(m['model_difference'])} {fmt.ci(m['model_lo'], m['model_hi'])}".strip()
        m["model_p_fmt"] = fmt.p_value(m["model_p"])
    for a in views["agreement"]:
        a["raw_fmt"], a["kappa_fmt"] = fmt.pct(a["raw_agreement"]), fmt.kappa(a["kappa"])
    for d in (views["hotspots"] or {}).get("domains", []):
        d["rate_fmt"] = fmt.pct(d["rate"])
    page = html.render_html({
        "run": run, "notes": data.notes, "answers": views["answers"], "headline": views["headline"], "charts": chart_svgs,
        "intervals": views["intervals"],
        "comparisons": html.comparisons_table(views["comparisons"]), "matrix": views["matrix"],
        "multi_scope": len({(r["condition"], r["patient_mode"]) for r in views["comparisons"]}) > 1,
        "agreement": {"rows": views["agreement"], "hot": views["hotspots"]}, "labels": labels,
        "phenotypes": [(p, names.get(p, p)) for p in sorted({p.get("phenotype", "") for p in data.profiles.values()})],
        "arms": [{"label": views["arm_labels"][a]} for a in views["arms"]],
        "headline_metrics": [{"header": m.header(), "note": m.header_note(), "label": m.label,
                              "definition": m.definition} for m in registry.headline_metrics()],
        "qtypes": ["closed_hypothesis", "open", "clarifying", "treatment_planning", "other"],
        "sections": section_list.optional_sections(data), "prov": provenance(data),
        "ie_data": viewer_index(data, views, shard_of, labels, names, paths.report_dir, n_profiles, coverage),
    })
    index = paths.report_index
    write_text_atomic(index, page)
    summary_path = paths.report_summary
    write_text_atomic(summary_path, summary.render_markdown(run, views, data.notes, labels,
                                                              extra=section_list.summary_markdown(data)))
    headline_path = paths.report_headline
    write_text_atomic(headline_path, headline_csv(views["headline"]))
    step(None)
    return ReportResult(index, summary_path, headline_path, views, data.notes, timings)
