"""`--budget` is the run folder's: against a priced loopback model, many conversations at once spend
at most one conversation's cost past the budget, and a second invocation counts the first's spend."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.calls import read_ledger
from intake_eval.core.store import RunPaths, append_record, iter_json_lines
from intake_eval.runner.cost_estimate import record_cost
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer
from tests.commands.test_run_loopback import study_server

PRICE = 1e-4  # dollars per token, in and out


def priced_folder(tmp_path: Path, url: str, name: str, profiles: int) -> tuple[Path, Path]:
    run_dir = tmp_path / name
    for index in range(1, profiles + 1):
        profile = make_profile(index)
        profile.demographics.name = f"Daniel{index}"
        append_record(RunPaths(run_dir).profiles, profile)
    models = tmp_path / f"{name}.yaml"
    price = f", input_cost_per_token: {PRICE}, output_cost_per_token: {PRICE}"
    models.write_text("models:\n"
                      f"  doc: {{model: openai/doc, api_base: '{url}'{price}}}\n"
                      f"  pat: {{model: openai/pat, api_base: '{url}'{price}}}\n")
    return run_dir, models


def run(run_dir: Path, models: Path, *extra: str):
    result = CliRunner().invoke(app, ["run", "--clinician", "doc", "--patient", "pat", "--turns", "3",
                                      "--concurrency", "16", "--models", str(models), "--run-dir", str(run_dir),
                                      *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def conversation_costs(run_dir: Path) -> list[float]:
    return [record_cost(data["usage"]) for data in iter_json_lines(RunPaths(run_dir).conversations("doc"))]


def test_concurrent_run_overshoots_by_at_most_one_conversation_and_reruns_count_earlier_spend(tmp_path):
    with study_server() as server:
        probe_dir, probe_models = priced_folder(tmp_path, server.url, "probe", profiles=2)
        assert run(probe_dir, probe_models).exit_code == 0
        one = max(conversation_costs(probe_dir))  # what one conversation costs here
        assert one > 0

        run_dir, models = priced_folder(tmp_path, server.url, "run", profiles=40)
        budget = round(7.5 * one, 6)
        first = run(run_dir, models, "--budget", str(budget))
        said = " ".join(first.output.split())
        assert first.exit_code == 1, said
        assert "budget reached" in said and "spent in this run folder" in said and "more to finish" in said
        spent = sum(conversation_costs(run_dir))
        costs = conversation_costs(run_dir)
        assert 0 < len(costs) < 40
        overshoot = spent - budget
        print(f"budget ${budget:.4f}, spent ${spent:.4f}, overshoot {overshoot / one:+.2f} conversations "
              f"({len(costs)} conversations at concurrency 16)")
        assert spent <= budget + max(costs) + 1e-9
        assert spent >= budget - 2 * max(costs)  # the budget was used, not left idle

        # Same budget again: the folder has spent it, so almost nothing more starts.
        again = run(run_dir, models, "--budget", str(budget))
        assert again.exit_code == 1 and "budget reached" in " ".join(again.output.split())
        assert sum(conversation_costs(run_dir)) <= budget + max(conversation_costs(run_dir)) + 1e-9

        # A larger budget continues from what is spent, within one conversation of the new limit.
        larger = round(2 * budget, 6)
        third = run(run_dir, models, "--budget", str(larger))
        assert third.exit_code == 1
        total = sum(conversation_costs(run_dir))
        assert budget < total <= larger + max(conversation_costs(run_dir)) + 1e-9
        assert len(conversation_costs(run_dir)) < 40


STUDY = """\
name: budgeted
seed: 5
profiles: {{n: {n}, mode: stratified}}
generator: fake-gen
patient: {{model: fake-patient, mode: prompted}}
clinicians: [fake-chat]
judges: [fake-judge]
turns: 2
concurrency: 16
{budget}"""


def study_models(tmp_path: Path, url: str) -> Path:
    price = "    input_cost_per_token: 0.00001\n    output_cost_per_token: 0.00001\n"
    text = "models:\n" + "".join(f"  {alias}:\n    model: openai/{alias}-model\n    api_base: {url}\n{price}"
                                 for alias in ("fake-gen", "fake-patient", "fake-chat", "fake-judge"))
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def folder_spend(run_dir: Path) -> float:
    """What the folder was billed (its call ledger): what a budget counts."""
    totals = read_ledger(RunPaths(run_dir).calls)
    assert totals is not None
    return totals.billed_usd


def records_cost(run_dir: Path) -> float:
    paths = RunPaths(run_dir)
    total = sum(record_cost(data["usage"]) for path in paths.conversation_files() for data in iter_json_lines(path))
    total += sum(data["usage"]["cost_usd"] for path in paths.judgment_files() for data in iter_json_lines(path))
    return total + sum(data["render"]["usage"]["cost_usd"] for data in iter_json_lines(paths.profiles))


def test_a_study_budget_counts_generation_and_judging_and_stops_within_one_conversation(tmp_path):
    from tests.helpers.study_responder import StudyResponder

    with FakeOpenAIServer(StudyResponder()) as server:
        models = study_models(tmp_path, server.url)
        probe = tmp_path / "probe.yaml"
        probe.write_text(STUDY.format(n=2, budget=""))
        done = CliRunner().invoke(app, ["study", str(probe), "--models", str(models), "--run-dir", str(tmp_path / "p")])
        assert done.exit_code == 0, done.output
        paths = RunPaths(tmp_path / "p")
        generate = sum(d["render"]["usage"]["cost_usd"] for d in iter_json_lines(paths.profiles)) / 2
        one = max(record_cost(d["usage"]) for path in paths.conversation_files() for d in iter_json_lines(path))
        one += max(d["usage"]["cost_usd"] for path in paths.judgment_files() for d in iter_json_lines(path))

        config = tmp_path / "study.yaml"
        budget = round(12 * generate + 4.5 * one, 6)
        config.write_text(STUDY.format(n=12, budget=f"budget: {budget}\n"))
        run_dir = tmp_path / "run"
        result = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
        said = " ".join(result.output.split())
        assert result.exit_code == 1, said
        assert "budget reached" in said and "spent in this run folder" in said and "more to finish" in said
        conversations = sum(1 for path in RunPaths(run_dir).conversation_files() for _ in iter_json_lines(path))
        assert 0 < conversations < 12
        spent = folder_spend(run_dir)
        print(f"study: budget ${budget:.4f}, spent ${spent:.4f}, overshoot {(spent - budget) / one:+.2f} "
              f"conversations with their judging ({conversations} conversations at concurrency 16)")
        assert spent <= budget + one + 1e-9


def unjudged_study(tmp_path: Path, url: str) -> tuple[Path, Path, Path, float]:
    """A finished 12-conversation study whose judgments (with the judge's calls in the call ledger and the
    response cache) are then removed, as if an earlier invocation stopped before judging: (study config, models file, run folder, the dearest judgment's cost)."""
    models = study_models(tmp_path, url)
    config = tmp_path / "study.yaml"
    config.write_text(STUDY.format(n=12, budget=""))
    run_dir = tmp_path / "run"
    done = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
    assert done.exit_code == 0, done.output
    paths = RunPaths(run_dir)
    judgments = [d["usage"]["cost_usd"] for path in paths.judgment_files() for d in iter_json_lines(path)]
    assert len(judgments) == 12 and max(judgments) > 0
    shutil.rmtree(paths.judgments_dir)
    # nor were they billed: the call ledger forgets the judge's calls too
    kept = [line for line in paths.calls.read_text().splitlines(keepends=True) if '"role":"judge"' not in line]
    paths.calls.write_text("".join(kept))
    paths.cache_db.unlink()  # and their answers are not in the response cache (hits are never billed)
    return config, models, run_dir, max(judgments)


def test_a_study_judging_what_an_earlier_invocation_left_unjudged_stays_within_the_budget(tmp_path):
    from tests.helpers.study_responder import StudyResponder

    with FakeOpenAIServer(StudyResponder()) as server:
        config, models, run_dir, one = unjudged_study(tmp_path, server.url)
        paths = RunPaths(run_dir)
        spent_before = folder_spend(run_dir)
        budget = round(spent_before + 3.5 * one, 6)
        config.write_text(STUDY.format(n=12, budget=f"budget: {budget}\n"))
        result = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
        said = " ".join(result.output.split())
        assert result.exit_code == 1, said
        judged = sum(1 for path in paths.judgment_files() for _ in iter_json_lines(path))
        assert 0 < judged < 12, said
        assert f"{12 - judged} judgments left" in said and "budget reached" in said
        spent = folder_spend(run_dir)
        assert spent <= budget + one + 1e-9
        assert spent >= budget - 2 * one  # the budget was used, not left idle
