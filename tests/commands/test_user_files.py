"""The user's own prompts and catalog, outside the checkout: --prompts/--catalog, a study's
prompts_dir:/catalog:/phenotypes:, the run folder's catalog copy, guards comparing contents, init."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from intake_eval.catalog.load import load_catalog
from intake_eval.catalog.snapshot import run_catalog, write_catalog_snapshot
from intake_eval.catalog.subset import catalog_subset
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.package_data import package_folder
from intake_eval.core.prompts import (
    PROMPTS_DIR,
    available_conditions,
    prompt_hashes,
    render_prompt,
    template_path,
    use_prompts,
)
from intake_eval.study.config import load_study_config
from tests.helpers import cli

SHIPPED = package_folder("phenotypes")
PAIR = ["adult_adhd", "anxious_depression"]
CUSTOM_CLINICIAN = "You are a clinician. Ask about sleep, mood and substance use before you close.\n"


def invoke(*args: str):
    return cli.invoke(*args, env={"COLUMNS": "200"})


def user_files(root: Path) -> tuple[Path, Path]:
    """A prompts folder with a new condition and an edited opening, and a two-phenotype catalog."""
    prompts, catalog = root / "my prompts", root / "my catalog"
    prompts.mkdir(parents=True)
    catalog.mkdir()
    (prompts / "clinician_custom.j2").write_text(CUSTOM_CLINICIAN)
    (prompts / "patient_opening.j2").write_text("Open the session in one sentence about why you came.\n")
    for name in ("domains.yaml", *(f"{pid}.yaml" for pid in PAIR)):
        shutil.copy(SHIPPED / name, catalog / name)
    return prompts, catalog


def study_file(folder: Path, extra: str = "", name: str = "mine") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.yaml"
    path.write_text(f"""\
