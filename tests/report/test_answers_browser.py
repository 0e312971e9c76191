"""Refused and cut answers in the report, in a real headless browser (Debian's chromium): the banner
names them and the transcript viewer marks each answer cut at the token cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.replay import ReplayServer, recorded
from tests.llm.test_answers_conformance import TURNS, _by_model, _cli, _run, _setup
from tests.report.test_browser import ARGS, CHROMIUM

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)")


def test_the_report_shows_cut_answers_in_the_banner_and_the_transcript(tmp_path: Path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with ReplayServer({"chat": _by_model({"doc": recorded("openrouter_gemini_length_visible")})}) as server:
        run_dir, models = _setup(tmp_path, server)
        _run(run_dir, models)
    _cli("judge", "--judge", "offline/judge", "--run-dir", str(run_dir))
    assert _cli("report", "--run-dir", str(run_dir), "--quiet").exit_code == 0
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.goto((run_dir / "report" / "index.html").as_uri())
        assert "3 of 3 clinician answers (100%) were cut at the token cap" in page.locator("#answers-banner").inner_text()
        page.locator("#viewer-body .cell").first.wait_for(timeout=5000)  # the judged conversation opens by itself
        assert page.locator("#viewer-body").inner_text().count("[cut at the token cap]") == int(TURNS)
        browser.close()
    assert not problems, problems
