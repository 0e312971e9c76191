"""A run folder whose every user- or model-controlled string is an HTML/JS payload, for the
headless-browser test: aliases (clinician, patient, judge) from a --models file, a clinician
condition's name (a template file in a --prompts folder), phenotype names,
domain labels and symptom texts from a custom catalog (the offline generator and patient quote
them, so they become model text), annotator names and notes from an imported sheet, and run
folder names for compare.html. Every payload, if it ran, would set ``window.__pwned`` or open a
dialog."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import yaml

from intake_eval.core.package_data import package_folder
from tests.helpers.adversarial_cases import cli

PAYLOADS = (
    "<script>window.__pwned='script'</script>",
    "<img src=x onerror=\"window.__pwned='img'\">",
    "\"><svg onload=\"window.__pwned='svg'\">",
    "'><svg onload=alert('single')>",
    "</script><script>window.__pwned='json'</script>",
    "javascript:window.__pwned='url'",
    "<iframe srcdoc=\"<script>parent.__pwned='srcdoc'</script>\"></iframe>",
    "</textarea><img src=x onerror=alert('textarea')>",
    "<a href=\"javascript:alert('link')\">x</a>",
    "${alert('template')}",
)
CLINICIAN = "dr\"><svg onload=\"window.__pwned='clinician'\">"
JUDGE = "<img src=x onerror=\"window.__pwned='judge'\">"
PATIENT = "pt</script><script>window.__pwned='patient'</script>"
ANNOTATOR = "<img src=x onerror=\"window.__pwned='annotator'\">"
CONDITION = "c<img src=x onerror=\"window.__pwned='condition'\">"  # a file name: no slash


def payload(index: int) -> str:
    return PAYLOADS[index % len(PAYLOADS)]


def payload_catalog(folder: Path) -> Path:
    """The shipped catalog with a payload in every domain label, one symptom text per domain and
    every phenotype name."""
    shutil.copytree(package_folder("phenotypes"), folder)
    domains_file = folder / "domains.yaml"
    domains = yaml.safe_load(domains_file.read_text())
    chosen = sorted({domain["symptoms"][0]["id"] for domain in domains["domains"]})  # shared ids keep one text
    for index, domain in enumerate(domains["domains"]):
        domain["label"] = f"{domain['label']} {payload(index)}"
        for symptom in domain["symptoms"]:
            if symptom["id"] in chosen:
                symptom["text"] = f"{symptom['text']} {payload(chosen.index(symptom['id']) + 3)}"
    domains_file.write_text(yaml.safe_dump(domains, sort_keys=False, allow_unicode=True))
    for index, path in enumerate(sorted(folder.glob("*.yaml"))):
        if path.name == "domains.yaml":
            continue
        data = yaml.safe_load(path.read_text())
        data["name"] = f"{data['name']} {payload(index)}"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return folder


def payload_prompts(folder: Path) -> Path:
    """A prompts folder (``--prompts``) holding a clinician condition whose name is a payload."""
    folder.mkdir(parents=True)
    shutil.copy(package_folder("prompts") / "clinician_minimal.j2", folder / f"clinician_{CONDITION}.j2")
    return folder


def payload_models(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"models": {CLINICIAN: {"model": "offline/screener"},
                                               JUDGE: {"model": "offline/judge"},
                                               PATIENT: {"model": "offline/patient"}}}, allow_unicode=True))
    return path


def must(done) -> None:
    if done.returncode != 0:
        raise AssertionError(f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def payload_run(folder: Path) -> Path:
    """Generate → run → judge → annotate export/import → report, every name a payload."""
    catalog = payload_catalog(folder / "catalog")
    models = payload_models(folder / "models.yaml")
    run = folder / "run<img src=x onerror=alert('folder')>"
    common = ("--run-dir", str(run))
    must(cli("generate", "--n", "6", "--seed", "3", "--catalog", str(catalog), *common))
    must(cli("run", "--clinician", CLINICIAN, "--clinician", "offline/anchored", "--patient", PATIENT,
             "--patient-mode", "tracked", "--turns", "4", "--trials", "2", "--models", str(models),
             "--prompts", str(payload_prompts(folder / "prompts")), "--condition", "minimal", "--condition", CONDITION,
             *common))
    must(cli("judge", "--judge", JUDGE, "--judge", "offline/judge", "--models", str(models), *common))
    must(cli("annotate", "export", "--n", "12", "--judge", JUDGE, *common))
    must(cli("annotate", "import", str(filled(run, folder / "labels.csv")), *common))
    must(cli("annotate", "export", "--for-calibration", "--n", "2", "--judge", JUDGE, "--force", *common))
    must(cli("annotate", "import", str(filled(run, folder / "calibration.csv")), *common))
    must(cli("report", "--quiet", *common))
    return run


def filled(run: Path, target: Path) -> Path:
    """The run's annotation sheet labelled by a payload-named annotator with payload notes."""
    with open(run / "annotations" / "sheet.csv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for index, row in enumerate(rows):
            writer.writerow({**row, "annotator": ANNOTATOR, "asked_about": "yes" if index % 2 else "no",
                             "disclosed": "no", "question_type": "open", "notes": payload(index)})
    return target
