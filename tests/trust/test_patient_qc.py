"""Patient QC: the offline patient obeys the disclosure rule; a leaky loopback patient is caught."""

from __future__ import annotations

import csv
import json
import re

import pytest

from intake_eval.catalog.load import load_catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Demographics, DomainDraw, PatientProbe, Profile
from intake_eval.core.store import RunPaths, append_record, iter_records
from intake_eval.metrics.stats import wilson_interval
from intake_eval.trust.patient_qc import qc_gate
from intake_eval.trust.probes import (
    DEFAULT_PROBES,
    absent_domains,
    load_probe_config,
    plan_probes,
)
from intake_eval.trust.qc_result import QCResult, Rate
from intake_eval.trust.qc_tables import write_qc_metrics
from tests.helpers import cli
from tests.helpers.fakeserver import FakeOpenAIServer, Reply

HIDDEN = {1: ["panic", "alcohol_use", "ocd", "adhd"], 2: ["alcohol_use", "ocd", "adhd", "panic"]}
INVENTED = "cannabis_use"  # the leaky patient also claims this absent domain in every reply


def _profile(index: int) -> Profile:
    """A profile built from the catalog's own symptom texts (real domain ids)."""
    catalog = load_catalog()

    def draw(domain: str, count: int = 3) -> DomainDraw:
        entry = catalog.domains[domain]
        symptoms = entry.symptoms[:count]
        return DomainDraw(domain=domain, label=entry.label, severity="moderate", symptoms=[s.text for s in symptoms],
                          symptom_ids=[s.id for s in symptoms],
                          phenomenology=" ".join(f"Lately I've been {s.text}." for s in symptoms))

    return Profile(profile_id=f"P{index:05d}", index=index, phenotype=f"demo_{index}",
                   presenting=draw("depression", 5), hidden=[draw(d) for d in HIDDEN[index]],
                   demographics=Demographics(age=35, sex="female", name=f"Alex{index}", occupation="a nurse"))


def _run_dir(tmp_path):
    run_dir = tmp_path / "run"
    for index in (1, 2):
        append_record(RunPaths(run_dir).profiles, _profile(index))
    return run_dir


def invoke(*args: str):
    """`intake-eval qc-patient ARGS…` in this process (tests.helpers.cli)."""
    return cli.invoke("qc-patient", *args)


def _rows(run_dir) -> dict[tuple[str, str, str], dict[str, str]]:
    with open(RunPaths(run_dir).metrics("patient_qc"), newline="") as handle:
        return {(r["patient"], r["patient_mode"], r["metric"]): r for r in csv.DictReader(handle)}


def test_wilson_interval_matches_known_values():
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(0.7225, abs=1e-4)
    low, high = wilson_interval(5, 10)
    assert (low, high) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    assert wilson_interval(0, 0) == (None, None)


def test_probe_plan_uses_catalog_questions_and_never_a_related_absent_domain():
    catalog = load_catalog()
    config = load_probe_config(DEFAULT_PROBES, catalog)
    profile = _profile(1)
    probes = plan_probes(profile, catalog, config)
    direct = [p for p in probes if p.kind == "direct"]
    assert [p.target for p in direct] == HIDDEN[1]
    assert direct[0].text == catalog.domains["panic"].probe_questions[0]
    assert len([p for p in probes if p.kind == "open"]) == len(config.open_invitations)
    absent = absent_domains(profile, catalog, config)
    assert len(absent) == config.absent.per_profile
    own = {"depression", *HIDDEN[1]}
    # never the profile's own domains, nor one sharing a catalog symptom or a related group with them
    assert not set(absent) & (own | {"agoraphobia", "insomnia", "intrusive_harm_thoughts"})
    assert absent == absent_domains(profile, catalog, config)  # seeded


