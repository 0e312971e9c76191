"""Repeated-trial figures: hand-worked numbers on a real run folder, and the CLI with --trials."""

from __future__ import annotations

import csv
import math

import pytest

from intake_eval.core.records import (
    Demographics,
    DomainDraw,
    DomainLabel,
    Judgment,
    Profile,
    TurnJudgment,
)
from intake_eval.core.store import RunPaths, append_record
from intake_eval.metrics.trials import (
    TrialObservation,
    between_trial_sd,
    cluster_bootstrap_ci,
    naive_bootstrap_ci,
    trial_figures,
    write_trial_metrics,
)

JUDGE, CLINICIAN = "offline/judge", "offline/screener"
HIDDEN = {
    "P00000": ["insomnia", "panic", "alcohol_use", "ptsd"],
    "P00001": ["depression", "ocd", "adhd", "binge_eating"],
}
# Which hidden domains each trial caught (asked about and disclosed at the same turn).
CAUGHT = {
    "P00000": [{"insomnia", "panic"}, {"insomnia"}, {"insomnia", "panic", "alcohol_use"}],
    "P00001": [{"depression"}, {"depression"}, {"depression"}],
}


def _profile(profile_id: str) -> Profile:
    draw = lambda d: DomainDraw(domain=d, severity="moderate", symptoms=[f"{d} symptom"])  # noqa: E731
    return Profile(profile_id=profile_id, phenotype="demo", presenting=draw("generalized_anxiety"),
                   hidden=[draw(d) for d in HIDDEN[profile_id]], demographics=Demographics(age=30, sex="female"))


def _judgment(cid: str, profile_id: str, trial: int, caught: set[str]) -> Judgment:
    hidden = HIDDEN[profile_id]
    turns = [TurnJudgment(turn=0, question_type="other", domains={d: DomainLabel(asked_about=False, disclosed=False) for d in hidden})]
    for number, domain in enumerate(hidden, start=1):
        hit = domain in caught
        # an uncaught domain is asked about but not disclosed (not caught), never "caught" by bleed
        turns.append(TurnJudgment(turn=number, question_type="closed_hypothesis", domains={
            d: DomainLabel(asked_about=(d == domain), disclosed=(d == domain and hit)) for d in hidden}))
    return Judgment(conversation_id=cid, judge=JUDGE, clinician=CLINICIAN, profile_id=profile_id, trial=trial,
                    phenotype="demo", condition="minimal", patient_mode="prompted", turns=turns)


