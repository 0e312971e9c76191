"""`intake-eval show CONVERSATION_ID` on a real run folder."""

from __future__ import annotations

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import (
    Conversation,
    ConversationTurn,
    DomainLabel,
    Judgment,
    TrackerDecision,
    TurnJudgment,
)
from intake_eval.core.store import RunPaths, append_record
from tests.helpers.convo_helpers import make_profile

CID = "P00001.llama-3.3-70b.minimal.tracked.t0"


def write_run(run_dir):
    paths = RunPaths(run_dir)
    append_record(paths.profiles, make_profile(1))
    conversation = Conversation(
        conversation_id=CID, profile_id="P00001", phenotype="depression_complex", clinician="llama-3.3-70b",
        clinician_model="together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", patient="gpt-4o",
        patient_model="openai/gpt-4o", patient_mode="tracked", opening="I've been feeling really flat.",
        turns=[
            ConversationTurn(turn=1, clinician="How is your sleep?", patient="I lie awake until three.",
                             clinician_reasoning="Sleep is a common comorbidity.",
                             tracker=TrackerDecision(question_type="closed_hypothesis", asked_domains=["insomnia"],
                                                     newly_unlocked=["insomnia"], unlocked_after=["insomnia"], source="gpt-4o")),
            ConversationTurn(turn=2, clinician="Try a regular bedtime.", patient="Okay, and I drink a lot too.",
                             tracker=TrackerDecision(question_type="treatment_planning", unlocked_after=["insomnia"],
                                                     source="gpt-4o")),
        ],
        formulation={"status": "ok", "repaired": False, "formulation": {
            "chief_complaint": "low mood", "problems": ["low mood", "poor sleep"],
            "principal_diagnosis": {"name": "Major depressive disorder", "icd10": "F32.1"},
            "differential": [{"name": "Insomnia disorder", "icd10": "G47.00"}],
            "risk_level": "low", "risk_evidence": "denied thoughts of suicide"}},
    )
    append_record(paths.conversations("llama-3.3-70b"), conversation)
    label = lambda asked, disclosed: DomainLabel(asked_about=asked, disclosed=disclosed)  # noqa: E731
    judgment = Judgment(conversation_id=CID, judge="gemini", clinician="llama-3.3-70b", turns=[
        TurnJudgment(turn=0, question_type="other", domains={"insomnia": label(False, False)}),
        TurnJudgment(turn=1, question_type="closed_hypothesis", domains={"insomnia": label(True, True)}),
        TurnJudgment(turn=2, question_type="treatment_planning", patient_faithful=False,
                     domains={"insomnia": label(False, False), "alcohol_use": label(False, True)}),
    ])
    append_record(paths.judgments("gemini", "llama-3.3-70b"), judgment)
    return paths


def test_show_prints_transcript_tracker_decisions_and_judge_labels(tmp_path):
    write_run(tmp_path / "run")
    result = CliRunner().invoke(app, ["show", CID, "--run-dir", str(tmp_path / "run"), "--reasoning"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.index("I've been feeling really flat.") < out.index("How is your sleep?") < out.index("Try a regular bedtime.")
    assert "unlocked insomnia" in out and "tracker (gpt-4o): closed_hypothesis" in out
    assert "Sleep is a common comorbidity." in out
    assert "hidden insomnia (moderate), alcohol_use (moderate)" in out
    assert "gemini: closed_hypothesis · asked insomnia · disclosed insomnia" in out
    assert "bleed alcohol_use" in out and "patient unfaithful" in out


def test_show_without_reasoning_flag_hides_reasoning_and_says_when_not_judged(tmp_path):
    paths = write_run(tmp_path / "run")
    paths.judgments("gemini", "llama-3.3-70b").unlink()
    result = CliRunner().invoke(app, ["show", CID, "--run-dir", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Sleep is a common comorbidity." not in result.output
    assert "no judgments yet" in result.output


def test_show_unknown_id_suggests_a_close_one(tmp_path):
    write_run(tmp_path / "run")
    result = CliRunner().invoke(app, ["show", CID.replace("t0", "t9"), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert f"did you mean {CID}" in result.output


def test_show_in_an_empty_run_folder_says_to_run_first(tmp_path):
    result = CliRunner().invoke(app, ["show", CID, "--run-dir", str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert "no conversations yet" in result.output


def test_show_prints_the_post_intake_formulation(tmp_path):
    write_run(tmp_path / "run")
    result = CliRunner().invoke(app, ["show", CID, "--run-dir", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    after_last_turn = result.output[result.output.index("Try a regular bedtime."):]
    assert "Formulation" in after_last_turn
    assert "Major depressive disorder F32.1" in after_last_turn
    assert "differential: Insomnia disorder G47.00" in after_last_turn
    assert "risk: low" in after_last_turn
