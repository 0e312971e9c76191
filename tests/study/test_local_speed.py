"""Wall time of local/ models in `estimate`: hand-worked compute seconds, one server per weights
file, and a local study's estimate that is at least its servers' compute."""

from __future__ import annotations

import json
from dataclasses import dataclass

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.study.local_speed import local_call_seconds, local_compute_seconds, local_server_bound
from tests.conftest import PROJECT_ROOT


@dataclass
class Line:
    model: str
    calls: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int


def test_compute_seconds_hand_worked():
    # 400 uncached prompt tokens at 80/s = 5 s, 60 generated at 30/s = 2 s
    line = Line("local/smollm2", calls=2, prompt_tokens=800, cached_prompt_tokens=400, completion_tokens=60)
    assert local_compute_seconds(line) == 7.0
    assert local_call_seconds(line) == 3.5


def test_aliases_of_one_weights_file_add_up_and_separate_servers_do_not():
    lines = [Line("local/smollm2", 1, 800, 0, 0), Line("local/smollm2", 1, 0, 0, 90),  # 10 s + 3 s
             Line("local/other.gguf", 1, 400, 0, 0),  # 5 s on its own server
             Line("openai/gpt-4o", 100, 10 ** 6, 0, 10 ** 5)]  # a provider: not this machine's compute
    assert local_server_bound(lines) == 13.0
    assert local_server_bound(lines[3:]) == 0.0


def test_a_local_study_is_estimated_at_no_less_than_its_servers_compute():
    result = CliRunner().invoke(app, ["estimate", str(PROJECT_ROOT / "configs" / "local.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    estimate = json.loads(result.output)
    lines = [Line(l["model"], l["calls"], l["prompt_tokens"], l["cached_prompt_tokens"], l["completion_tokens"])
             for l in estimate["lines"]]
    compute = sum(local_compute_seconds(line) for line in lines if line.model.startswith("local/"))
    assert compute > 60  # SmolLM2 on two cores: minutes, not the seconds a provider would take
    assert estimate["wall_s"]["study"] >= compute - 1e-6
    assert estimate["assumptions"]["local_tokens_per_s"] == {"prompt": 80.0, "generated": 30.0}


def test_a_local_server_s_prefix_cache_is_credited_from_the_first_token():
    result = CliRunner().invoke(app, ["estimate", str(PROJECT_ROOT / "configs" / "local.yaml"), "--json"])
    assert result.exit_code == 0, result.output
    lines = {l["role"]: l for l in json.loads(result.output)["lines"] if l["model"].startswith("local/")}
    # a clinician's prompts are far below the 1,024-token minimum of hosted caches; llama.cpp has none
    assert lines["clinician"]["prompt_tokens"] / lines["clinician"]["calls"] < 1024
    assert lines["clinician"]["cached_prompt_tokens"] > 0 and lines["patient"]["cached_prompt_tokens"] > 0