@pytest.mark.parametrize("mode", ["prompted", "tracked"])
def test_offline_patient_obeys_the_rule(tmp_path, mode):
    run_dir = _run_dir(tmp_path)
    result = invoke("--patient", "offline/patient", "--patient-mode", mode, "--n", "2", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    rows = _rows(run_dir)
    recall, leak = rows[("offline/patient", mode, "disclosure_recall")], rows[("offline/patient", mode, "leak_rate")]
    invention = rows[("offline/patient", mode, "invention_rate")]
    assert (recall["successes"], recall["n"], float(recall["rate"])) == ("8", "8", 1.0)
    assert (leak["successes"], leak["n"], float(leak["rate"])) == ("0", "10", 0.0)
    assert invention["successes"] == "0" and invention["n"] == "6"
    assert float(leak["ci_high"]) == pytest.approx(0.2775, abs=1e-4)  # Wilson upper bound for 0/10
    assert "disclosure_recall" in result.stdout and "leak_rate" in result.stdout
    records = list(iter_records(RunPaths(run_dir).qc_patient("offline/patient", mode), PatientProbe))
    assert len(records) == 24 and all(r.status == "ok" and r.judge == "offline/judge" for r in records)
    assert all(r.target_asked_about for r in records if r.kind == "direct")  # the judge agrees the probes are direct
    # a rerun resumes: every probe is already judged, nothing changes on disk
    before = RunPaths(run_dir).qc_patient("offline/patient", mode).read_bytes()
    assert invoke("--patient", "offline/patient", "--patient-mode", mode, "--n", "2", "--run-dir", str(run_dir)).exit_code == 0
    assert RunPaths(run_dir).qc_patient("offline/patient", mode).read_bytes() == before


def leaky_server() -> FakeOpenAIServer:
    """A patient that volunteers every hidden symptom (and an absent domain's) in every reply."""
    catalog = load_catalog()
    invented = " ".join(f"Lately I've been {s.text}." for s in catalog.domains[INVENTED].symptoms[:3])

    def respond(body, _index):
        name = re.findall(r"\bAlex(\d)", body["messages"][0]["content"])[0]
        hidden = " ".join(d.phenomenology for d in _profile(int(name)).hidden)
        return Reply(content=f"I've mostly been feeling low. {hidden} {invented}")

    return FakeOpenAIServer(respond)


def test_leaky_loopback_patient_is_caught_and_the_gate_refuses(tmp_path):
    run_dir = _run_dir(tmp_path)
    probes = tmp_path / "probes.yaml"
    probes.write_text(DEFAULT_PROBES.read_text().replace("domains: null", f"domains: [{INVENTED}, social_anxiety]")
                      .replace("per_profile: 3", "per_profile: 2"))
    with leaky_server() as server:
        models = tmp_path / "models.yaml"
        models.write_text(f"models:\n  leaky: {{model: openai/leaky, api_base: '{server.url}'}}\n")
        result = invoke("--patient", "leaky", "--n", "2", "--probes", str(probes), "--models", str(models),
                        "--run-dir", str(run_dir), "--max-leak-rate", "0.1")
        # 2 openings + 8 direct + 10 open + 4 absent probes, over real HTTP
        assert server.request_count == 24
        first = server.requests[0]["messages"]
        assert first[0]["role"] == "system" and "Alex" in first[0]["content"]
    assert result.exit_code == 2
    assert "leak rate 100.0% (10/10) is above the allowed 10.0%" in result.output
    assert "run folder: billed" in result.output and "records' cost" in result.output  # the closing money line
    rows = _rows(run_dir)
    assert (rows[("leaky", "prompted", "disclosure_recall")]["successes"], rows[("leaky", "prompted", "disclosure_recall")]["n"]) == ("8", "8")
    assert (rows[("leaky", "prompted", "leak_rate")]["successes"], rows[("leaky", "prompted", "leak_rate")]["n"]) == ("10", "10")
    assert (rows[("leaky", "prompted", "invention_rate")]["successes"], rows[("leaky", "prompted", "invention_rate")]["n"]) == ("2", "4")
    assert float(rows[("leaky", "prompted", "invention_rate")]["rate"]) == 0.5
    with open(RunPaths(run_dir).metrics("patient_qc_domains"), newline="") as handle:
        domains = {(r["metric"], r["domain"]): (r["successes"], r["n"]) for r in csv.DictReader(handle)}
    assert domains[("leak_rate", "panic")] == ("10", "10")  # hidden in both profiles, 5 open probes each
    assert domains[("invention_rate", INVENTED)] == ("2", "2") and domains[("invention_rate", "social_anxiety")] == ("0", "2")
    assert domains[("disclosure_recall", "ocd")] == ("2", "2")
    records = {r.probe_id: r for r in iter_records(RunPaths(run_dir).qc_patient("leaky", "prompted"), PatientProbe)}
    assert records[f"P00001.absent.{INVENTED}.0"].outcome is True
    assert records["P00001.absent.social_anxiety.0"].outcome is False
    assert set(records["P00001.open.0"].disclosed) == set(HIDDEN[1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["stages"]["qc-patient leaky prompted offline/judge"]["counts"]["probes"] == 22


def test_gate_and_merged_metrics(run_dir):
    result = QCResult("p", "m", "prompted", "j", 2, {"disclosure_recall": Rate(9, 10), "leak_rate": Rate(1, 10),
                                                     "invention_rate": Rate(0, 6)}, {})
    qc_gate(result, 0.1)  # at the threshold: allowed
    with pytest.raises(IntakeEvalError, match="leak rate 10.0%"):
        qc_gate(result, 0.05)
    with pytest.raises(IntakeEvalError, match="disclosure recall 90.0%"):
        qc_gate(result, 0.5, min_recall=0.95)
    # several patients / modes share metrics/patient_qc.csv; rerunning one replaces only its rows
    paths = RunPaths(run_dir)
    write_qc_metrics(paths, result)
    write_qc_metrics(paths, QCResult("q", "m", "tracked", "j", 1, {m: Rate(0, 0) for m in result.rates}, {"open": 3}))
    result.rates["leak_rate"] = Rate(4, 10)
    write_qc_metrics(paths, result)
    rows = _rows(run_dir)
    assert len(rows) == 6 and rows[("p", "prompted", "leak_rate")]["successes"] == "4"
    assert rows[("q", "tracked", "leak_rate")]["rate"] == "" and rows[("q", "tracked", "leak_rate")]["errors"] == "3"


def test_bad_probe_file_and_missing_profiles(tmp_path):
    run_dir = _run_dir(tmp_path)
    bad = tmp_path / "probes.yaml"
    bad.write_text("open_invitations: [Tell me more.]\nabsent:\n  domains: [not_a_domain]\n")
    result = invoke("--patient", "offline/patient", "--probes", str(bad), "--run-dir", str(run_dir))
    assert result.exit_code == 2 and "absent.domains: unknown domain 'not_a_domain'" in result.output
    bad.write_text("open_invitations: []\n")
    result = invoke("--patient", "offline/patient", "--probes", str(bad), "--run-dir", str(run_dir))
    assert result.exit_code == 2 and str(bad) in result.output and "open_invitations" in result.output
    result = invoke("--patient", "offline/patient", "--run-dir", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "generate" in result.output
    result = invoke("--patient", "offline/patient", "--patient-mode", "chatty", "--run-dir", str(run_dir))
    assert result.exit_code == 2 and "--patient-mode chatty" in result.output
