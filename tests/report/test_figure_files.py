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
from tests.helpers.offline_runs import offline_run

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


def test_trajectory_bands_surround_the_mean_of_every_turn_and_show_on_the_page(run_dir):
    import pandas as pd

    table = pd.read_csv(run_dir / "metrics" / "trajectories.csv")
    low, high = table["mean_cumulative_coverage_ci_low"], table["mean_cumulative_coverage_ci_high"]
    assert table["mean_cumulative_coverage"].between(low - 1e-9, high + 1e-9).all()
    assert len(table) > 10 and (high - low > 0).any()  # some turns vary across profiles
    page = (run_dir / "report" / "index.html").read_text()
    assert "shaded: 95% CI over profiles" in page  # the page's own trajectory chart has the bands
    assert "surfacing the domain (%), 95% CI over profiles" in page  # and its per-domain rates their intervals


def test_a_second_call_leaves_only_the_formats_asked_for(run_dir):
    assert CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--figures", "svg", "-q"]).exit_code == 0
    assert {p.suffix for p in (run_dir / "report" / "figures").iterdir()} == {".svg"}


def test_unknown_formats_are_one_line_errors(run_dir):
    result = CliRunner().invoke(app, ["report", "--run-dir", str(run_dir), "--figures", "png,gif"])
    assert result.exit_code == 2
    assert "--figures png,gif" in result.output and result.output.strip().count("\n") == 0