def _write_run(paths: RunPaths, caught: dict[str, list[set[str]]]) -> None:
    rows = []
    for profile_id, trials in caught.items():
        append_record(paths.profiles, _profile(profile_id))
        for trial, domains in enumerate(trials):
            cid = f"{profile_id}.offline__screener.minimal.prompted.t{trial}"
            append_record(paths.judgments(JUDGE, CLINICIAN), _judgment(cid, profile_id, trial, domains))
            rows.append({"conversation_id": cid, "judge": JUDGE, "clinician": CLINICIAN, "phenotype": "demo",
                         "profile_id": profile_id, "condition": "minimal", "patient_mode": "prompted", "trial": trial,
                         "active_coverage_rate": len(domains) / len(HIDDEN[profile_id]), "bleed_rate": 0.0})
    # a judge error row (empty coverage) must be excluded, like everywhere else
    rows.append({"conversation_id": "P00001.x.minimal.prompted.t9", "judge": JUDGE, "clinician": CLINICIAN,
                 "phenotype": "demo", "profile_id": "P00001", "condition": "minimal", "patient_mode": "prompted",
                 "trial": 9, "active_coverage_rate": "", "bleed_rate": ""})
    paths.metrics_dir.mkdir(parents=True, exist_ok=True)
    with open(paths.metrics("conversations"), "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _write_judged_run(paths: RunPaths, caught: dict[str, list[set[str]]]) -> None:
    """Profiles and judgments on disk; metrics/conversations.csv from the real metrics writer."""
    from intake_eval.metrics.tables import write_metrics
    from intake_eval.stage_kinds import stage_kinds

    for profile_id, trials in caught.items():
        append_record(paths.profiles, _profile(profile_id))
        for trial, domains in enumerate(trials):
            cid = f"{profile_id}.offline__screener.minimal.prompted.t{trial}"
            append_record(paths.judgments(JUDGE, CLINICIAN), _judgment(cid, profile_id, trial, domains))
    write_metrics(paths, stage_kinds())


@pytest.mark.parametrize("source", ["metrics writer", "judgments fallback"])
def test_hand_worked_trial_figures(run_dir, source):
    paths = RunPaths(run_dir)
    if source == "metrics writer":
        _write_judged_run(paths, CAUGHT)
    else:  # a conversations.csv without caught/missed columns: catches come from the judgments
        _write_run(paths, CAUGHT)
    target = write_trial_metrics(paths)
    assert target == paths.metrics("trials")
    [row] = list(csv.DictReader(open(target)))
    assert (row["judge"], row["clinician"], row["condition"], row["patient_mode"]) == (JUDGE, CLINICIAN, "minimal", "prompted")
    assert (row["profiles"], row["trials"], row["min_trials"], row["conversations"]) == ("2", "3", "3", "6")
    # P00000: 0.5, 0.25, 0.75 (sample variance 0.0625); P00001: 0.25 ×3 (variance 0)
    assert float(row["mean_active_coverage"]) == pytest.approx(0.375)
    assert float(row["between_trial_sd"]) == pytest.approx(math.sqrt((0.0625 + 0) / 2), rel=1e-5)
    assert float(row["between_profile_sd"]) == pytest.approx(math.sqrt(2 * 0.125**2), rel=1e-5)
    # 8 (profile, domain) slots: P00000 insomnia in all, panic/alcohol in some, ptsd never; P00001 depression in all
    assert (row["domain_slots"], row["caught_any"], row["caught_all"]) == ("8", "4", "2")
    assert float(row["share_caught_any"]) == pytest.approx(0.5)
    assert float(row["share_caught_all"]) == pytest.approx(0.25)
    assert float(row["consistency"]) == pytest.approx(0.5)
    low, high = float(row["ci_low"]), float(row["ci_high"])
    assert 0.25 <= low <= 0.375 <= high <= 0.75
    assert "cluster bootstrap" in row["ci_method"]


def test_no_trials_means_no_trials_csv(run_dir):
    paths = RunPaths(run_dir)
    _write_run(paths, {"P00000": [{"insomnia"}]})
    paths.metrics("trials").write_text("stale from an earlier run\n")
    assert write_trial_metrics(paths) is None
    assert not paths.metrics("trials").exists()


def test_cluster_ci_is_wider_than_naive_when_trials_correlate():
    # profiles differ completely, trials within a profile are identical: 6 clusters, not 18 draws
    values = [[1.0] * 3, [0.0] * 3, [1.0] * 3, [0.0] * 3, [1.0] * 3, [0.5] * 3]
    cluster = cluster_bootstrap_ci(values, seed="x")
    naive = naive_bootstrap_ci([v for group in values for v in group], seed="x")
    assert cluster[1] - cluster[0] > 1.3 * (naive[1] - naive[0])
    assert between_trial_sd(values) == 0.0
    assert cluster == cluster_bootstrap_ci(values, seed="x")  # seeded: reproducible


def test_unequal_trial_counts_and_single_trials():
    observations = [TrialObservation("A", 0, 1.0, {"x": True}), TrialObservation("A", 1, 0.0, {"x": False}),
                    TrialObservation("B", 0, 0.5, {"y": True})]
    figures = trial_figures(observations, seed="s")
    assert (figures["trials"], figures["min_trials"], figures["conversations"]) == (2, 1, 3)
    assert figures["between_trial_sd"] == pytest.approx(math.sqrt(0.5))  # only A has two trials
    assert (figures["caught_any"], figures["caught_all"]) == (2, 1)
    assert 0.0 <= figures["ci_low"] <= figures["mean_active_coverage"] <= figures["ci_high"] <= 1.0


def _catalog_profile(index: int, hidden: list[str]) -> Profile:
    from intake_eval.catalog.load import load_catalog

    catalog = load_catalog()

    def draw(domain: str) -> DomainDraw:
        symptoms = catalog.domains[domain].symptoms[:3]
        return DomainDraw(domain=domain, label=catalog.domains[domain].label, severity="moderate",
                          symptoms=[s.text for s in symptoms], symptom_ids=[s.id for s in symptoms],
                          phenomenology=" ".join(f"Lately I've been {s.text}." for s in symptoms))

    return Profile(profile_id=f"P{index:05d}", index=index, phenotype=f"demo_{index % 2}", presenting=draw("depression"),
                   hidden=[draw(d) for d in hidden], demographics=Demographics(age=40, sex="male", name=f"Sam{index}"))


@pytest.mark.slow
def test_trials_3_on_an_offline_run_produces_the_figures(run_dir):
    from typer.testing import CliRunner

    from intake_eval.cli import app

    paths = RunPaths(run_dir)
    for index, hidden in enumerate([["panic", "alcohol_use", "ocd", "adhd"], ["social_anxiety", "cannabis_use", "adhd", "panic"],
                                    ["alcohol_use", "ocd", "panic", "social_anxiety", "adhd"]], start=1):
        append_record(paths.profiles, _catalog_profile(index, hidden))
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--clinician", "offline/screener", "--clinician", "offline/anchored",
                                 "--patient", "offline/patient", "--turns", "6", "--trials", "3", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["judge", "--judge", "offline/judge", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    from intake_eval.metrics.tables import write_metrics
    from intake_eval.stage_kinds import stage_kinds

    write_metrics(paths, stage_kinds())  # idempotent: the judge command may already have written it
    target = write_trial_metrics(paths)
    rows = {row["clinician"]: row for row in csv.DictReader(open(target))}
    assert set(rows) == {"offline/screener", "offline/anchored"}
    for row in rows.values():
        assert (row["profiles"], row["trials"], row["min_trials"], row["conversations"]) == ("3", "3", "3", "9")
        assert row["domain_slots"] == "13"
        assert int(row["caught_all"]) <= int(row["caught_any"]) <= 13
        assert float(row["ci_low"]) <= float(row["mean_active_coverage"]) <= float(row["ci_high"])
        assert float(row["between_trial_sd"]) >= 0.0
    # offline/screener varies only its wording and order across trials, never its coverage
    screener = rows["offline/screener"]
    assert float(screener["between_trial_sd"]) == 0.0 and screener["caught_all"] == screener["caught_any"]
    assert float(screener["consistency"]) == 1.0
    # the ceiling clinician screens systematically: it catches more than the floor one
    assert float(rows["offline/screener"]["mean_active_coverage"]) > float(rows["offline/anchored"]["mean_active_coverage"])


def test_trials_section_and_headline_state_one_interval(run_dir):
    """With trials the headline (clinicians.csv) and trials.csv give the same nested interval for the same mean."""
    paths = RunPaths(run_dir)
    _write_judged_run(paths, CAUGHT)
    [trials] = list(csv.DictReader(open(write_trial_metrics(paths))))
    [headline] = list(csv.DictReader(open(paths.metrics("clinicians"))))
    assert float(headline["mean_active_coverage"]) == float(trials["mean_active_coverage"]) == pytest.approx(0.375)
    assert (headline["mean_active_coverage_ci_low"], headline["mean_active_coverage_ci_high"]) == (trials["ci_low"], trials["ci_high"])
    assert headline["ci_method"] == trials["ci_method"] and headline["ci_method"].startswith("nested")
