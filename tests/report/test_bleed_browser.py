"""The drill-down shows bleed in a real headless browser: every bled domain of a profile's squares
carries its ! (also when the domain was caught), and the numbers of marks equal bled_domains."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from tests.report.test_browser import CHROMIUM, browser  # noqa: F401  (browser: the shared headless chromium fixture)
from tests.helpers.report_runs import synth_run

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)")


def test_drilldown_squares_show_bleed(browser, tmp_path: Path):  # noqa: F811
    paths = synth_run(tmp_path / "study", n_profiles=20, clinicians=("offline/screener", "offline/anchored"))
    result = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root), "--quiet"])
    assert result.exit_code == 0, result.output
    html = paths.report_index.read_text(encoding="utf-8")
    data = json.loads(re.search(r"window\.IE_DATA = (\{.*?\});</script>", html, re.S).group(1).replace("<\\/", "</"))
    rows = pd.read_csv(paths.metrics("conversations"))
    rows = rows[(rows["judge"] == data["primary"]) & (rows["status"] == "ok")]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(paths.report_index.as_uri())
    page.locator("#dd-body tr").first.wait_for(timeout=5000)
    shown_profiles = page.eval_on_selector_all("#dd-body tr td:first-child b", "els => els.map(e => e.textContent)")
    marks = page.eval_on_selector_all("#dd-body .chip", "els => els.filter(e => e.textContent.includes('!')).length")
    expected = sum(len([d for d in str(v).split(";") if d]) for v in
                   rows[rows["profile_id"].isin(shown_profiles)]["bled_domains"].fillna(""))
    assert expected > 0 and marks == expected
    shown = rows[rows["profile_id"].isin(shown_profiles)]
    both = sum(len({d for d in str(b).split(";") if d} & {d for d in str(c).split(";") if d})
               for b, c in zip(shown["bled_domains"].fillna(""), shown["caught_domains"].fillna("")))
    caught_and_bled = page.locator("#dd-body .chip.active.bled")
    assert both > 0 and caught_and_bled.count() == both  # caught and bled: a ✓ that keeps its !
    assert "also bled" in caught_and_bled.first.get_attribute("title")
    page.close()
