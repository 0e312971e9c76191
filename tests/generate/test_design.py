"""The hidden-domain sampling design (generate.design): hand-worked inclusion probabilities by exact
enumeration, a statistical test of realised rates, literature mode, meaning-level dedup on every
shipped phenotype, `phenotypes rates` and `<run>/sampling_rates.csv`."""

from __future__ import annotations

import csv
import json
import random
from collections import Counter
from math import isclose

import pytest
from scipy.stats import binom
from typer.testing import CliRunner

from intake_eval.catalog.load import load_and_validate, load_catalog
from intake_eval.catalog.schema import (
    ConflictRule,
    DemographicConstraints,
    OptionalDomain,
    Phenotype,
    PrincipalDiagnosis,
)
from intake_eval.cli import app
from intake_eval.generate.dedup import check_symptom_supply, describes_hidden
from intake_eval.generate.design import (
    DesignError,
    build_design,
    catalog_rates,
    check_designs,
    design_for,
)
from intake_eval.generate.sampling import plan_phenotypes, sample_profile


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _toy(**fields) -> Phenotype:
    base = dict(id="toy", name="toy", description="toy", alignment="aligned", population_weight=1, weight_source="x",
                presenting=["depression"], principal_diagnosis=PrincipalDiagnosis(domain="depression", name="MDD"),
                demographics=DemographicConstraints())
    return Phenotype(**(base | fields))


def _options(**rates: float) -> list[OptionalDomain]:
    return [OptionalDomain(domain=d, probability=p, source="x") for d, p in rates.items()]


# ---------------------------------------------------------------- hand-worked designs

def test_seed_design_small_phenotype_by_hand():
    # 1 required + 2-3 hidden → 1 or 2 open slots (½ each), E[m] = 1.5. Cited 0.2, 0.35, 0.5 (sum 1.05):
    # lift c = 1.5 / 1.05 = 10/7, targets 2/7, 1/2, 5/7. Working odds w = (1, 2, 4) give, by enumeration,
    #   size 1: P({i}) = w_i / 7 → 1/7, 2/7, 4/7;  size 2: P({i,j}) = w_i w_j / 14 → {ab} 2/14, {ac} 4/14, {bc} 8/14
    #   π_a = ½(1/7) + ½(6/14) = 2/7, π_b = ½(2/7) + ½(10/14) = 1/2, π_c = ½(4/7) + ½(12/14) = 5/7.
    pheno = _toy(hidden_required=["generalized_anxiety"], hidden_count=(2, 3),
                 hidden_optional=_options(panic=0.2, insomnia=0.35, alcohol_use=0.5))
    design = build_design(pheno, "depression", "seed")
    assert isclose(design.lift, 10 / 7)
    expected = {("panic",): 1, ("insomnia",): 2, ("alcohol_use",): 4,
                ("panic", "insomnia"): 1, ("panic", "alcohol_use"): 2, ("insomnia", "alcohol_use"): 4}
    got = {sample: probability for sample, _, probability in design.samples}
    assert set(got) == set(expected)
    for sample, fourteenths in expected.items():
        assert isclose(got[sample], fourteenths / 14, abs_tol=1e-9), sample
    for domain, value in {"panic": 2 / 7, "insomnia": 1 / 2, "alcohol_use": 5 / 7}.items():
        assert isclose(design.inclusion[domain], value, abs_tol=1e-9)
        assert isclose(design.inclusion[domain] / design.cited[domain], 10 / 7, abs_tol=1e-9)  # one lift
    assert design.count_probability == pytest.approx({2: 0.5, 3: 0.5})


