"""The shipped catalog's content, and the validator's one-line-per-problem errors on broken fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from intake_eval.catalog.load import load_and_validate, load_catalog
from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR
from intake_eval.cli import app
from intake_eval.core.errors import IntakeEvalError

ARCHITECTURE_DOMAINS = {
    "depression", "hypomania", "mania", "generalized_anxiety", "panic", "agoraphobia", "social_anxiety", "insomnia",
    "nightmares", "ptsd", "alcohol_use", "cannabis_use", "opioid_misuse", "other_drug_use", "suicidality",
    "self_harm", "psychosis", "intrusive_harm_thoughts", "ocd", "restrictive_eating", "binge_eating", "purging",
    "body_image", "adhd", "somatic_symptoms", "health_anxiety", "irritability", "chronic_pain", "cognitive_decline",
    "emotional_dysregulation", "dissociation",
}
SAFETY_CRITICAL = {"suicidality", "self_harm", "intrusive_harm_thoughts", "psychosis", "mania"}
STUDY_PHENOTYPES = {"bipolar_masked", "postpartum_intrusive", "fep_mood", "trauma_substance",
                    "eating_disorder_complex", "binge_internalizing", "somatic_presentation", "ocd_spectrum"}


# ---------------------------------------------------------------- the shipped catalog

def test_shipped_catalog_uses_exactly_the_architecture_domains_and_18_phenotypes():
    catalog = load_catalog()
    assert set(catalog.domains) == ARCHITECTURE_DOMAINS
    assert {d for d, domain in catalog.domains.items() if domain.safety_critical} == SAFETY_CRITICAL
    assert len(catalog.phenotypes) == 18 and STUDY_PHENOTYPES <= set(catalog.phenotypes)
    used = set()
    for pheno in catalog.phenotypes.values():
        used |= set(pheno.presenting) | set(pheno.hidden_required) | {o.domain for o in pheno.hidden_optional}
    assert used == ARCHITECTURE_DOMAINS  # every domain is reachable from some phenotype


def test_shipped_phenotypes_carry_the_study_constraints():
    catalog = load_catalog()
    postpartum = catalog.phenotypes["postpartum_intrusive"]
    assert postpartum.demographics.postpartum and postpartum.demographics.sex_weights.get("male", 0) == 0
    assert "intrusive_harm_thoughts" in postpartum.hidden_required
    assert catalog.phenotypes["late_life_depression"].demographics.age[0] >= 60
    assert catalog.domains["cognitive_decline"].prerequisites.min_age == 60
    assert catalog.phenotypes["bipolar_masked"].alignment == "masked"
    assert catalog.phenotypes["bipolar_masked"].principal_diagnosis.icd10 == ["F31.81"]
    trauma = catalog.phenotypes["trauma_substance"]
    assert trauma.presenting == ["alcohol_use"]
    assert {"ptsd", "depression", "nightmares", "irritability"} <= set(trauma.hidden_required)
    for domain in catalog.domains.values():
        assert 2 <= len(domain.probe_questions) <= 4 and domain.diagnoses


def test_phenotypes_validate_command_accepts_the_shipped_catalog():
    result = CliRunner().invoke(app, ["phenotypes", "validate"])
    assert result.exit_code == 0, result.output
    assert "18 phenotypes, 31 domains" in result.output


def test_phenotypes_list_and_show():
    runner = CliRunner()
    listed = runner.invoke(app, ["phenotypes", "list"])
    assert listed.exit_code == 0 and "postpartum_intrusive" in listed.output
    shown = runner.invoke(app, ["phenotypes", "show", "trauma_substance"])
    assert shown.exit_code == 0 and "Posttraumatic stress disorder" in shown.output and "NESARC" in shown.output
    unknown = runner.invoke(app, ["phenotypes", "show", "bipolar_maskd"])
    assert unknown.exit_code == 2 and "did you mean 'bipolar_masked'" in unknown.output


# ---------------------------------------------------------------- broken fixtures

def _fixture(tmp_path: Path, phenotype: str = "bipolar_masked", edit=None, raw: str | None = None) -> Path:
    """A catalog folder with the shipped domains.yaml and one phenotype, optionally broken."""
    folder = tmp_path / "catalog"
    folder.mkdir()
    shutil.copy(DEFAULT_CATALOG_DIR / "domains.yaml", folder / "domains.yaml")
    target = folder / f"{phenotype}.yaml"
    if raw is not None:
        target.write_text(raw)
        return folder
    data = yaml.safe_load((DEFAULT_CATALOG_DIR / f"{phenotype}.yaml").read_text())
    if edit:
        edit(data)
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def _problems(folder: Path) -> list[str]:
    with pytest.raises(IntakeEvalError) as caught:
        load_and_validate(folder)
    lines = caught.value.format_message().splitlines()
    assert "problem" in lines[0]
    return [line.strip() for line in lines[1:]]


def test_unknown_domain_id_is_named_with_file_and_field(tmp_path):
    folder = _fixture(tmp_path, edit=lambda d: d["hidden_optional"][0].update(domain="generalised_anxiety"))
    problems = _problems(folder)
    assert any("bipolar_masked.yaml: hidden_optional[generalised_anxiety].domain: unknown domain id "
               "'generalised_anxiety' (did you mean 'generalized_anxiety'?)" in p for p in problems)


def test_probability_outside_unit_interval(tmp_path):
    folder = _fixture(tmp_path, edit=lambda d: d["hidden_optional"][1].update(probability=1.3))
    assert any("hidden_optional[panic].probability: 1.3 is outside [0, 1]" in p for p in _problems(folder))


def test_missing_citation(tmp_path):
    folder = _fixture(tmp_path, edit=lambda d: d["hidden_optional"][2].pop("source"))
    assert any("hidden_optional[alcohol_use].source: missing citation" in p for p in _problems(folder))
    (tmp_path / "b").mkdir()
    blank = _fixture(tmp_path / "b", edit=lambda d: d.update(weight_source=" "))
    assert any("weight_source: missing citation" in p for p in _problems(blank))


def test_typo_key_is_an_unknown_key_with_a_suggestion(tmp_path):
    def typo(data):
        data["hidden_optinal"] = data.pop("hidden_optional")

    problems = _problems(_fixture(tmp_path, edit=typo))
    assert any("bipolar_masked.yaml: hidden_optinal: unknown key (did you mean 'hidden_optional'?)" in p for p in problems)


def test_conflict_rule_that_makes_four_hidden_impossible(tmp_path):
    def starve(data):
        data["hidden_optional"] = data["hidden_optional"][:4]  # anxiety, panic, alcohol, cannabis
        data["conflicts"] = [{"keep": "generalized_anxiety", "drop": "panic", "reason": "test"},
                             {"keep": "alcohol_use", "drop": "cannabis_use", "reason": "test"}]

    problems = _problems(_fixture(tmp_path, edit=starve))
    assert any("bipolar_masked.yaml: conflicts: with presenting 'depression' only 3 hidden domains are guaranteed" in p
               for p in problems), problems


def test_conflict_rule_that_always_empties_an_optional(tmp_path):
    def dead(data):
        data["conflicts"] = [{"keep": "hypomania", "drop": "adhd", "reason": "test"}]  # hypomania is required

    problems = _problems(_fixture(tmp_path, edit=dead))
    assert any("hidden_optional[adhd]: can never be drawn" in p for p in problems), problems


def test_demographics_incompatible_with_a_domain_prerequisite(tmp_path):
    def young(data):
        data["hidden_optional"].append({"domain": "cognitive_decline", "probability": 0.1, "source": "test"})

    problems = _problems(_fixture(tmp_path, edit=young))
    assert any("'cognitive_decline' needs age >= 60 but demographics.age allows at most 50" in p for p in problems)


def test_bad_yaml_names_the_line(tmp_path):
    folder = _fixture(tmp_path, raw="id: broken\npresenting: [depression\nname: x\n")
    problems = _problems(folder)
    assert len(problems) == 1 and "bipolar_masked.yaml: line" in problems[0] and "YAML syntax error" in problems[0]


def test_several_problems_are_listed_together(tmp_path):
    def many(data):
        data["hidden_optional"][0]["probability"] = -0.2
        data["hidden_optional"][1]["domain"] = "panik"
        data["population_weight"] = 0

    problems = _problems(_fixture(tmp_path, edit=many))
    assert len(problems) >= 3
    assert all(p.startswith("catalog/bipolar_masked.yaml: ") or "bipolar_masked.yaml: " in p for p in problems)


def test_validate_command_exits_2_with_one_line_per_problem(tmp_path):
    folder = _fixture(tmp_path, edit=lambda d: d["hidden_optional"][0].update(probability=2))
    result = CliRunner().invoke(app, ["phenotypes", "validate", str(folder)])
    assert result.exit_code == 2
    assert result.output.startswith("error: the catalog in") and "has 1 problem:" in result.output
    assert "bipolar_masked.yaml: hidden_optional[generalized_anxiety].probability: 2.0 is outside [0, 1]" in result.output
    assert "Traceback" not in result.output


def test_missing_folder_is_one_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["phenotypes", "validate", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "catalog folder does not exist" in result.output


def test_context_pools_must_fit_every_allowed_age(tmp_path):
    folder = _fixture(tmp_path)
    domains = yaml.safe_load((folder / "domains.yaml").read_text())
    domains["context"]["relationships"] = [{"text": "widowed", "min_age": 50}]
    (folder / "domains.yaml").write_text(yaml.safe_dump(domains, sort_keys=False))
    problems = _problems(folder)
    assert any("bipolar_masked.yaml: demographics: no context.relationships option fits age 19" in p for p in problems)
