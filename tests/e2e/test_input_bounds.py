"""Names and sizes a user controls stay inside the run folder and inside the machine: run names,
file-safe aliases, --n, YAML aliases, numeric ranges. Each bad value is one line naming it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, file_safe

STUDY = """\
name: {name}
profiles: {{n: 2, mode: stratified}}
generator: offline/generator
patient: {{model: offline/patient, mode: tracked}}
clinicians: [offline/screener]
judges: [offline/judge]
turns: 2
"""


def one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


@pytest.mark.parametrize("name", [".", "..", "...", "a/b", "../up", "/abs"])
def test_a_run_name_that_is_not_one_folder_name_is_refused(tmp_path, monkeypatch, name):
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "study.yaml"
    config.write_text(STUDY.format(name=f'"{name}"'))
    monkeypatch.chdir(work)
    line = one_error_line(CliRunner().invoke(app, ["study", str(config)]))
    assert str(config) in line and "name" in line
    assert sorted(os.listdir(work)) == [] and sorted(os.listdir(tmp_path)) == ["study.yaml", "work"]


@pytest.mark.parametrize("alias", [".", "..", "..."])
def test_an_alias_of_dots_never_names_a_folder_above_its_own(tmp_path, alias):
    paths = RunPaths(tmp_path / "run")
    assert paths.judge_dir(alias).parent == paths.judgments_dir
    assert paths.judge_dir(alias).name not in (".", "..")
    assert file_safe("offline/screener") == "offline__screener"  # ordinary names keep their spelling


def bomb(levels: int = 9) -> str:
    """A YAML alias bomb: nine lines that unfold into 9**9 strings when anything walks the value."""
    names = [chr(ord("a") + i) for i in range(levels + 1)]
    lines = [f"    {names[0]}: &{names[0]} [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"    {name}: &{name} [{', '.join(['*' + before] * 9)}]" for before, name in zip(names, names[1:])]
    return "\n".join(lines) + "\n"


def test_generate_n_is_capped_like_the_study_config(tmp_path):
    run = tmp_path / "run"
    line = one_error_line(CliRunner().invoke(app, ["generate", "--n", "99999999999", "--run-dir", str(run)]))
    assert "--n" in line and "1,000,000" in line
    assert not run.exists()


def test_qc_patient_n_is_capped_like_generate_n(tmp_path):
    run = tmp_path / "run"
    line = one_error_line(CliRunner().invoke(app, ["qc-patient", "--patient", "offline/patient", "--n", "99999999999",
                                                   "--run-dir", str(run)]))
    assert "--n" in line and "1,000,000" in line
    assert not run.exists()


def test_annotate_export_n_is_capped(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    line = one_error_line(CliRunner().invoke(app, ["annotate", "export", "--n", "99999999999", "--run-dir", str(run)]))
    assert "--n" in line and "1,000,000" in line
    assert not (run / "annotations").exists()


def test_a_yaml_alias_bomb_in_a_models_file_is_one_line(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  bomb:\n    model: openai/x\n    api_base: http://127.0.0.1:9/v1\n"
                      "    extra_params:\n" + bomb().replace("    ", "      ", -1))
    done = subprocess.run([sys.executable, "-m", "intake_eval.cli", "models", "--models", str(models)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"})
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(models) in lines[0]
    assert "aliases" in lines[0]


def test_a_yaml_alias_bomb_in_a_study_config_is_one_line(tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text(STUDY.format(name="bomb") + "x-bomb:\n" + bomb())
    line = one_error_line(CliRunner().invoke(app, ["study", str(config), "--run-dir", str(tmp_path / "run")]))
    assert str(config) in line and "aliases" in line


def test_a_few_aliases_still_load(tmp_path):
    from intake_eval.core.yamlfile import parse_yaml

    assert parse_yaml("a: &x {k: 1}\nb: *x\n", "f.yaml") == {"a": {"k": 1}, "b": {"k": 1}}


def test_an_age_range_beyond_a_lifetime_is_one_line_not_a_hang(tmp_path):
    from intake_eval.core.package_data import package_folder

    catalog = tmp_path / "phenotypes"
    import shutil

    shutil.copytree(package_folder("phenotypes"), catalog)
    target = catalog / "adult_adhd.yaml"
    target.write_text(target.read_text().replace("age: [19, 50]", "age: [19, 1e20]"))
    done = subprocess.run([sys.executable, "-m", "intake_eval.cli", "phenotypes", "validate", str(catalog)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_MODE": "PRODUCTION"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "adult_adhd.yaml" in done.stdout + done.stderr and "demographics.age" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