def test_literature_design_small_phenotype_by_hand():
    # Nothing required, two domains at 0.6: Poisson sampling conditioned on at least one hidden domain,
    # calibrated so each is still at 0.6: P({a}) = P({b}) = 0.4, P({a,b}) = 0.2 (0.4 + 0.2 = 0.6).
    pheno = _toy(hidden_optional=_options(panic=0.6, insomnia=0.6))
    design = build_design(pheno, "depression", "literature")
    got = {sample: probability for sample, _, probability in design.samples}
    assert got == pytest.approx({("panic",): 0.4, ("insomnia",): 0.4, ("panic", "insomnia"): 0.2})
    assert design.count_probability == pytest.approx({1: 0.8, 2: 0.2})
    # with a required domain it is plain Poisson sampling: independent draws at the cited rates
    plain = build_design(_toy(hidden_required=["generalized_anxiety"], hidden_optional=_options(panic=0.6, insomnia=0.3)),
                         "depression", "literature")
    got = {sample: probability for sample, _, probability in plain.samples}
    assert got == pytest.approx({(): 0.28, ("panic",): 0.42, ("insomnia",): 0.12, ("panic", "insomnia"): 0.18})


def test_every_design_matches_an_independent_enumeration(catalog):
    """Each shipped design's inclusion probabilities equal the sum over its enumerated samples, the
    samples are conflict-free and of the stated sizes, and the seed targets are min(1, c·p)."""
    for pheno in catalog.phenotypes.values():
        for presenting in pheno.presenting:
            design = design_for(pheno, presenting, "seed")
            assert isclose(sum(p for _, _, p in design.samples), 1.0, abs_tol=1e-9)
            for sample, size, _ in design.samples:
                assert len(sample) == size and not any({r.keep, r.drop} <= set(sample) for r in pheno.conflicts)
            groups = [d for d in design.units if not any(d in (r.keep, r.drop) for r in pheno.conflicts)]
            for domain in groups:  # units outside conflict pairs: one lift, capped at 1
                assert isclose(design.inclusion[domain], min(1.0, design.lift * design.cited[domain]), abs_tol=1e-8)
            slots = sum(design.inclusion[d] for d in design.units)
            assert isclose(slots + len(design.required), (pheno.hidden_count[0] + pheno.hidden_count[1]) / 2,
                           abs_tol=1e-8)


def test_each_design_is_conditional_poisson_within_a_count(catalog):
    """Maximum entropy: within one hidden count, log P(S) is a constant plus a sum of per-domain
    log working odds (P(S) ∝ Π w_i), which least squares fits exactly."""
    import numpy as np

    for pheno_id, presenting in (("adult_adhd", "insomnia"), ("somatic_presentation", "chronic_pain"),
                                 ("ocd_spectrum", "ocd")):
        design = design_for(catalog.phenotypes[pheno_id], presenting, "seed")
        sizes = sorted({size for _, size, _ in design.samples})
        columns = list(design.units) + [f"size{size}" for size in sizes]
        rows = [[float(u in sample) for u in design.units] + [float(size == k) for k in sizes]
                for sample, size, _ in design.samples]
        logs = np.log([p for _, _, p in design.samples])
        fitted, *_ = np.linalg.lstsq(np.array(rows), logs, rcond=None)
        assert np.abs(np.array(rows) @ fitted - logs).max() < 1e-7, (pheno_id, columns)


def test_conflicting_domains_share_their_slot_in_proportion():
    pheno = _toy(hidden_count=(4, 4), hidden_optional=_options(
        generalized_anxiety=1.0, panic=1.0, insomnia=1.0, alcohol_use=1.0, mania=0.6, hypomania=0.4),
        conflicts=[ConflictRule(keep="mania", drop="hypomania")])
    design = build_design(pheno, "depression", "seed")  # 4 slots over weights 1+1+1+1+(0.6+0.4): lift 0.8
    assert design.inclusion["mania"] == pytest.approx(0.48) and design.inclusion["hypomania"] == pytest.approx(0.32)
    assert all(not {"mania", "hypomania"} <= set(sample) for sample, _, _ in design.samples)
    crowded = build_design(_toy(hidden_count=(4, 4), hidden_optional=_options(
        generalized_anxiety=0.5, panic=0.5, insomnia=0.5, mania=0.6, hypomania=0.4),
        conflicts=[ConflictRule(keep="mania", drop="hypomania")]), "depression", "seed")
    # 4 slots from 3 singles + a pair that fits only one: every group is full, the pair split 0.6 : 0.4
    assert crowded.inclusion["mania"] == pytest.approx(0.6) and crowded.inclusion["hypomania"] == pytest.approx(0.4)
    assert crowded.inclusion["panic"] == pytest.approx(1.0)


