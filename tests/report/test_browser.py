"""The report in a real headless browser (Debian's chromium): no console errors, the judge grid
answers clicks with the judge's reasoning, judges switch, drill-down squares load other shards."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from tests.helpers.report_runs import synth_run

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed (/usr/bin/chromium); install it with `apt-get install -y chromium`",
)


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield instance
        instance.close()


def test_report_in_a_real_browser(browser, tmp_path: Path):
    paths = synth_run(tmp_path / "study", n_profiles=30, clinicians=("offline/screener", "offline/anchored"), failures=1)
    result = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root), "--quiet"])
    assert result.exit_code == 0, result.output
    # Open a copy in another folder: the page plus its conversations/ folder is all it needs.
    moved = tmp_path / "copied-report"
    shutil.copytree(paths.report_dir, moved)

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"network: {r.url}") if not r.url.startswith("file://") else None)
    page.goto((moved / "index.html").as_uri())

    # The first judged conversation opens by itself; click an active-discovery cell.
    cell = page.locator("#viewer-body .cell.active").first
    cell.wait_for(timeout=5000)
    cell.click()
    reasoning = page.locator("#panel-reasoning")
    assert "asks specifically about" in reasoning.inner_text()
    assert "offline/judge" in page.locator("#panel").inner_text()

    # Switch to the cross-check judge: its tab is selected and its reasoning shows on click.
    page.locator('#judge-tabs button[data-judge="cross-judge"]').click()
    assert "on" in page.locator('#judge-tabs button[data-judge="cross-judge"]').get_attribute("class")
    page.locator("#viewer-body .cell").nth(6).click()
    assert "judge: cross-judge" in page.locator("#panel").inner_text()

    # The drill-down pages through profiles; a square on page 2 loads a conversation from another shard.
    page.locator("#dd-next").click()
    assert "page 2 of 2" in page.locator("#dd-count").inner_text()
    target = page.locator("#dd-body .chips[data-conv]").last
    conversation_id = target.get_attribute("data-conv")
    target.click()
    page.locator("#viewer-body h3", has_text=conversation_id.split(".")[0]).wait_for(timeout=5000)
    assert page.evaluate("Object.keys(window.IE_DATA.convs).length") > 0

    page.locator("#dd-filter").fill("eating_complex")
    assert all("eating_complex" in row for row in page.locator("#dd-body tr").all_inner_texts())

    shot = tmp_path / "report.png"
    page.locator("#transcript").scroll_into_view_if_needed()
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    assert not problems, problems
