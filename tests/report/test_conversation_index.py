"""A run past the inline limit: index.html keeps no per-conversation list, report/index/ pages hold it,
the page says so, and in a real browser the drill-down, search and viewer still reach every conversation;
a missing page is said plainly."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from intake_eval.report import conversation_index
from intake_eval.report.build import build_report
from tests.helpers.report_runs import synth_run
from tests.report.test_browser import ARGS, CHROMIUM


@pytest.fixture
def paged_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A 30-profile, 2-clinician run reported with an inline limit of 10 and pages of 16 conversations."""
    monkeypatch.setattr(conversation_index, "INLINE_CONVERSATIONS", 10)
    monkeypatch.setattr(conversation_index, "PAGE_CONVERSATIONS", 16)
    paths = synth_run(tmp_path / "study", n_profiles=30, clinicians=("offline/screener", "offline/anchored"), failures=1)
    build_report(paths.root)
    return paths.report_dir


def _ie_data_text(html: str) -> str:
    match = re.search(r"window\.IE_DATA = (\{.*?\});</script>", html, re.S)
    assert match, "IE_DATA missing"
    return match.group(1)


def test_the_page_leaves_the_list_to_index_pages(paged_report: Path):
    html = (paged_report / "index.html").read_text(encoding="utf-8")
    pages = sorted((paged_report / "index").glob("page-*.js"))
    assert [p.stem for p in pages] == ["page-00000", "page-00001", "page-00002", "page-00003"]  # 60 conversations / 16
    assert '"convs":[]' in _ie_data_text(html)
    assert "This run has 60 conversations of 30 profiles" in html
    assert all(f'src="index/{p.stem}.js"' in html for p in pages)
    every_id = set(re.findall(r'\["([^"]+)","s\d{5}"', "".join(p.read_text(encoding="utf-8") for p in pages)))
    assert len(every_id) == 60


def test_a_smaller_report_removes_the_pages(paged_report: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(conversation_index, "INLINE_CONVERSATIONS", 1000)
    build_report(paged_report.parent)
    assert not list((paged_report / "index").glob("page-*.js"))
    assert "This run has" not in (paged_report / "index.html").read_text(encoding="utf-8")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)")
def test_paged_index_in_a_real_browser(paged_report: Path, tmp_path: Path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    moved = tmp_path / "copied-report"
    shutil.copytree(paged_report, moved)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.goto((moved / "index.html").as_uri())
            assert page.evaluate("window.IE_DATA.convs.length") == 60
            assert page.evaluate("Object.keys(window.IE_DATA.profiles).length") == 30
            assert page.locator("#index-missing").is_hidden()
            page.locator("#viewer-body .cell.active").first.wait_for(timeout=5000)
            # The drill-down's last page reaches a conversation listed in the last index page.
            page.locator("#dd-next").click()
            assert "page 2 of 2" in page.locator("#dd-count").inner_text()
            target = page.locator("#dd-body .chips[data-conv]").last
            conversation_id = target.get_attribute("data-conv")
            target.click()
            page.locator("#viewer-body h3", has_text=conversation_id.split(".")[0]).wait_for(timeout=5000)
            page.locator("#tv-search").fill("offline/anchored")
            page.locator("#tv-count").wait_for(timeout=5000)
            page.wait_for_function("document.getElementById('tv-count').getAttribute('data-count') === '30'")
            assert not problems, problems

            # Without one page the page says so, and shows what it has.
            (moved / "index" / "page-00003.js").unlink()
            missing: list[str] = []
            page.on("pageerror", lambda e: missing.append(str(e)))
            page.goto((moved / "index.html").as_uri())
            assert page.locator("#index-missing").is_visible()
            assert page.evaluate("window.IE_DATA.convs.length") == 48
            assert not missing
        finally:
            browser.close()