def test_rates_no_design_can_realise_are_one_line_errors():
    pheno = _toy(hidden_optional=_options(panic=0.5, insomnia=0.5))  # 4-5 hidden from 2 domains
    with pytest.raises(DesignError, match="toy .*presenting depression.*open slots"):
        build_design(pheno, "depression", "seed")


# ---------------------------------------------------------------- realised rates

def test_realised_rates_follow_the_design_within_binomial_tolerance(catalog):
    """1800 stratified profiles (100 per phenotype): every phenotype × domain count lies in its
    central binomial interval at a Bonferroni-adjusted 0.1% level."""
    plan = plan_phenotypes(catalog, 1800, "stratified", 3)
    rates = {(r.phenotype, r.domain): r for r in catalog_rates(catalog, "seed")}
    presenting_of: dict[tuple[str, str], Counter] = {}
    hits: Counter = Counter()
    for index, phenotype in enumerate(plan):
        profile = sample_profile(catalog, phenotype, index, 3)
        for (pid, domain), _ in rates.items():
            if pid == phenotype and profile.presenting.domain != domain:
                presenting_of.setdefault((pid, domain), Counter())[profile.presenting.domain] += 1
                hits[(pid, domain)] += domain in profile.hidden_domains
    level = 0.001 / len(rates)
    for key, rate in rates.items():
        by_presenting = presenting_of[key]
        n = sum(by_presenting.values())
        expected = sum(count * rate.by_presenting[p] for p, count in by_presenting.items()) / n
        low, high = binom.interval(1 - level, n, expected)
        assert low <= hits[key] <= high, (key, hits[key], n, expected)


def test_the_draw_reproduces_each_designs_inclusion_probabilities(catalog):
    pheno = catalog.phenotypes["somatic_presentation"]  # a conflict pair at its capacity with chronic_pain presenting
    design = design_for(pheno, "chronic_pain", "seed")
    rng = random.Random("design-draw")
    draws = 6000
    counts = Counter(domain for _ in range(draws) for domain in design.draw(rng, 4, 5)[1])
    level = 0.001 / len(design.units)
    for domain in design.units:
        low, high = binom.interval(1 - level, draws, design.inclusion[domain])
        assert low <= counts[domain] <= high, domain


def test_literature_mode_varies_the_count_and_keeps_one_hidden(catalog):
    for index in range(400):
        pid = list(catalog.phenotypes)[index % 18]
        profile = sample_profile(catalog, pid, index, 5, hidden_count="literature")
        assert len(profile.hidden_domains) >= 1
    counts = Counter(len(sample_profile(catalog, "ocd_spectrum", i, 5, hidden_count="literature").hidden_domains)
                     for i in range(300))
    assert min(counts) == 1 and max(counts) >= 5  # ocd_spectrum requires nothing: the count spreads


def test_shipped_catalog_designs_and_symptom_supply_are_valid(catalog):
    assert check_designs(catalog) == []
    assert check_symptom_supply(catalog) == []


# ---------------------------------------------------------------- meaning-level dedup

def test_no_symptom_describes_another_hidden_domain_on_any_shipped_phenotype(catalog):
    for pid in catalog.phenotypes:
        for index in range(120):
            profile = sample_profile(catalog, pid, index, 17)
            hidden = set(profile.hidden_domains)
            for draw in [profile.presenting, *profile.hidden]:
                domain = catalog.domains[draw.domain]
                assert not set(draw.symptom_ids) & describes_hidden(domain, hidden), (pid, index, draw.domain)


def test_poor_sleep_is_never_the_presenting_depressions_when_insomnia_is_hidden(catalog):
    seen = 0
    for index in range(300):
        profile = sample_profile(catalog, "anxious_depression", index, 2)
        if "insomnia" in profile.hidden_domains:
            seen += 1
            assert "poor_sleep" not in profile.presenting.symptom_ids
    assert seen > 100


