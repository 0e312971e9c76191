"""A loopback OpenAI-compatible patient: every chat request is answered with a REAL recorded OpenAI
chat-completions answer (tests/conformance: ``openai_gpt4o_plain``) whose message text is a patient's.

The patient speaks first, then answers every question vaguely and never names a hidden domain, so
its conversations differ from the offline patient's (who discloses when asked) and the report has a
patient-model effect to show.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from intake_eval.cli import app
from tests.conformance.replay import ReplayRequest, ReplayServer, recorded

OPENING = "I've been feeling low and worn out for a few weeks, and I don't really know why."
REPLY = "I'm not sure, honestly. Mostly I just feel tired and flat, and it's hard to say more than that."


def patient_answer(request: ReplayRequest) -> dict[str, Any]:
    """The recorded answer with the patient's words: the opening for the first call, else the reply."""
    answer = copy.deepcopy(recorded("openai_gpt4o_plain"))
    messages = request.body.get("messages", [])
    speaking_first = not any(message.get("role") == "assistant" for message in messages)
    answer["body"]["choices"][0]["message"]["content"] = OPENING if speaking_first else REPLY
    answer["body"]["model"] = request.body.get("model", answer["body"]["model"])
    return answer


def loopback_patient() -> ReplayServer:
    return ReplayServer({"chat": patient_answer})


def models_file_text(server: ReplayServer, alias: str = "loop-patient") -> str:
    """A models file naming the loopback patient (priced, so the spend lines are real sums)."""
    return ("models:\n"
            f"  {alias}: {{model: openai/loop-patient, api_base: '{server.url}', api_key_env: LOOP_KEY,\n"
            "    input_cost_per_token: 0.0000025, output_cost_per_token: 0.00001}\n")


@dataclass
class LoopbackStudy:
    """A study run beside the loopback patient: its folder, the files it was given and what the patient heard."""

    run_dir: Path
    config: Path
    models: Path
    env: dict[str, str]
    chat_calls: int


def run_loopback_study(folder: Path, study_text: str) -> LoopbackStudy:
    """Run ``study_text`` (a study config naming ``loop-patient``) in ``folder`` against the loopback patient."""
    with loopback_patient() as server:
        models = folder / "models.yaml"
        models.write_text(models_file_text(server))
        config = folder / "study.yaml"
        config.write_text(study_text)
        run_dir = folder / "run"
        env = {"LOOP_KEY": "sk-loopback"}
        result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir), "--models", str(models)],
                                    env=env)
        assert result.exit_code == 0, result.output
        return LoopbackStudy(run_dir, config, models, env, len(server.calls("chat")))
