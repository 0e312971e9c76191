"""`intake-eval generate` end to end: reproducibility, resume, refused config changes, --explain,
render QC and retries through a real provider client (fake OpenAI server), the leakage guard."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.manifest import Manifest
from intake_eval.core.store import RunPaths
from intake_eval.runner.leakage import assert_no_generator_leak
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.cli import invoke


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def generate(run_dir: Path, *extra: str):
    return invoke("generate", "--run-dir", str(run_dir), *extra)


def test_stratified_108_is_six_per_phenotype_and_byte_identical_across_runs(tmp_path):
    first = generate(tmp_path / "a", "--n", "108", "--stratified", "--seed", "7")
    second = generate(tmp_path / "b", "--n", "108", "--stratified", "--seed", "7")
    assert first.exit_code == 0, first.output
    assert second.exit_code == 0, second.output
    a, b = (tmp_path / "a" / "profiles.jsonl").read_bytes(), (tmp_path / "b" / "profiles.jsonl").read_bytes()
    assert a == b
    profiles = [json.loads(line) for line in a.splitlines()]
    assert [p["profile_id"] for p in profiles] == [f"P{i:05d}" for i in range(108)]
    assert set(Counter(p["phenotype"] for p in profiles).values()) == {6}
    for profile in profiles:
        hidden = [d["domain"] for d in profile["hidden"]]
        assert 4 <= len(hidden) <= 5 and profile["presenting"]["domain"] not in hidden
        assert profile["render"]["qc_passed"] and profile["presenting"]["phenomenology"]
        assert {"age", "sex", "occupation", "relationship"} <= set(profile["demographics"])
    assert "QC pass rate: 100.0%" in first.output and "6" in first.output
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["stages"]["generate"]["status"] == "done"
    assert manifest["models"]["generator"][0]["alias"] == "offline/generator"
    other = generate(tmp_path / "c", "--n", "108", "--stratified", "--seed", "8")
    assert other.exit_code == 0 and (tmp_path / "c" / "profiles.jsonl").read_bytes() != a


def test_resume_after_an_interrupted_generate_equals_an_uninterrupted_run(tmp_path):
    assert generate(tmp_path / "full", "--n", "40", "--weighted", "--seed", "3").exit_code == 0
    assert generate(tmp_path / "cut", "--n", "40", "--weighted", "--seed", "3").exit_code == 0
    path = tmp_path / "cut" / "profiles.jsonl"
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    # a crash: 25 whole lines, then half of the 26th; shuffled order as concurrent workers leave it
    path.write_bytes(b"".join(reversed(lines[:25])) + lines[25][: len(lines[25]) // 2])
    with pytest.warns(UserWarning, match="half-written"):
        resumed = generate(tmp_path / "cut", "--n", "40", "--weighted", "--seed", "3")
    assert resumed.exit_code == 0, resumed.output
    assert "15 written now, 25 already on disk" in flat(resumed.output)
    assert path.read_bytes() == (tmp_path / "full" / "profiles.jsonl").read_bytes()
    again = generate(tmp_path / "cut", "--n", "40", "--weighted", "--seed", "3")
    assert again.exit_code == 0 and "0 written now, 40 already on disk" in flat(again.output)


def test_changed_config_is_refused_and_force_starts_over(tmp_path):
    run_dir = tmp_path / "run"
    assert generate(run_dir, "--n", "18", "--seed", "1").exit_code == 0
    refused = generate(run_dir, "--n", "18", "--seed", "2")
    assert refused.exit_code == 2
    assert refused.output.startswith("error: ") and "seed: 1 → 2" in refused.output and "--force" in refused.output
    forced = generate(run_dir, "--n", "18", "--seed", "2", "--force")
    assert forced.exit_code == 0, forced.output
    assert list((run_dir / "superseded").glob("generate-*/profiles.jsonl"))
    assert json.loads((run_dir / "manifest.json").read_text())["stages"]["generate"]["config"]["seed"] == 2


def test_explain_walks_one_profile_through_six_stages_and_writes_nothing(tmp_path):
    result = generate(tmp_path / "run", "--n", "108", "--seed", "7", "--explain", "--index", "5")
    assert result.exit_code == 0, result.output
    for stage in ("stage 1 · Phenotype sampling", "stage 2 · Domain set sampling", "stage 3 · Severity per domain",
                  "stage 4 · Symptom sampling", "stage 5 · Demographics + life context", "stage 6 · Render + QC"):
        assert stage in result.output
    assert "P00005" in result.output and "QC passed" in result.output and "nothing was written" in result.output
    assert not (tmp_path / "run").exists()


def test_bad_flags_are_one_line_errors(tmp_path):
    for args, message in ((("--n", "0"), "--n must be at least 1"), (("--concurrency", "0"), "--concurrency"),
                          (("--qc-threshold", "120"), "--qc-threshold"), (("--generator", "nope-model"), "unknown model")):
        result = generate(tmp_path / "run", *args)
        assert result.exit_code == 2 and result.output.startswith("error: ") and message in result.output
        assert "Traceback" not in result.output


# ---------------------------------------------------------------- a real provider client

def _symptoms_in(prompt: str) -> list[str]:
    """The symptom bullet list the render prompt asks the model to include."""
    lines = prompt.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Every one of these experiences"))
    found = []
    for line in lines[start + 1:]:
        if not line.startswith("- "):
            break
        found.append(line[2:])
    return found


def _models_file(tmp_path: Path, server: FakeOpenAIServer) -> str:
    path = tmp_path / "models.yaml"
    path.write_text(f"models:\n  fakegen:\n    model: openai/fake-generator\n    api_base: {server.url}\n"
                    "    temperature: 0.7\n    max_tokens: 400\n")
    return str(path)


def test_render_qc_retries_a_draft_that_leaves_symptoms_out(tmp_path):
    def respond(body, _index):
        prompt = body["messages"][0]["content"]
        if "Your previous draft left these out" not in prompt:
            return Reply(content="I have just been feeling a bit off lately, hard to say exactly how.")
        return Reply(content=" ".join(f"Lately I've been {s}." for s in _symptoms_in(prompt)))

    run_dir = tmp_path / "run"
    with FakeOpenAIServer(respond) as server:
        result = generate(run_dir, "--n", "2", "--seed", "4", "--generator", "fakegen", "--models",
                          _models_file(tmp_path, server))
        prompts = [r["messages"][0]["content"] for r in server.requests]
    assert result.exit_code == 0, result.output
    profiles = [json.loads(line) for line in (run_dir / "profiles.jsonl").read_text().splitlines()]
    domains = sum(1 + len(p["hidden"]) for p in profiles)
    assert len(prompts) == 2 * domains  # every domain failed once and passed on the retry
    assert all(p["render"]["attempts"] == 2 and p["render"]["qc_passed"] for p in profiles)
    assert "Your previous draft left these out" in prompts[-1]
    assert "Person:" in prompts[0] and "Do not name diagnoses" in prompts[0]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["models"]["generator"][0]["model"] == "openai/fake-generator"
    assert manifest["stages"]["generate"]["usage"]["fakegen"]["calls"] == 2 * domains  # keyed by alias, like every stage
    # the leakage guard: this generator may not play another role in the run
    with pytest.raises(IntakeEvalError, match="leakage guard"):
        assert_no_generator_leak(Manifest(RunPaths(run_dir)), "clinician", ["fakegen"])
    assert_no_generator_leak(Manifest(RunPaths(run_dir)), "clinician", ["offline/screener"])


def test_a_profile_that_never_passes_qc_is_reported_not_kept(tmp_path):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(lambda body, i: Reply(content="I would rather not go into it.")) as server:
        result = generate(run_dir, "--n", "1", "--seed", "4", "--generator", "fakegen", "--max-attempts", "2",
                          "--models", _models_file(tmp_path, server))
    assert result.exit_code == 1, result.output  # a profile is left to make: the command says so
    assert "1 profile(s) never passed QC" in flat(result.output)
    assert not (run_dir / "profiles.jsonl").read_text().strip()
    failure = json.loads((run_dir / "render_failures.jsonl").read_text())
    assert failure["profile_id"] == "P00000" and failure["attempts"] == 2 and failure["missing"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stages"]["generate"]["status"] == "done_with_failures"


def test_generator_already_used_in_another_role_is_refused(tmp_path):
    paths = RunPaths(tmp_path / "run")
    manifest = Manifest(paths)
    manifest.record_models("clinician", [{"alias": "gpt-4o", "model": "openai/gpt-4o"}])
    manifest.save()
    result = generate(paths.root, "--n", "1", "--generator", "gpt-4o")
    assert result.exit_code == 2 and "leakage guard" in result.output


def test_a_fatal_provider_error_stops_with_one_line_and_marks_the_stage_failed(tmp_path):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(lambda body, i: Reply(status=401, error_message="invalid api key")) as server:
        result = generate(run_dir, "--n", "2", "--generator", "fakegen", "--models", _models_file(tmp_path, server))
    last = result.output.strip().splitlines()[-1]  # after the progress bar
    assert result.exit_code == 2 and last.startswith("error: authentication failed") and "Traceback" not in result.output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stages"]["generate"]["status"] == "failed"


_DISCLOSING = (" I also hear voices nobody else hears, I have been drinking every night, I keep having panic attacks,"
               " I worry all the time about everything and I have had thoughts of killing myself.")


def _disclosing_generator(always: bool):
    """Quotes the symptoms; the presenting domain's first draft (or every draft) also names other areas."""
    def respond(body, _index):
        prompt = body["messages"][0]["content"]
        text = " ".join(f"Lately I've been {s}." for s in _symptoms_in(prompt))
        presenting = "This is the reason they came in" in prompt
        if presenting and (always or "Leave these out entirely" not in prompt):
            text += _DISCLOSING
        return Reply(content=text)
    return respond