def test_validate_names_unknown_and_inconsistent_describes(tmp_path, catalog):
    shipped = (catalog.directory / "domains.yaml").read_text()
    broken = shipped.replace("describes: [insomnia]}", "describes: [insomia]}", 1)
    broken = broken.replace("{id: irritable, text: getting irritable and snapping at people, describes: [irritability]}",
                            "{id: irritable, text: getting irritable and snapping at people}", 1)
    (tmp_path / "domains.yaml").write_text(broken)
    (tmp_path / "ocd_spectrum.yaml").write_text((catalog.directory / "ocd_spectrum.yaml").read_text())
    with pytest.raises(Exception) as error:
        load_and_validate(tmp_path)
    text = str(error.value)
    assert "symptoms[poor_sleep].describes: unknown domain id 'insomia' (did you mean 'insomnia'?)" in text
    assert "symptoms[irritable].describes: differs from the same symptom id" in text


# ---------------------------------------------------------------- the command and the run folder

def test_phenotypes_rates_json_and_text():
    runner = CliRunner()
    result = runner.invoke(app, ["phenotypes", "rates", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 140 and {"phenotype", "domain", "cited", "design", "lift", "source"} <= set(rows[0])
    by_key = {(r["phenotype"], r["domain"]): r for r in rows}
    assert by_key[("insomnia_depression", "alcohol_use")]["design"] == pytest.approx(0.424242, abs=1e-6)
    text = runner.invoke(app, ["phenotypes", "rates", "insomnia_depression"])
    assert text.exit_code == 0 and "lift 2.12 with insomnia" in text.output
    assert max(len(line) for line in text.output.splitlines()) <= 80
    literature = json.loads(runner.invoke(app, ["phenotypes", "rates", "--json", "--hidden-count", "literature"]).output)
    assert all(r["design"] == pytest.approx(r["cited"], abs=0.02) for r in literature)
    bad = runner.invoke(app, ["phenotypes", "rates", "--hidden-count", "many"])
    assert bad.exit_code == 2 and "--hidden-count must be seed or literature" in bad.output


def test_generate_writes_sampling_rates_csv_in_both_modes(tmp_path):
    runner = CliRunner()
    for mode in ("seed", "literature"):
        run_dir = tmp_path / mode
        result = runner.invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "36", "--seed", "3",
                                     "--hidden-count", mode])
        assert result.exit_code == 0, result.output
        assert "sampling design:" in result.output
        rows = list(csv.DictReader((run_dir / "sampling_rates.csv").open()))
        assert len(rows) == 140 and {r["hidden_count"] for r in rows} == {mode}
        assert {"phenotype", "domain", "source", "cited", "design", "realised", "n_eligible", "hidden_count"} <= set(rows[0])
        profiles = [json.loads(line) for line in (run_dir / "profiles.jsonl").read_text().splitlines()]
        row = next(r for r in rows if (r["phenotype"], r["domain"]) == ("adult_adhd", "depression"))
        eligible = [p for p in profiles if p["phenotype"] == "adult_adhd" and p["presenting"]["domain"] != "depression"]
        assert int(row["n_eligible"]) == len(eligible)
        assert int(row["n_included"]) == sum("depression" in [h["domain"] for h in p["hidden"]] for p in eligible)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["stages"]["generate"]["config"]["hidden_count"] == mode


def test_no_presenting_symptom_reads_as_a_hidden_domain_unless_declared(catalog):
    """The offline classifier finds in a presenting domain's symptom text only domains that cannot be
    hidden with it, or that the symptom declares it describes (and dedup then keeps it out): so a
    verbatim render passes the opening check."""
    from intake_eval.catalog.classifier import mentions

    undeclared = set()
    for pheno in catalog.phenotypes.values():
        for presenting in pheno.presenting:
            design = design_for(pheno, presenting, "literature")  # the widest support
            possible = set(design.required) | {d for sample, _, p in design.samples if p > 0 for d in sample}
            for symptom in catalog.domains[presenting].symptoms:
                read = set(mentions(f"Lately I have been {symptom.text}.")) & possible
                undeclared |= {(pheno.id, presenting, symptom.id, d) for d in read - set(symptom.describes)}
    assert undeclared == set()