name: {name}
profiles: {{n: 4, mode: stratified}}
generator: offline/generator
patient: {{model: offline/patient, mode: tracked}}
clinicians: [offline/screener]
judges: [offline/judge]
{extra}""")
    return path


def test_a_user_template_wins_and_every_other_comes_from_the_package(tmp_path):
    prompts, _ = user_files(tmp_path)
    shipped_opening = render_prompt("patient_opening")
    with use_prompts(prompts):
        assert template_path("clinician_custom") == (prompts / "clinician_custom.j2").resolve()
        assert render_prompt("clinician_custom") == CUSTOM_CLINICIAN.strip()
        assert render_prompt("patient_opening").startswith("Open the session")
        assert template_path("judge_turn") == PROMPTS_DIR / "judge_turn.j2"
        assert available_conditions() == ["custom", "minimal", "screening"]
        hashes = prompt_hashes(["clinician_custom", "judge_turn"])
    assert render_prompt("patient_opening") == shipped_opening  # outside the block: shipped only
    assert "custom" not in available_conditions()
    with pytest.raises(IntakeEvalError, match="clinician_custom.j2 does not exist"):
        template_path("clinician_custom")
    moved = tmp_path / "elsewhere"
    shutil.copytree(prompts, moved)
    with use_prompts(moved):
        assert prompt_hashes(["clinician_custom", "judge_turn"]) == hashes  # contents, not locations
    with pytest.raises(IntakeEvalError, match="--prompts .*: is not a folder"), use_prompts(tmp_path / "missing"):
        pass


def test_a_subset_and_its_copy_in_a_run_folder_hash_like_a_folder_of_those_files(tmp_path):
    _, catalog_dir = user_files(tmp_path)
    subset = catalog_subset(load_catalog(), PAIR)
    assert sorted(subset.phenotypes) == PAIR
    assert subset.content_hash == load_catalog(catalog_dir).content_hash
    write_catalog_snapshot(subset, tmp_path / "run")
    assert run_catalog(tmp_path / "run").content_hash == subset.content_hash
    assert run_catalog(tmp_path / "no run").content_hash == load_catalog().content_hash
    with pytest.raises(IntakeEvalError, match="unknown phenotype id 'nope'"):
        catalog_subset(load_catalog(), ["adult_adhd", "nope"])


def test_study_config_reads_its_own_folders_relative_to_the_file(tmp_path):
    prompts, catalog = user_files(tmp_path / "project")
    config_dir = tmp_path / "project" / "configs"
    config_dir.mkdir()
    path = study_file(config_dir, f"prompts_dir: ../{prompts.name}\ncatalog: '../{catalog.name}'\n"
                                  "phenotypes: [anxious_depression]\nconditions: [minimal, custom]\n")
    config = load_study_config(path)
    assert config.prompts_folder() == prompts.resolve() and config.catalog_folder() == catalog.resolve()
    assert list(config.study_catalog().phenotypes) == ["anxious_depression"]
    bad = {"prompts_dir: nowhere\n": "prompts_dir: Value error, ",
           "conditions: [custom]\n": "unknown condition 'custom'",
           f"catalog: ../{catalog.name}\nphenotypes: [panic_agoraphobia]\n": "unknown phenotype id 'panic_agoraphobia'"}
    for extra, expected in bad.items():
        with pytest.raises(IntakeEvalError, match=expected):
            load_study_config(study_file(config_dir, extra))


def test_a_study_with_a_prompts_folder_and_a_phenotype_subset_runs_and_keeps_its_catalog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prompts, _ = user_files(tmp_path / "mine")
    config = study_file(tmp_path / "mine", f"prompts_dir: '{prompts.name}'\nphenotypes: {json.dumps(PAIR)}\n"
                                           "conditions: [minimal, custom]\n")
    done = invoke("study", config, "--run-dir", tmp_path / "run")
    assert done.exit_code == 0, done.output
    run = tmp_path / "run"
    profiles = [json.loads(line) for line in (run / "profiles.jsonl").read_text().splitlines()]
    assert {profile["phenotype"] for profile in profiles} == set(PAIR)
    assert sorted(path.stem for path in (run / "catalog").glob("*.yaml")) == sorted(["domains", *PAIR])
    conversations = [json.loads(line) for line in (run / "conversations" / "offline__screener.jsonl").read_text()
                     .splitlines()]
    assert {conversation["condition"] for conversation in conversations} == {"minimal", "custom"}
    manifest = json.loads((run / "manifest.json").read_text())
    with use_prompts(prompts):
        assert manifest["prompts"]["clinician_custom"] == prompt_hashes(["clinician_custom"])["clinician_custom"]
    assert manifest["prompts"]["patient_opening"] != prompt_hashes(["patient_opening"])["patient_opening"]
    # the same folder copied elsewhere: nothing changed, the study resumes with no calls
    moved = tmp_path / "moved prompts"
    shutil.copytree(prompts, moved)
    config.write_text(config.read_text().replace(f"prompts_dir: '{prompts.name}'", f"prompts_dir: '{moved}'"))
    again = invoke("study", config, "--run-dir", run)
    assert again.exit_code == 0 and "0 model calls this time" in " ".join(again.output.split()), again.output
    # an edited template is a changed configuration, named
    (moved / "clinician_custom.j2").write_text("You are a clinician. Ask about sleep.\n")
    edited = invoke("study", config, "--run-dir", run)
    assert edited.exit_code == 2 and "prompts.clinician_custom" in edited.output
    # later stages read the run folder's catalog, from anywhere
    report = invoke("report", "--run-dir", run)
    assert report.exit_code == 0, report.output


def test_generate_with_a_catalog_then_a_study_naming_the_same_contents_elsewhere(tmp_path):
    _, catalog = user_files(tmp_path / "a")
    generated = invoke("generate", "--n", "4", "--seed", "7", "--catalog", catalog, "--run-dir", tmp_path / "run")
    assert generated.exit_code == 0, generated.output
    copy = tmp_path / "b" / "same catalog"
    shutil.copytree(catalog, copy)
    config = study_file(tmp_path / "b", f"catalog: '{copy}'\n")
    done = invoke("study", config, "--run-dir", tmp_path / "run")
    assert done.exit_code == 0, done.output
    shipped = study_file(tmp_path / "c")  # the shipped catalog is other contents: refused, named
    refused = invoke("study", shipped, "--run-dir", tmp_path / "run")
    assert refused.exit_code == 2 and "catalog:" in refused.output


def test_flags_fill_what_the_config_leaves_open_and_are_refused_when_it_names_them(tmp_path):
    prompts, catalog = user_files(tmp_path)
    open_config = study_file(tmp_path / "x", "conditions: [custom]\n")
    estimate = invoke("estimate", open_config, "--prompts", prompts, "--catalog", catalog, "--json")
    assert estimate.exit_code == 0, estimate.output
    assert json.loads(estimate.output)["profiles"] == 4
    named = study_file(tmp_path / "x", f"prompts_dir: '{prompts}'\nconditions: [custom]\n")
    twice = invoke("estimate", named, "--prompts", prompts)
    assert twice.exit_code == 2 and "already names prompts_dir" in twice.output
    run = invoke("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--condition", "custom",
                 "--run-dir", tmp_path / "nothing")
    assert run.exit_code == 2 and "custom" in run.output


def test_a_bundled_config_is_named_by_its_stem(tmp_path):
    from intake_eval.study.config import find_study_config

    assert find_study_config(Path("paper")) == package_folder("configs") / "paper.yaml"
    assert load_study_config(Path("demo")).name == "demo"
    missing = invoke("estimate", "no-such-study")
    assert missing.exit_code == 2 and "bundled configs: demo, demo_styles, local, paper" in missing.output


def test_init_writes_starting_points_that_run_and_never_overwrites(tmp_path, monkeypatch):
    target = tmp_path / "my study"
    done = invoke("init", target)
    assert done.exit_code == 0, done.output
    for name in ("study.yaml", "models.yaml", ".env.example", "prompts/clinician_mine.j2", "phenotypes/domains.yaml",
                 "phenotypes/my_phenotype.yaml"):
        assert (target / name).is_file(), name
    before = (target / "study.yaml").read_text()
    (target / "study.yaml").write_text(before + "# my edit\n")
    again = invoke("init", target)
    assert again.exit_code == 2 and "already has study.yaml" in again.output
    assert (target / "study.yaml").read_text().endswith("# my edit\n")
    monkeypatch.chdir(target)
    config = load_study_config(Path("study.yaml"))
    assert sorted(config.study_catalog().phenotypes) == ["anxious_depression", "my_phenotype"]
    assert config.conditions == ["minimal", "mine"]
    listed = invoke("models", "--models", "models.yaml", "--json")
    assert {"my-vllm", "my-gpt"} <= {row["alias"] for row in json.loads(listed.output)}
