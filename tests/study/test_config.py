"""The study config: validation errors name the file and key; shipped configs load."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.errors import IntakeEvalError
from intake_eval.study.config import load_study_config

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = """\
name: tiny
profiles: {n: 4, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener]
judges: [offline/judge]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_configs_describe_the_seed_study_and_the_demo():
    paper = load_study_config(ROOT / "configs" / "paper.yaml")
    assert paper.profiles.n == 108 and paper.profiles.mode == "stratified"
    assert paper.clinicians == ["deepseek-v3", "llama-3.3-70b", "llama-3.1-8b", "qwen3-8b", "kimi-k2.6"]
    assert paper.patient.model == "gpt-4o" and paper.patient.mode == "prompted"
    assert paper.judges == ["gemini", "claude-sonnet-4.6"] and paper.judge_mode == "per-turn"
    assert paper.generator == "qwen3-235b" and paper.turns == 12 and paper.formulation is True
    assert paper.conversation_count == 540
    demo = load_study_config(ROOT / "configs" / "demo.yaml")
    assert all(name.startswith("offline/") for name in demo.model_names())
    assert demo.turns == 12 and demo.profiles.mode == "stratified" and demo.patient.mode == "tracked"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "judeges: [offline/judge]\n", "judeges: unknown key"),
        (MINIMAL.replace("mode: tracked", "mode: tracked, temprature: 1"), "patient.temprature: unknown key"),
        (MINIMAL.replace("n: 4", "n: 0"), "profiles.n"),
        (MINIMAL.replace("mode: stratified", "mode: random"), "profiles.mode"),
        (MINIMAL.replace("mode: stratified", "mode: stratified, hidden_count: many"), "profiles.hidden_count"),
        (MINIMAL + "turns: twelve\n", "turns"),
        (MINIMAL + "conditions: [minimal, bogus]\n", "unknown condition 'bogus'"),
        (MINIMAL.replace("[offline/screener]", "[offline/screener, offline/screener]"), "listed twice"),
        (MINIMAL.replace("[offline/judge]", "[offline/generator]"), "leakage guard"),
        (MINIMAL.replace("name: tiny\n", ""), "name: Field required"),
        (MINIMAL + "qc: {max_leak_rate: 2}\n", "qc.max_leak_rate"),
        ("- just\n- a list\n", "a mapping of keys"),
        ("name: [unclosed\n", "YAML syntax error"),
    ],
)
def test_bad_configs_are_one_clear_error_naming_file_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(IntakeEvalError) as caught:
        load_study_config(path)
    message = caught.value.format_message()
    assert str(path) in message
    assert expected in message


def test_hidden_count_literature_is_a_profiles_setting(tmp_path):
    config = load_study_config(write(tmp_path, MINIMAL.replace("mode: stratified", "mode: stratified, hidden_count: literature")))
    assert config.profiles.hidden_count == "literature"
    assert load_study_config(write(tmp_path, MINIMAL)).profiles.hidden_count == "seed"


def test_cli_reports_a_bad_config_as_one_line_exit_2(tmp_path):
    path = write(tmp_path, MINIMAL + "clincians: [x]\n")
    for command in (["study", str(path), "--run-dir", str(tmp_path / "run")], ["estimate", str(path)]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "Traceback" not in result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines == [f"error: {path}: clincians: unknown key"]
    assert not (tmp_path / "run").exists()


def test_missing_config_file_is_named(tmp_path):
    result = CliRunner().invoke(app, ["estimate", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "nope.yaml: study config not found" in result.output


def test_unknown_model_alias_is_refused_before_any_work(tmp_path):
    path = write(tmp_path, MINIMAL.replace("[offline/screener]", "[no-such-model]"))
    result = CliRunner().invoke(app, ["study", str(path), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "unknown model 'no-such-model'" in result.output
    assert not (tmp_path / "run").exists()