def test_render_qc_rerenders_an_opening_that_discloses_a_hidden_domain(tmp_path):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(_disclosing_generator(always=False)) as server:
        result = generate(run_dir, "--n", "6", "--seed", "4", "--generator", "fakegen", "--models",
                          _models_file(tmp_path, server))
        prompts = [r["messages"][0]["content"] for r in server.requests]
    assert result.exit_code == 0, result.output
    profiles = [json.loads(line) for line in (run_dir / "profiles.jsonl").read_text().splitlines()]
    retried = [p for p in profiles if p["render"]["attempts"] == 2]
    assert retried and all(p["render"]["qc_passed"] for p in profiles)
    retry_prompts = [p for p in prompts if "Leave these out entirely" in p]
    assert len(retry_prompts) == len(retried)  # only the presenting domain went back, once per profile
    assert all("(your words: '" in p for p in retry_prompts)  # the phrases that gave a hidden area away
    for profile in retried:
        assert "hear voices" not in profile["presenting"]["phenomenology"]


def test_an_opening_that_keeps_disclosing_a_hidden_domain_fails_qc(tmp_path):
    run_dir = tmp_path / "run"
    with FakeOpenAIServer(_disclosing_generator(always=True)) as server:
        result = generate(run_dir, "--n", "6", "--seed", "4", "--generator", "fakegen", "--max-attempts", "2",
                          "--models", _models_file(tmp_path, server))
    assert result.exit_code == 1, result.output
    failures = [json.loads(line) for line in (run_dir / "render_failures.jsonl").read_text().splitlines()]
    assert failures and all("discloses hidden" in f["failure"] for f in failures)
    assert all(f["attempts"] == 2 for f in failures)
