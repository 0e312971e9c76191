"""Stage settings: a default or a limit is declared once and refused the same way from a flag and a study config."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.limits import DEFAULT_TURNS, MAX_TURNS
from intake_eval.interview.settings import RunSettings
from intake_eval.judge.settings import JudgeSettings
from intake_eval.runner.protocol import StageInterrupted, execute_stage
from intake_eval.study.config import load_study_config

STUDY = """\
name: tiny
profiles: {n: 4}
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener]
judges: [offline/judge]
"""


def test_run_turns_above_the_limit_is_refused_by_the_flag_and_by_the_study_config(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--clinician", "offline/screener", "--patient", "offline/patient",
                                      "--turns", "1000", "--run-dir", str(run_dir)])
    assert result.exit_code == 2
    assert f"--turns must be at most {MAX_TURNS} (got 1,000)" in result.output
    assert "Traceback" not in result.output and not run_dir.exists()
    config = tmp_path / "study.yaml"
    config.write_text(STUDY + "turns: 1000\n", encoding="utf-8")
    with pytest.raises(IntakeEvalError) as refused:
        load_study_config(config)
    assert "turns" in refused.value.message and str(MAX_TURNS) in refused.value.message


def test_the_study_config_composes_the_stage_settings_with_the_same_defaults(tmp_path: Path) -> None:
    config = tmp_path / "study.yaml"
    config.write_text(STUDY, encoding="utf-8")
    run = load_study_config(config).run_settings()
    flags = RunSettings.from_flags(clinicians=["offline/screener"], patient="offline/patient", patient_mode="tracked")
    assert run.turns == flags.turns == DEFAULT_TURNS
    assert run.tracker_alias == flags.tracker_alias == "offline/patient"  # tracked: the patient unless one is named
    assert RunSettings(clinicians=["a"], patient="p").tracker_alias is None  # prompted: no tracker at all
    judge = load_study_config(config).judge_settings()
    assert judge.judges == ["offline/judge"] and judge.concurrency == 16 * (DEFAULT_TURNS + 1)


@pytest.mark.parametrize(("values", "line"), [
    ({"judges": ["j", "j"]}, "--judge j j: the same judge is given twice"),
    ({"judges": ["j"], "mode": "both"}, "--mode both:"),
    ({"judges": ["j"], "budget": float("nan")}, "--budget must be a positive, finite number of dollars (got nan)"),
    ({"judges": ["j"], "concurrency": 0}, "--concurrency must be at least 1 (got 0)"),
])
def test_a_bad_flag_is_one_line_naming_it(values: dict, line: str) -> None:
    with pytest.raises(IntakeEvalError) as refused:
        JudgeSettings.from_flags(**values)
    assert line in refused.value.message and "\n" not in refused.value.message


class _Steps:
    """A stage that records the order of its steps; Ctrl-C stops its run."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def models(self) -> list[str | None]:
        return []

    def plan(self, runner: object) -> str:
        self.calls.append("plan")
        return "the plan"

    def run(self, runner: object, plan: str) -> bool:
        self.calls.append(f"run {plan}")
        return True

    def finish(self, runner: object, plan: str, *, interrupted: bool) -> str:
        self.calls.append(f"finish interrupted={interrupted}")
        return "what was saved"


def test_an_interrupted_stage_is_finished_then_raises_with_its_outcome() -> None:
    stage = _Steps()
    with pytest.raises(StageInterrupted) as stopped:
        execute_stage(object(), stage)  # type: ignore[arg-type]  # the steps never touch the runner
    assert stage.calls == ["plan", "run the plan", "finish interrupted=True"]
    assert stopped.value.outcome == "what was saved" and isinstance(stopped.value, KeyboardInterrupt)
