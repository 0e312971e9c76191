"""Every value that reaches a page is escaped: a run folder whose aliases, names, labels, model text,
annotator names and notes are HTML/JS payloads (tests/helpers/html_payloads.py) is opened in headless
Chromium — the report (file:// and its transcript viewer), the annotation form and compare.html —
and nothing runs: no dialog opens, ``window.__pwned`` stays unset, no link is a javascript: URL.
The payload text itself is on the page, as text."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers.adversarial_cases import cli
from tests.helpers.html_payloads import CLINICIAN, CONDITION, JUDGE, PAYLOADS, payload_run
from tests.report.test_browser import CHROMIUM, browser  # noqa: F401  (the shared headless chromium fixture)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium); "
                       "install it with `apt-get install -y chromium`"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return payload_run(tmp_path_factory.mktemp("payloads"))


class Visit:
    """A page with every dialog and every executed payload recorded."""

    def __init__(self, browser, url: str):  # noqa: F811  (a page of the shared browser)
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.goto(url)
        self.page.wait_for_load_state("load")

    def settle(self) -> None:
        self.page.wait_for_timeout(300)  # an onerror/onload handler fires after the image or frame fails

    def assert_nothing_ran(self) -> None:
        self.settle()
        assert self.dialogs == [], self.dialogs
        assert self.page.evaluate("window.__pwned === undefined"), self.page.evaluate("window.__pwned")
        frames = [frame for frame in self.page.frames if frame != self.page.main_frame]
        assert frames == [], [frame.url for frame in frames]  # an injected <iframe> would be a frame
        links = self.page.evaluate("Array.from(document.querySelectorAll('[href],[src],[action]'))"
                                   ".map(e => e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action'))")
        assert not [link for link in links if link.strip().lower().startswith("javascript:")], links

    def text(self) -> str:
        return self.page.locator("body").inner_text()


def test_the_report_runs_no_payload(browser, run):  # noqa: F811  (the shared fixture)
    visit = Visit(browser, (run / "report" / "index.html").as_uri())
    visit.assert_nothing_ran()
    body = visit.text()
    assert JUDGE in body and CLINICIAN in body and CONDITION in body  # shown as text
    # every conversation through the transcript viewer: its shard loads and its text is drawn
    for index in range(visit.page.locator("#dd-body .chips[data-conv]").count()):
        visit.page.locator("#dd-body .chips[data-conv]").nth(index).click()
    for cell in visit.page.locator("#viewer-body .cell").all()[:40]:
        cell.click()
    visit.assert_nothing_ran()
    assert any(payload in visit.page.locator("#viewer-body").inner_text() for payload in PAYLOADS)


def test_the_report_over_view_runs_no_payload(browser, run):  # noqa: F811  (the shared fixture)
    from intake_eval.report.serve import report_server, url_of
    import threading

    server = report_server(run / "report", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        visit = Visit(browser, url_of(server) + f"#transcript?clinician={CLINICIAN}")
        visit.assert_nothing_ran()
    finally:
        server.shutdown()
        server.server_close()


def test_the_annotation_form_runs_no_payload(browser, run):  # noqa: F811  (the shared fixture)
    visit = Visit(browser, (run / "annotations" / "form.html").as_uri())
    visit.assert_nothing_ran()
    assert any(payload in visit.text() for payload in PAYLOADS)
    for notes in visit.page.locator("textarea").all()[:5]:
        notes.fill(PAYLOADS[1])
    visit.page.reload()
    visit.assert_nothing_ran()


def test_compare_runs_no_payload(browser, run, tmp_path):  # noqa: F811  (the shared fixture)
    other = tmp_path / "other\"><svg onload=alert('other')>"
    shutil.copytree(run, other)
    out = tmp_path / "compare"
    done = cli("compare", str(run), str(other), "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    page = out / "compare.html"
    visit = Visit(browser, page.as_uri())
    visit.assert_nothing_ran()
    assert "other\"><svg onload=alert('other')>" in visit.text()
