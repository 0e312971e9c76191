"""The demo study's report in headless Chromium: a matrix cell opens the transcript viewer filtered to
exactly that cell's conversations, search matches the labels the page shows, and every nav entry
stays reachable with many optional sections."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import pandas as pd
import pytest
from typer.testing import CliRunner

from intake_eval.catalog.load import load_catalog
from intake_eval.cli import app
from intake_eval.report import html, section_list
from tests.report.test_browser import CHROMIUM, browser  # noqa: F401  (the shared headless browser fixture)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")]
DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
EXTRA_SECTIONS = 18


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    """The demo study (offline participants), reported again with many extra optional sections."""
    run_dir = tmp_path_factory.mktemp("demo") / "demo"
    result = CliRunner().invoke(app, ["study", str(DEMO), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    extra = {f"extra_{i}": (lambda data, i=i: html.Section(f"extra-{i}", f"Extra analysis number {i}", "<p>more</p>"))
             for i in range(EXTRA_SECTIONS)}
    listed = section_list.SECTIONS
    section_list.SECTIONS = (*listed, *extra.items())
    try:
        result = CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--quiet"])
    finally:
        section_list.SECTIONS = listed
    assert result.exit_code == 0, result.output
    return run_dir


@pytest.fixture()
def page(demo, browser):  # noqa: F811  (the run first: the study runs asyncio, which the open browser's loop would block)
    page = browser.new_page(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.goto((demo / "report" / "index.html").as_uri())
    yield page
    assert not problems, problems
    page.close()


def conversations(demo: Path) -> pd.DataFrame:
    table = pd.read_csv(demo / "metrics" / "conversations.csv")
    return table[(table["judge"] == "offline/judge") & (table["status"] == "ok")]


def cell_params(link) -> dict[str, str]:
    href = link.get_attribute("href") or link.get_attribute("xlink:href")
    assert href.startswith("#transcript?"), href
    return dict(parse_qsl(href.split("?", 1)[1]))


def listed(page) -> list[str]:
    """The conversations the viewer lists, read in one step once the list matches its count (a click
    re-renders the list, so reading it link by link could meet the list half replaced)."""
    page.locator("#tv-filter").wait_for(state="visible", timeout=5000)
    page.wait_for_function("() => { const count = document.querySelector('#tv-count');"
                           " return count !== null && count.dataset.count !== undefined"
                           " && document.querySelectorAll('#tv-list .conv-link').length"
                           " === Number(count.dataset.count); }", timeout=10000)
    count, ids = page.evaluate("() => [Number(document.querySelector('#tv-count').dataset.count),"
                               " [...document.querySelectorAll('#tv-list .conv-link')].map(a => a.dataset.conv)]")
    assert len(ids) == count
    return ids


def test_a_phenotype_cell_lands_on_exactly_its_transcripts(page, demo):
    cells = pd.read_csv(demo / "metrics" / "cells.csv")
    scored = conversations(demo)
    links = page.locator("#matrix svg a")
    assert links.count() >= 36  # every phenotype × clinician cell with conversations links somewhere
    link = links.nth(7)
    params = cell_params(link)
    assert params["scored"] == "1" and {"clinician", "condition", "patient_mode", "phenotype"} <= set(params)
    row = cells[(cells["judge"] == "offline/judge") & (cells["clinician"] == params["clinician"])
                & (cells["condition"] == params["condition"]) & (cells["patient_mode"] == params["patient_mode"])
                & (cells["phenotype"] == params["phenotype"])]
    assert len(row) == 1
    link.click()
    ids = listed(page)
    assert len(ids) == int(row["n"].iloc[0])
    expected = scored[(scored["clinician"] == params["clinician"]) & (scored["condition"] == params["condition"])
                      & (scored["phenotype"] == params["phenotype"])]["conversation_id"]
    assert sorted(ids) == sorted(expected)
    assert "#transcript?" in page.url
    # the viewer shows one of them and names the filter, phenotype by its catalog name
    name = load_catalog().phenotypes[params["phenotype"]].name
    active = page.locator("#tv-active").inner_text()
    assert name in active and params["clinician"] in active and "scored by" in active
    page.locator("#viewer-body h3", has_text=params["clinician"]).wait_for(timeout=5000)
    profile = page.locator("#viewer-body h3").inner_text().split(" · ")[-1]
    assert profile in {i.split(".")[0] for i in ids} or any(profile in i for i in ids)
    assert set(page.locator("#pick-conv option").evaluate_all("os => os.map(o => o.value)")) <= set(ids)
    # clearing the filter hides the list and gives the picker every conversation of the clinician back
    page.locator("#tv-clear").click()
    assert page.locator("#tv-filter").is_hidden()
    assert "?" not in page.url.split("#")[-1]
    assert page.locator("#pick-conv option").count() > len(ids)


def test_a_domain_cell_and_a_headline_count_filter_too(page, demo):
    domains = pd.read_csv(demo / "metrics" / "domains.csv")
    link = page.locator("#domains svg a").nth(4)
    params = cell_params(link)
    row = domains[(domains["judge"] == "offline/judge") & (domains["clinician"] == params["clinician"])
                  & (domains["condition"] == params["condition"]) & (domains["domain"] == params["domain"])]
    link.click()
    ids = listed(page)
    assert len(ids) == int(row["n"].iloc[0])
    profiles = {json.loads(line)["profile_id"]: json.loads(line) for line in (demo / "profiles.jsonl").read_text().splitlines()}
    scored = conversations(demo).set_index("conversation_id")
    for cid in ids:
        hidden = [d["domain"] for d in profiles[scored.loc[cid, "profile_id"]]["hidden"]]
        assert params["domain"] in hidden
    headline = page.locator("#headline-table a.to-viewer").first
    headline.click()
    clinicians = pd.read_csv(demo / "metrics" / "clinicians.csv")
    params = cell_params(headline)
    n = clinicians[(clinicians["judge"] == "offline/judge") & (clinicians["clinician"] == params["clinician"])
                   & (clinicians["condition"] == params["condition"])]["n"]
    assert len(listed(page)) == int(n.iloc[0])
    # a cell of the "when domains get probed" table (domain × clinician) lists its n conversations
    probe = page.locator("#probe-curves a.to-viewer").nth(3)
    text = probe.inner_text()
    probe.click()
    assert len(listed(page)) == int(text.split("n=")[1].rstrip(")"))
    # the capacity-gap table opens the intakes as they ran and their nudged forks
    forks = page.locator("#capacity-gap a.to-viewer")
    assert forks.count() >= 2
    assert "review" not in cell_params(forks.nth(0))["condition"] and "review" in cell_params(forks.nth(1))["condition"]
    forks.nth(1).click()
    assert listed(page)


def test_search_matches_the_labels_shown(page, demo):
    data = page.evaluate("window.IE_DATA")
    label = next(v for k, v in sorted(data["labels"].items()) if " " in v and v.replace(" ", "_").lower() != k)
    page.locator("#tv-search").fill(label.upper())
    ids = listed(page)
    assert ids
    for cid in ids:
        entry = next(c for c in data["convs"] if c[0] == cid)
        profile = data["profiles"][entry[3]]
        assert label in [data["labels"].get(d, d) for d in profile[2]] or label in profile[3]
    # a phenotype by its catalog name finds its conversations
    phenotype, name = min(data["phenotype_names"].items())
    page.locator("#tv-search").fill(name)
    assert {c[0] for c in data["convs"] if data["profiles"][c[3]][0] == phenotype} <= set(listed(page))
    # the drill-down filter: every row it keeps shows the label
    page.locator("#dd-filter").fill(label)
    rows = page.locator("#dd-body tr").all_inner_texts()
    assert rows and all(label.lower() in row.lower() for row in rows)
    page.locator("#dd-filter").fill(name)
    rows = page.locator("#dd-body tr").all_inner_texts()
    assert rows and all(name in row for row in rows)


def test_every_nav_entry_is_reachable_with_many_sections(page):
    entries = page.locator("nav.toc a")
    assert entries.count() >= 14 + EXTRA_SECTIONS
    nav = page.locator("nav.toc")
    assert nav.evaluate("n => n.scrollWidth <= n.clientWidth")  # nothing hidden to the side
    for index in range(entries.count()):
        entry = entries.nth(index)
        entry.scroll_into_view_if_needed()
        assert entry.evaluate("""a => { const r = a.getBoundingClientRect();
            const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
            return hit !== null && hit.closest('a') === a; }"""), entry.inner_text()
        target = entry.get_attribute("href")[1:]
        entry.click()
        placed = page.evaluate("""id => { const top = document.getElementById(id).getBoundingClientRect().top;
            const bottom = document.querySelector('nav.toc').getBoundingClientRect().bottom;
            return [top, bottom, window.innerHeight]; }""", target)
        top, nav_bottom, height = placed
        assert nav_bottom - 2 <= top < height, (target, placed)  # in view, not under the sticky nav
    assert nav.evaluate("n => getComputedStyle(n).position") == "sticky"


def test_a_link_from_another_page_filters_by_its_query(page, demo):
    scored = conversations(demo)
    anchored = scored[scored["clinician"] == "offline/anchored"]
    page.goto((demo / "report" / "index.html").as_uri() + "?clinician=offline%2Fanchored&condition=minimal&scored=1#transcript")
    assert sorted(listed(page)) == sorted(anchored[anchored["condition"] == "minimal"]["conversation_id"])
    page.locator("#viewer-body h3", has_text="offline/anchored").wait_for(timeout=5000)
