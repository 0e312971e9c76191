"""Annotation packs round-trip: export → fill programmatically → import; κ equals scikit-learn's."""

from __future__ import annotations

import csv
import json
import random

import pytest
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.records import (
    QUESTION_TYPES,
    Conversation,
    ConversationTurn,
    Demographics,
    DomainDraw,
    DomainLabel,
    Judgment,
    Profile,
    TurnJudgment,
)
from intake_eval.core.store import RunPaths, append_record

JUDGE = "offline/judge"
CLINICIANS = ("offline/screener", "offline/anchored")
HIDDEN = ["insomnia", "alcohol_use", "panic", "ocd"]


def _build_run(run_dir) -> RunPaths:
    """3 profiles × 2 clinicians × 6 turns, labels varied by a seeded rng (real files, real records)."""
    paths = RunPaths(run_dir)
    rng = random.Random(7)
    for p in range(3):
        pid = f"P{p:05d}"
        draw = lambda d: DomainDraw(domain=d, label=d.replace("_", " "), severity="moderate", symptoms=[f"{d} sign"])  # noqa: E731
        append_record(paths.profiles, Profile(profile_id=pid, phenotype="demo", presenting=draw("depression"),
                                              hidden=[draw(d) for d in HIDDEN], demographics=Demographics(age=40, sex="male")))
        for clinician in CLINICIANS:
            cid = f"{pid}.{clinician.replace('/', '__')}.minimal.prompted.t0"
            turns = [ConversationTurn(turn=t, clinician=f"question {t} </script> from {clinician}",
                                      patient=f"answer {t}") for t in range(1, 7)]
            append_record(paths.conversations(clinician), Conversation(
                conversation_id=cid, profile_id=pid, phenotype="demo", clinician=clinician, patient="offline/patient",
                opening="I feel low.", turns=turns))
            judged = [TurnJudgment(turn=0, question_type="other",
                                   domains={d: DomainLabel(asked_about=False, disclosed=False) for d in HIDDEN})]
            for t in range(1, 7):
                judged.append(TurnJudgment(turn=t, question_type=rng.choice(QUESTION_TYPES), domains={
                    d: DomainLabel(asked_about=rng.random() < 0.3, disclosed=rng.random() < 0.3) for d in HIDDEN}))
            append_record(paths.judgments(JUDGE, clinician), Judgment(
                conversation_id=cid, judge=JUDGE, clinician=clinician, profile_id=pid, turns=judged))
    return paths


def _flip(value, rng, rate, options):
    return rng.choice([o for o in options if o != value]) if rng.random() < rate else value


def _fill(paths: RunPaths, name: str, rate: float, seed: int, target, skip: int = 0) -> dict:
    """An annotator who agrees with the judge except for a seeded share of flips; writes the sheet back."""
    key = {item["item_id"]: item for item in json.loads(paths.annotation_key.read_text())["items"]}
    rng = random.Random(seed)
    rows = list(csv.DictReader(open(paths.annotation_sheet, newline="")))
    labels = {}
    for index, row in enumerate(rows):
        if index < skip:
            continue  # left unlabelled
        truth = key[row["item_id"]]
        asked = _flip(truth["asked_about"], rng, rate, (True, False))
        disclosed = _flip(truth["disclosed"], rng, rate, (True, False))
        qtype = _flip(truth["question_type"], rng, rate, QUESTION_TYPES)
        row.update(annotator=name, asked_about="yes" if asked else "no", disclosed="Yes" if disclosed else "NO",
                   question_type=qtype)
        labels[row["item_id"]] = {"asked_about": asked, "disclosed": disclosed, "question_type": qtype}
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return labels


