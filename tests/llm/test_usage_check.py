"""Usage and prices are checked, not trusted: through the real HTTP client and pool against a loopback server,
an impossible token count fails the call naming it (unpriced), an answer without usable usage is priced at an
estimate marked unknown (so a budget is not blind to it), and a models file with a negative or NaN price is
refused in one line. Every answer, usable or not, is in the call ledger."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.calls import read_ledger
from intake_eval.core.store import RunPaths, append_record, iter_json_lines
from intake_eval.llm.base import ChatRequest, ModelCallError, ModelSpec
from intake_eval.llm.pool import ModelPool
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply

PRICE = 1e-5
REQUEST = ChatRequest(messages=[{"role": "user", "content": "How have you been sleeping lately? " * 20}],
                      purpose="clinician")


def answer(usage) -> Reply:
    payload = {"id": "x", "object": "chat.completion", "model": "served-model-7",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "Not well, I wake at four."},
                            "finish_reason": "stop"}]}
    if usage != "absent":
        payload["usage"] = usage
    return Reply(raw_body=json.dumps(payload).encode())


def call(tmp_path: Path, reply: Reply):
    ledger = tmp_path / "calls.jsonl"
    with FakeOpenAIServer(lambda body, index: reply) as server:
        spec = ModelSpec(alias="doc", model="openai/doc", api_base=server.url, input_cost_per_token=PRICE,
                         output_cost_per_token=PRICE)
        pool = ModelPool({"doc": spec}, ledger_path=ledger)

        async def go():
            try:
                return await pool.get("doc").complete(REQUEST)
            finally:
                await pool.aclose()

        try:
            return asyncio.run(go()), [line for line in iter_json_lines(ledger) if line["event"] == "answer"]
        except ModelCallError as error:
            return error, [line for line in iter_json_lines(ledger) if line["event"] == "answer"]


@pytest.mark.parametrize("usage, named", [
    ({"prompt_tokens": -100000, "completion_tokens": 5}, "usage.prompt_tokens is negative (-100000)"),
    ({"prompt_tokens": 10**15, "completion_tokens": 5}, "usage.prompt_tokens = 1,000,000,000,000,000 is beyond"),
    ({"prompt_tokens": 12.5, "completion_tokens": 5}, "usage.prompt_tokens is 12.5, not a whole number"),
    ({"prompt_tokens": 100, "completion_tokens": "7"}, "usage.completion_tokens is '7'"),
    ({"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": -3}},
     "usage.cached_tokens is negative"),
])
def test_an_impossible_token_count_fails_the_call_naming_it_and_is_not_priced_from_it(tmp_path, usage, named):
    error, answers = call(tmp_path, answer(usage))
    assert isinstance(error, ModelCallError) and error.kind == "invalid_output"
    assert named in str(error) and "not priced from it" in str(error)
    [line] = answers  # billed (the provider answered) at an estimate from the request, never at its own count
    assert line["billed"] and not line["cost_known"] and line["error"] == "invalid_output"
    assert 0 < line["dollars"] < 1e-2


@pytest.mark.parametrize("usage", ["absent", None, [], [{"prompt_tokens": 10}], "lots", {}])
def test_an_answer_without_usable_usage_is_estimated_and_marked_unknown(tmp_path, usage):
    result, [line] = call(tmp_path, answer(usage))
    assert result.text == "Not well, I wake at four."
    expected_prompt = len(REQUEST.messages[0]["content"]) // 4
    assert result.usage.prompt_tokens == expected_prompt and result.usage.completion_tokens > 0
    assert result.usage.cost_known is False
    assert result.usage.cost_usd == pytest.approx(PRICE * (expected_prompt + result.usage.completion_tokens))
    assert line["cost_known"] is False and line["dollars"] == pytest.approx(result.usage.cost_usd)
    assert line["model"] == "served-model-7"  # the model id the provider's answer named


def test_the_ledger_counts_an_unknown_price_as_not_known(tmp_path):
    call(tmp_path, answer(None))
    totals = read_ledger(tmp_path / "calls.jsonl")
    assert totals is not None and totals.billed_usd > 0 and totals.billed_known is False


@pytest.mark.parametrize("price", ["-1e-6", ".nan", ".inf"])
def test_a_models_file_with_a_negative_or_not_finite_price_is_refused_in_one_line(tmp_path, price):
    models = tmp_path / "models.yaml"
    models.write_text(f"models:\n  doc: {{model: openai/doc, api_base: 'http://127.0.0.1:9/v1', "
                      f"output_cost_per_token: {price}}}\n")
    result = CliRunner().invoke(app, ["run", "--clinician", "doc", "--patient", "offline/patient", "--models",
                                      str(models), "--run-dir", str(tmp_path / "run")])
    said = " ".join(result.output.split())
    assert result.exit_code != 0 and "Traceback" not in said
    assert f"{models}: models.doc.output_cost_per_token" in said and "finite number ≥ 0" in said


def test_a_budget_is_not_blind_to_a_server_that_reports_no_usage(tmp_path):
    """Before, such a server cost $0 and a budget never stopped; now each call holds its estimate."""
    run_dir = tmp_path / "run"
    for index in range(1, 21):
        append_record(RunPaths(run_dir).profiles, make_profile(index))
    with FakeOpenAIServer(lambda body, index: answer(None)) as server:
        models = tmp_path / "models.yaml"
        models.write_text(f"models:\n  doc: {{model: openai/doc, api_base: '{server.url}', "
                          f"input_cost_per_token: {PRICE}, output_cost_per_token: {PRICE}}}\n")
        result = CliRunner().invoke(app, ["run", "--clinician", "doc", "--patient", "offline/patient", "--turns", "3",
                                          "--budget", "0.01", "--models", str(models), "--run-dir", str(run_dir)])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "budget reached" in said, said
    billed = read_ledger(RunPaths(run_dir).calls)
    assert billed is not None and 0.005 < billed.billed_usd <= 0.02
