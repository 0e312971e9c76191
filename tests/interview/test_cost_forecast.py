"""A study stopped by its budget says what finishing would cost, and that forecast holds: against a priced
loopback server, the "about $X more" of the stop is within 25 % of what finishing was then billed; and a rerun
with the same budget sends no request at all."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.calls import read_ledger
from intake_eval.core.store import RunPaths
from tests.helpers.fakeserver import FakeOpenAIServer
from tests.helpers.study_responder import StudyResponder
from tests.interview.test_budget import STUDY, study_models


def study(config, models, run_dir):
    result = CliRunner().invoke(app, ["study", str(config), "--models", str(models), "--run-dir", str(run_dir)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result, " ".join(result.output.split())


def billed(run_dir) -> float:
    totals = read_ledger(RunPaths(run_dir).calls)
    assert totals is not None
    return totals.billed_usd


def test_the_forecast_of_a_budget_stop_is_within_a_quarter_of_what_finishing_billed(tmp_path):
    with FakeOpenAIServer(StudyResponder()) as server:
        models = study_models(tmp_path, server.url)
        config, run_dir = tmp_path / "study.yaml", tmp_path / "run"
        config.write_text(STUDY.format(n=16, budget="budget: 0.9\n"))
        first, said = study(config, models, run_dir)
        assert first.exit_code == 1 and "budget reached" in said, said
        forecast = float(re.search(r"about \$([0-9.]+) more to finish", said).group(1))
        stopped_at = billed(run_dir)

        served = server.request_count
        again, said = study(config, models, run_dir)
        assert again.exit_code == 1 and "budget reached" in said, said
        assert server.request_count == served  # the same budget again: nothing sent

        config.write_text(STUDY.format(n=16, budget=""))
        done, said = study(config, models, run_dir)
        assert done.exit_code == 0, said
        remainder = billed(run_dir) - stopped_at
    print(f"forecast ${forecast:.2f}, finishing billed ${remainder:.4f} ({forecast / remainder - 1:+.1%})")
    assert remainder > 0
    assert abs(forecast - remainder) <= 0.25 * remainder