def test_export_is_blinded_stratified_and_reproducible(run_dir):
    paths = _build_run(run_dir)
    runner = CliRunner()
    result = runner.invoke(app, ["annotate", "export", "--n", "30", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    key = json.loads(paths.annotation_key.read_text())
    assert key["judge"] == JUDGE and len(key["items"]) == 30
    assert {item["clinician"] for item in key["items"]} == set(CLINICIANS)
    assert len({item["question_type"] for item in key["items"]}) == len(QUESTION_TYPES)
    assert {(i["asked_about"], i["disclosed"]) for i in key["items"]} == {(a, d) for a in (True, False) for d in (True, False)}
    sheet = list(csv.DictReader(open(paths.annotation_sheet, newline="")))
    assert [row["item_id"] for row in sheet] == [item["item_id"] for item in key["items"]]
    assert all(row["asked_about"] == row["disclosed"] == row["question_type"] == "" for row in sheet)
    html = paths.annotation_form.read_text()
    # blinded: no judge labels, no clinician names, no conversation ids; script-safe embedding
    data = json.loads(html.split('id="pack-data">', 1)[1].split("</script>", 1)[0].replace("<\\/", "</"))
    assert {tuple(sorted(item)) for item in data["items"]} == {tuple(sorted(
        ["item_id", "domain", "domain_label", "domain_symptoms", "turn", "context", "clinician_utterance", "patient_reply"]))}
    assert "offline/screener" not in html.replace("from offline/screener", "")  # only inside the utterance text
    assert "conversation_id" not in html and '"asked_about": true' not in html
    assert "http://" not in html and "https://" not in html  # works offline
    assert html.count("</script>") == 2  # the utterance's </script> was escaped
    # same inputs → same pack; a different pack is refused without --force
    again = runner.invoke(app, ["annotate", "export", "--n", "30", "--run-dir", str(run_dir)])
    assert again.exit_code == 0 and json.loads(paths.annotation_key.read_text()) == key
    other = runner.invoke(app, ["annotate", "export", "--n", "12", "--run-dir", str(run_dir)])
    assert other.exit_code == 2 and "--force" in other.output
    forced = runner.invoke(app, ["annotate", "export", "--n", "12", "--run-dir", str(run_dir), "--force"])
    assert forced.exit_code == 0 and len(json.loads(paths.annotation_key.read_text())["items"]) == 12
    assert list((run_dir / "superseded").glob("annotations-*/key.json"))


def test_import_kappa_equals_sklearn_judge_vs_human_and_human_vs_human(run_dir, tmp_path):
    paths = _build_run(run_dir)
    runner = CliRunner()
    assert runner.invoke(app, ["annotate", "export", "--n", "40", "--run-dir", str(run_dir)]).exit_code == 0
    key = {item["item_id"]: item for item in json.loads(paths.annotation_key.read_text())["items"]}
    alice = _fill(paths, "alice", 0.2, 1, tmp_path / "alice.csv")
    bob = _fill(paths, "", 0.3, 2, tmp_path / "bob.csv", skip=5)  # no name → the file name; 5 rows unlabelled
    rows = list(csv.DictReader(open(tmp_path / "bob.csv", newline="")))
    with open(tmp_path / "bob.csv", "w", newline="", encoding="utf-8-sig") as handle:  # as a spreadsheet saves it
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=";")
        writer.writeheader()
        writer.writerows(rows)
    result = runner.invoke(app, ["annotate", "import", str(tmp_path / "alice.csv"), str(tmp_path / "bob.csv"),
                                 "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "judge_vs_human" in result.stdout and "human_vs_human" in result.stdout
    rows = {(r["comparison"], r["rater_a"], r["rater_b"], r["label"]): r
            for r in csv.DictReader(open(paths.metrics("annotation_agreement")))}
    assert len(rows) == 9
    for name, labels in (("alice", alice), ("bob", bob)):
        for label in ("asked_about", "disclosed", "question_type"):
            ids = sorted(labels)
            judge = [key[i][label] for i in ids]
            human = [labels[i][label] for i in ids]
            row = rows[("judge_vs_human", JUDGE, name, label)]
            assert int(row["n"]) == len(ids)
            assert float(row["kappa"]) == pytest.approx(cohen_kappa_score(judge, human), abs=1e-5)
            assert float(row["agreement"]) == pytest.approx(sum(a == b for a, b in zip(judge, human)) / len(ids), abs=1e-5)
            assert float(row["kappa_ci_low"]) <= float(row["kappa"]) <= float(row["kappa_ci_high"])
    shared = sorted(alice.keys() & bob.keys())
    assert len(shared) == 35
    for label in ("asked_about", "disclosed", "question_type"):
        row = rows[("human_vs_human", "alice", "bob", label)]
        expected = cohen_kappa_score([alice[i][label] for i in shared], [bob[i][label] for i in shared])
        assert int(row["n"]) == 35 and float(row["kappa"]) == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("mutate, message", [
    (lambda rows: rows[2].update(disclosed="maybe"), "row 4, column disclosed: 'maybe' is not yes/no"),
    (lambda rows: rows[0].update(question_type="probing"), "row 2, column question_type: 'probing' is not a question type"),
    (lambda rows: rows[1].update(item_id="item-999"), "row 3, column item_id: 'item-999' is not in this pack"),
    (lambda rows: rows[1].update(item_id=rows[0]["item_id"]), "row 3, column item_id: alice already labelled"),
    (lambda rows: [r.pop("disclosed") for r in rows], "missing column(s) disclosed"),
])
def test_bad_csv_is_one_clear_line(run_dir, tmp_path, mutate, message):
    paths = _build_run(run_dir)
    runner = CliRunner()
    assert runner.invoke(app, ["annotate", "export", "--n", "10", "--run-dir", str(run_dir)]).exit_code == 0
    filled = tmp_path / "filled.csv"
    _fill(paths, "alice", 0.0, 1, filled)
    rows = list(csv.DictReader(open(filled, newline="")))
    mutate(rows)
    with open(filled, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = runner.invoke(app, ["annotate", "import", str(filled), "--run-dir", str(run_dir)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(filled) in lines[0] and message in lines[0]
    assert "Traceback" not in result.output


def test_export_without_judgments_or_with_unknown_judge(run_dir):
    runner = CliRunner()
    result = runner.invoke(app, ["annotate", "export", "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and "no such run folder" in result.output and not run_dir.exists()
    run_dir.mkdir()
    result = runner.invoke(app, ["annotate", "export", "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and "run `intake-eval judge` first" in result.output
    _build_run(run_dir)
    result = runner.invoke(app, ["annotate", "export", "--judge", "gemini", "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and "--judge gemini" in result.output and "offline__judge" in result.output
    result = runner.invoke(app, ["annotate", "import", "nope.csv", "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and "annotate export" in result.output


# A minimal DOM for node: enough for the form's script (elements, events, localStorage, Blob, URL).
NODE_HARNESS = r"""
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const answers = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const byId = {}, inputs = [], blobs = [];
class El {
  constructor(tag) { this.tag = tag; this.children = []; this.handlers = {}; this.style = {}; this._id = "";
    this.classList = {toggle: () => {}}; this.textContent = ""; this.value = ""; this.checked = false; }
  set id(v) { this._id = v; byId[v] = this; } get id() { return this._id; }
  appendChild(c) { this.children.push(c); return c; }
  addEventListener(k, f) { this.handlers[k] = f; }
  click() { (this.handlers.click || (() => {}))(); }
}
global.document = {
  getElementById: (id) => byId[id] || null,
  createElement: (tag) => { const e = new El(tag); if (tag === "input") inputs.push(e); return e; },
  createTextNode: (t) => new El("#text"),
};
for (const id of ["annotator", "pack", "progress", "items", "download", "link", "pack-data"]) new El("x").id = id;
byId["pack-data"].textContent = html.split('id="pack-data">')[1].split("</script>")[0];
const store = {};
global.localStorage = {getItem: (k) => store[k] || null, setItem: (k, v) => { store[k] = v; }};
global.window = global;
global.alert = (m) => { throw new Error("alert: " + m); };
global.Blob = class { constructor(parts) { this.text = parts.join(""); blobs.push(this); } };
global.URL = {createObjectURL: () => "blob:form"};
const script = html.split("<script>")[1].split("</script>")[0];
eval(script);
byId["annotator"].value = "carol";
for (const [item, labels] of Object.entries(answers)) {
  for (const [field, value] of Object.entries(labels)) {
    const radio = inputs.find((i) => i.name === item + "-" + field && i.value === value);
    radio.checked = true; radio.handlers.change();
  }
}
byId["download"].click();
process.stdout.write(JSON.stringify({csv: blobs[0].text, file: byId["link"].download, progress: byId["progress"].textContent,
                                     saved: JSON.parse(Object.values(store)[0])}));
"""


def test_offline_form_saves_a_csv_that_imports(run_dir, tmp_path):
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the HTML form's script cannot be exercised without a JS engine")
    paths = _build_run(run_dir)
    assert CliRunner().invoke(app, ["annotate", "export", "--n", "8", "--run-dir", str(run_dir)]).exit_code == 0
    key = {item["item_id"]: item for item in json.loads(paths.annotation_key.read_text())["items"]}
    yes = lambda flag: "yes" if flag else "no"  # noqa: E731
    answers = {i: {"asked_about": yes(k["asked_about"]), "disclosed": yes(not k["disclosed"]),
                   "question_type": k["question_type"]} for i, k in key.items()}
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    (tmp_path / "harness.js").write_text(NODE_HARNESS)
    done = subprocess.run([node, str(tmp_path / "harness.js"), str(paths.annotation_form), str(tmp_path / "answers.json")],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["progress"] == "8 / 8 labelled" and out["file"].endswith("_carol.csv")
    assert out["saved"]["annotator"] == "carol"  # progress survives a reload (localStorage)
    filled = tmp_path / out["file"]
    filled.write_text(out["csv"], newline="")
    result = CliRunner().invoke(app, ["annotate", "import", str(filled), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    rows = {r["label"]: r for r in csv.DictReader(open(paths.metrics("annotation_agreement")))}
    assert rows["asked_about"]["rater_b"] == "carol" and rows["asked_about"]["n"] == "8"
    assert float(rows["asked_about"]["agreement"]) == 1.0 and float(rows["question_type"]["agreement"]) == 1.0
    assert float(rows["disclosed"]["agreement"]) == 0.0  # every disclosed answer was the opposite of the judge
