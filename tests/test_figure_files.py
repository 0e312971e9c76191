"""`report --figures png,svg,pdf`: every chart as a standalone file with readable labels; each file opens."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from intake_eval.catalog.load import load_catalog
from intake_eval.cli import app
from intake_eval.report.figure_files import FIGURE_NAMES
from tests.offline_runs import offline_run

pytestmark = pytest.mark.slow  # offline studies end to end


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("figures"))


def test_every_chart_is_written_in_every_format_and_opens(run_dir):
    result = CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--figures", "png,svg,pdf"])
    assert result.exit_code == 0, result.output
    folder = run_dir / "report" / "figures"
    names = sorted({p.stem for p in folder.iterdir()})
    assert set(FIGURE_NAMES.values()) <= set(names)  # the page's charts and the interval plots
    assert "probe_curves" in names  # a chart drawn inside an optional section, named after it
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{n}.{f}" for n in names for f in ("png", "svg", "pdf"))
    for name in names:
        with Image.open(folder / f"{name}.png") as image:
            image.verify()
            assert image.size[0] > 300 and image.size[1] > 150
        root = ET.parse(folder / f"{name}.svg").getroot()
        assert root.tag.endswith("svg")
        pdf = (folder / f"{name}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF-") and pdf.rstrip().endswith(b"%%EOF")
        assert len(re.findall(rb"/Type /Page\b", pdf)) == 1
        box = [float(x) for x in re.search(rb"/MediaBox \[ ([^\]]*)\]", pdf).group(1).split()]
        assert box[2] > 100 and box[3] > 100
    # readable labels: phenotype names (not ids) and domain labels (not ids)
    svg = ET.parse(folder / "coverage_by_phenotype.svg").getroot()
    texts = [el.text or "" for el in svg.iter() if el.tag.endswith("text")]
    catalog = load_catalog()
    profiles = (run_dir / "profiles.jsonl").read_text()
    shown = [p for p in catalog.phenotypes if f'"phenotype":"{p}"' in profiles.replace(" ", "")]
    assert shown
    for pid in shown:
        assert any(catalog.phenotypes[pid].name in text for text in texts)
        assert not any(text.split("  ")[0] == pid for text in texts)
    trajectory = ET.parse(folder / "coverage_by_turn.svg").getroot()
    assert any("95% CI" in (el.text or "") for el in trajectory.iter() if el.tag.endswith("text"))
    assert "coverage_by_phenotype" not in (run_dir / "report" / "index.html").read_text()  # the page keeps inline SVGs


def test_trajectory_bands_surround_the_mean_of_every_turn(run_dir):
    import pandas as pd

    from intake_eval.core.store import RunPaths
    from intake_eval.report.paper_figures import trajectory_bands, with_bands

    arms = {("offline/screener", "minimal", "tracked"): "screener", ("offline/anchored", "minimal", "tracked"): "anchored"}
    bands = trajectory_bands(RunPaths(run_dir), "offline/judge", arms)
    table = pd.read_csv(run_dir / "metrics" / "trajectories.csv")
    checked = widths = 0
    for (clinician, condition, mode), label in arms.items():
        rows = table[(table["clinician"] == clinician) & (table["judge"] == "offline/judge")]
        for _, row in rows.iterrows():
            low, high = bands[label][int(row["turn"])]
            assert low - 1e-9 <= row["mean_cumulative_coverage"] <= high + 1e-9
            checked += 1
            widths += high - low > 0
        line = {"turns": [int(t) for t in rows["turn"]], "mean": list(rows["mean_cumulative_coverage"]), "n": 8}
        banded = with_bands({label: line}, bands)[label]
        assert len(banded["lo"]) == len(banded["hi"]) == len(line["turns"])
    assert checked > 10 and widths > 0  # some turns vary across profiles


def test_a_second_call_leaves_only_the_formats_asked_for(run_dir):
    assert CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--figures", "svg", "-q"]).exit_code == 0
    assert {p.suffix for p in (run_dir / "report" / "figures").iterdir()} == {".svg"}


def test_unknown_formats_are_one_line_errors(run_dir):
    result = CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--figures", "png,gif"])
    assert result.exit_code == 2
    assert "--figures png,gif" in result.output and result.output.strip().count("\n") == 0
