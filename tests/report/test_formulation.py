"""The post-intake formulation in the report: in the viewer's shards (mapping from metrics/diagnosis.csv,
hit / unearned per judge, failed formulations with their error), in a real browser below the last turn,
and the diagnosis/safety sections following `report --judge`."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.catalog.load import load_catalog
from intake_eval.cli import app
from intake_eval.core.records import Conversation, Profile
from intake_eval.core.store import RunPaths, iter_records, write_text_atomic
from intake_eval.report import fmt
from tests.report.test_browser import CHROMIUM, browser  # noqa: F401  (the shared headless-browser fixture)
from tests.helpers.report_runs import synth_run

FAILED = {"status": "provider_error: exhausted", "error": "HTTP 500 after 8 attempts (formulation)"}
INVALID = {"status": "invalid", "error": "formulation: risk_level: Input should be 'none', 'low'",
           "answer": '{"risk_level": "severe"}'}


def with_formulations(paths: RunPaths) -> None:
    """Give every conversation a formulation: the first provider-failed, the second invalid, the rest name the
    presenting concern, every hidden domain and one domain the profile does not have (catalog labels)."""
    labels = {d: domain.label for d, domain in load_catalog().domains.items()}
    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    for path in paths.conversation_files():
        conversations = list(iter_records(path, Conversation))
        for index, conversation in enumerate(conversations):
            profile = profiles[conversation.profile_id]
            absent = next(d for d in ("dissociation", "chronic_pain", "adhd")
                          if d not in profile.hidden_domains and d != profile.presenting.domain)
            named = [*profile.hidden_domains[:4], absent]
            conversation.formulation = FAILED if index == 0 else INVALID if index == 1 else {
                "status": "ok", "repaired": index == 2, "formulation": {
                    "chief_complaint": f"{labels[profile.presenting.domain]} for months", "problems": ["sleep", "work"],
                    "principal_diagnosis": {"name": labels[profile.presenting.domain], "icd10": ""},
                    "differential": [{"name": labels[d], "icd10": ""} for d in named],
                    "risk_level": "moderate", "risk_evidence": "Passive thoughts of not waking up."}}
        lines = [conversation.model_dump_json() for conversation in conversations]
        write_text_atomic(path, "\n".join(lines) + "\n")


def formulation_run(root: Path) -> RunPaths:
    paths = synth_run(root, n_profiles=12, clinicians=("offline/screener", "offline/anchored"))
    with_formulations(paths)
    result = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root), "--quiet"])
    assert result.exit_code == 0, result.output
    return paths


def shards(paths: RunPaths) -> dict[str, dict]:
    out = {}
    for shard in sorted(paths.report_shards_dir.glob("s*.js")):
        match = re.fullmatch(r'IE_SHARD\("(s\d+)",(.*)\);\n', shard.read_text(encoding="utf-8"), re.DOTALL)
        out.update(json.loads(match.group(2)))
    return out


def diagnosis_rows(paths: RunPaths) -> dict[tuple[str, str], dict[str, str]]:
    with paths.metrics("diagnosis").open(encoding="utf-8") as handle:
        return {(r["conversation_id"], r["judge"]): r for r in csv.DictReader(handle)}


def test_shards_carry_the_formulation_with_the_mapping_of_diagnosis_csv(tmp_path: Path):
    paths = formulation_run(tmp_path / "run")
    data, rows = shards(paths), diagnosis_rows(paths)
    anchored = sorted(cid for cid in data if ".offline__anchored." in cid)
    failed, invalid, scored = data[anchored[0]]["formulation"], data[anchored[1]]["formulation"], data[anchored[2]]
    assert failed == {"s": "provider_error: exhausted", "e": FAILED["error"]}
    assert invalid["s"] == "invalid" and "risk_level" in invalid["e"] and invalid["a"] == INVALID["answer"]
    f = scored["formulation"]
    assert f["s"] == "ok" and f["rep"] == 1 and f["risk"] == "moderate" and f["cc"].endswith("for months")
    row = rows[(scored["id"], "offline/judge")]
    assert f["dx"] == [[m["slot"], m["name"], m.get("icd10", ""), m.get("domain"), m["method"]] for m in json.loads(row["mapping"])]
    assert [d[3] for d in f["dx"][1:-1]] == scored["hidden"][:4] and f["dx"][0][3] == scored["presenting_domain"]
    assert f["dx"][-1][3] not in scored["hidden"]  # the domain this profile does not have
    assert f["core"] == row["principal_domain"] and f["hit"] == (1 if row["principal_hit"] == "true" else 0)
    for judge in ("offline/judge", "cross-judge"):
        assert f["u"][judge] == [d for d in rows[(scored["id"], judge)]["unearned_domains"].split(";") if d]
    # The anchored clinician names hidden domains it never surfaced: some formulation has unearned ones.
    assert any(c["formulation"]["s"] == "ok" and c["formulation"]["u"]["offline/judge"] for c in data.values())
    # Small: a formulation adds well under 1 kB to its conversation's shard entry.
    assert max(len(json.dumps(c["formulation"], separators=(",", ":"))) for c in data.values()) < 1000


def test_diagnosis_and_safety_sections_follow_the_report_judge(tmp_path: Path):
    paths = formulation_run(tmp_path / "run")

    def sections() -> tuple[str, str]:
        html = paths.report_index.read_text(encoding="utf-8")
        safety = re.search(r'<section[^>]*id="safety".*?</section>', html, re.DOTALL).group(0)
        diagnosis = re.search(r'<section[^>]*id="diagnosis".*?</section>', html, re.DOTALL).group(0)
        return safety, diagnosis

    safety, diagnosis = sections()
    assert "Judge: offline/judge." in safety and "Judge: offline/judge." in diagnosis
    result = CliRunner().invoke(app, ["report", "--run-dir", str(paths.root), "--judge", "cross-judge", "--quiet"])
    assert result.exit_code == 0, result.output
    safety, diagnosis = sections()
    assert "Judge: cross-judge." in safety and "Judge: cross-judge." in diagnosis
    assert "offline/judge" not in safety and "offline/judge" not in diagnosis
    with paths.metrics("diagnosis_clinicians").open(encoding="utf-8") as handle:
        aggregates = {(r["judge"], r["clinician"]): r for r in csv.DictReader(handle)}
    cross = aggregates[("cross-judge", "offline/anchored")]
    expected = f"{fmt.pct(float(cross['mean_comorbidity_recall']))}"
    row = re.search(r"<tr><td class='l'>offline/anchored ·.*?</tr>", diagnosis).group(0)
    assert expected in row and f">{cross['scored']}<" in row
    summary = paths.report_summary.read_text(encoding="utf-8")
    part = summary.split("## Coverage vs diagnosis", 1)[1]
    assert expected in part.split("offline/anchored", 1)[1].splitlines()[0]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)")
def test_formulation_shows_below_the_last_turn_in_a_real_browser(browser, tmp_path: Path):  # noqa: F811
    paths = formulation_run(tmp_path / "run")
    data, rows = shards(paths), diagnosis_rows(paths)
    unearned = next(cid for cid in sorted(data) if data[cid]["formulation"]["s"] == "ok"
                    and rows[(cid, "offline/judge")]["unearned_domains"])
    failed = next(cid for cid in sorted(data) if data[cid]["formulation"]["s"].startswith("provider_error"))
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.goto(paths.report_index.as_uri() + "#c=" + unearned + "&j=offline/judge")

    block = page.locator("#viewer-body #formulation")
    block.wait_for(timeout=5000)
    text = block.inner_text()
    assert "Post-intake formulation" in text and "not shown to the patient" in text
    assert ("repaired once" in text) == bool(data[unearned]["formulation"]["rep"])
    assert "Chief complaint:" in text and "moderate" in text and "Passive thoughts of not waking up." in text
    # Below the last turn: after the transcript table in the page.
    assert page.evaluate("document.querySelector('table.turns').compareDocumentPosition("
                         "document.getElementById('formulation')) & Node.DOCUMENT_POSITION_FOLLOWING") > 0
    domain = rows[(unearned, "offline/judge")]["unearned_domains"].split(";")[0]
    verdict = block.locator(f'tr[data-domain="{domain}"]').inner_text()
    assert "unearned: never actively surfaced" in verdict
    assert block.locator("tr.fx-other").count() == 1 and block.locator("tr.fx-presenting").count() == 1
    core = rows[(unearned, "offline/judge")]["principal_domain"].replace("_", " ")
    assert core in page.locator("#formulation-core").inner_text()

    page.locator("#pick-conv").select_option(failed)
    page.locator("#viewer-body h3", has_text=failed.split(".")[0]).wait_for(timeout=5000)
    failed_text = page.locator("#viewer-body #formulation").inner_text()
    assert "provider_error: exhausted" in failed_text and "HTTP 500 after 8 attempts" in failed_text
    assert not problems, problems
