"""Sheets people open in a spreadsheet (annotations/sheet.csv, the agreement table) never start a
text cell with a formula character: model text and annotator names are shown, not evaluated."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from intake_eval.core.spreadsheet import FORMULA_STARTS, spreadsheet_cell
from tests.helpers.adversarial_cases import CONVERSATIONS, build_base, cli

FORMULAS = ("=HYPERLINK(\"http://evil.example\",\"x\")", "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
            "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("sheets"))


def test_formula_text_is_neutralised_and_numbers_are_not():
    assert [spreadsheet_cell(f) for f in FORMULAS] == ["'" + f for f in FORMULAS]
    assert spreadsheet_cell("-0.25") == "-0.25" and spreadsheet_cell(-3) == -3 and spreadsheet_cell("plain") == "plain"


def test_model_text_and_annotator_names_in_sheets_cannot_run(base, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(base, run)
    path = run / CONVERSATIONS
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        record["opening"] = FORMULAS[0]
        for index, turn in enumerate(record["turns"]):
            turn["clinician"] = FORMULAS[index % len(FORMULAS)]
            turn["patient"] = FORMULAS[(index + 1) % len(FORMULAS)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))
    done = cli("annotate", "export", "--n", "6", "--run-dir", str(run))
    assert done.returncode == 0, done.stdout + done.stderr
    sheet = run / "annotations" / "sheet.csv"
    with open(sheet, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    cells = [value for row in rows for value in row.values() if value]
    assert not [cell for cell in cells if cell.startswith(FORMULA_STARTS)], cells
    assert any(row["clinician_utterance"] in {"'" + f for f in FORMULAS} for row in rows)

    labelled = tmp_path / "labels.csv"
    with open(labelled, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "annotator": "=HYPERLINK(\"http://evil.example\")", "asked_about": "yes",
                             "disclosed": "no", "question_type": "open"})
    done = cli("annotate", "import", str(labelled), "--run-dir", str(run))
    assert done.returncode == 0, done.stdout + done.stderr
    with open(run / "metrics" / "annotation_agreement.csv", encoding="utf-8", newline="") as handle:
        agreement = list(csv.DictReader(handle))
    assert agreement and not [v for row in agreement for v in row.values()
                              if v.startswith(FORMULA_STARTS) and not v.lstrip("-").replace(".", "").isdigit()]
