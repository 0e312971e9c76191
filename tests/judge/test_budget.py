"""`judge --budget` is the run folder's budget, as in `run` and `study`: against a priced loopback judge,
judging many conversations at once stops within about one judgment of the budget, says what is left in
one line and exits 1; the same budget again starts nothing; a larger one finishes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths, drop_records, iter_json_lines
from tests.helpers.fakeserver import FakeOpenAIServer
from tests.helpers.study_responder import StudyResponder
from tests.interview.test_budget import STUDY, folder_spend, study_models, unjudged_study


def judge(run_dir: Path, models: Path, budget: float):
    result = CliRunner().invoke(app, ["judge", "--judge", "fake-judge", "--budget", str(budget), "--concurrency", "16",
                                      "--models", str(models), "--run-dir", str(run_dir)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result, " ".join(result.output.split())


def judgment_costs(paths: RunPaths) -> list[float]:
    return [data["usage"]["cost_usd"] for path in paths.judgment_files() for data in iter_json_lines(path)]


def test_judge_budget_stops_within_one_judgment_resumes_nothing_at_the_same_budget_and_finishes_with_more(tmp_path):
    with FakeOpenAIServer(StudyResponder()) as server:
        _, models, run_dir, one = unjudged_study(tmp_path, server.url)
        paths = RunPaths(run_dir)
        budget = round(folder_spend(run_dir) + 3.5 * one, 6)

        first, said = judge(run_dir, models, budget)
        assert first.exit_code == 1, said
        judged = len(judgment_costs(paths))
        assert 0 < judged < 12, said
        assert "budget reached" in said and "spent in this run folder" in said, said
        assert f"0 conversations and {12 - judged} judgments left, about $" in said and "(--budget " in said, said
        spent = folder_spend(run_dir)
        print(f"judge: budget ${budget:.6f}, spent ${spent:.6f}, overshoot {(spent - budget) / one:+.2f} judgments "
              f"({judged} judged at concurrency 16)")
        print(said[said.index("budget reached"):][:200])
        assert spent <= budget + one + 1e-9
        assert spent >= budget - 2 * one  # the budget was used, not left idle
        assert (paths.metrics_dir / "clinicians.csv").exists()  # what was judged is scored

        again, said = judge(run_dir, models, budget)
        assert again.exit_code == 1 and f"{12 - judged} judgments left" in said, said
        assert len(judgment_costs(paths)) == judged  # nothing started

        larger, said = judge(run_dir, models, round(folder_spend(run_dir) + 20 * one, 6))
        assert larger.exit_code == 0, said
        assert len(judgment_costs(paths)) == 12
        assert "budget reached" not in said


def test_judge_budget_is_refused_when_not_a_positive_number_or_with_batch(tmp_path):
    for extra, message in ((["--budget", "0"], "--budget must be a positive"),
                           (["--budget", "nan"], "--budget must be a positive"),
                           (["--budget", "1", "--batch"], "--budget cannot be combined with --batch")):
        result = CliRunner().invoke(app, ["judge", "--judge", "offline/judge", "--run-dir", str(tmp_path), *extra])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())


def test_judge_help_explains_budget():
    result = CliRunner().invoke(app, ["judge", "--help"], terminal_width=200)
    said = " ".join(result.output.split())
    assert "--budget" in said and "Dollars for the whole run folder" in said


def test_a_study_judging_its_forks_stays_within_the_budget(tmp_path):
    with FakeOpenAIServer(StudyResponder()) as server:
        models = study_models(tmp_path, server.url)
        config = tmp_path / "study.yaml"
        forked = STUDY.format(n=6, budget="") + "forks: [{at: t1, nudge: review}]\n"
        config.write_text(forked)
        run_dir = tmp_path / "run"
        done = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
        assert done.exit_code == 0, done.output
        paths = RunPaths(run_dir)
        assert len(judgment_costs(paths)) == 12  # six intakes and their six forks
        one = max(judgment_costs(paths))
        for path in paths.judgment_files():  # the forks' judgments are gone, the intakes' stay
            drop_records(path, lambda data: ".fork-" in str(data.get("conversation_id")))
        assert len(judgment_costs(paths)) == 6
        paths.cache_db.unlink()  # judging them again is paid again (response-cache hits are never billed)
        budget = round(folder_spend(run_dir) + 2.5 * one, 6)
        config.write_text(forked + f"budget: {budget}\n")
        result = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
        said = " ".join(result.output.split())
        assert result.exit_code == 1, said
        judged = len(judgment_costs(paths))
        assert 6 < judged < 12, said
        assert f"0 conversations and {12 - judged} judgments left" in said and "budget reached" in said, said
        spent = folder_spend(run_dir)
        assert spent <= budget + one + 1e-9
