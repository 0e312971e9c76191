"""The report's statistics on a real run folder: Holm-adjusted p-values and A − B intervals in the paired
table, the masked-vs-aligned model, the interval each figure declares, and no raw float in any table."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.store import RunPaths
from intake_eval.metrics.stats import PROFILE_BOOTSTRAP, bootstrap_mean_ci
from tests.helpers.report_runs import synth_run


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> RunPaths:
    root = tmp_path_factory.mktemp("statistics") / "study"
    paths = synth_run(root, n_profiles=14, clinicians=("offline/screener", "offline/anchored", "llama-3.3-70b"))
    result = CliRunner().invoke(app, ["report", "--run-dir", str(root), "--quiet"])
    assert result.exit_code == 0, result.output
    return paths


def test_paired_table_carries_holm_and_the_difference_interval(run: RunPaths):
    table = pd.read_csv(run.metrics("comparisons"))
    for _, family in table.groupby("judge"):
        for column in ("permutation_p", "wilcoxon_p"):
            defined = family[family[column].notna()]
            _, expected, _, _ = multipletests(defined[column], method="holm")
            assert list(defined[f"{column}_holm"]) == pytest.approx(list(expected), rel=1e-5)
            assert (defined[f"{column}_holm"] >= defined[column] - 1e-12).all()
    conversations = pd.read_csv(run.metrics("conversations"))
    row = table[(table["judge"] == "offline/judge") & (table["metric"] == "active_coverage_rate")].iloc[0]
    scored = conversations[(conversations["judge"] == "offline/judge") & (conversations["status"] == "ok")]
    a = scored[scored["clinician"] == row["clinician_a"]].set_index("profile_id")["active_coverage_rate"]
    b = scored[scored["clinician"] == row["clinician_b"]].set_index("profile_id")["active_coverage_rate"]
    shared = sorted(set(a.index) & set(b.index))
    # reference: the profile bootstrap of the per-profile differences (one trial each), same seed
    seed = "|".join(("difference", "offline/judge", row["condition"], row["patient_mode"], "active_coverage_rate",
                     row["clinician_a"], row["clinician_b"]))
    reference = bootstrap_mean_ci({p: [a[p] - b[p]] for p in shared}, seed=seed)
    assert row["mean_difference"] == pytest.approx(reference.mean, abs=1e-6)
    assert (row["difference_ci_low"], row["difference_ci_high"]) == pytest.approx((reference.ci_low, reference.ci_high), abs=1e-6)
    assert row["ci_method"] == PROFILE_BOOTSTRAP
    page = run.report_index.read_text(encoding="utf-8")
    comparisons = page.split('id="comparisons-table"')[1].split("</table>")[0]
    assert "Holm-adjusted" in comparisons and 'data-metric="permutation_p_holm"' in comparisons
    assert re.search(r'data-metric="difference">[+-]\d+\.\d pts <span class="ci">\[', comparisons)
    summary = run.report_summary.read_text(encoding="utf-8")
    assert "### Paired comparisons on the same profiles" in summary and "A − B [95% CI]" in summary


def test_masking_model_is_reported_with_its_estimate_and_limitation(run: RunPaths):
    model = pd.read_csv(run.metrics("masking_model"))
    assert len(model) and (model["ci_low"] <= model["difference"] + 1e-12).all()
    assert (model["difference"] <= model["ci_high"] + 1e-12).all()
    page = run.report_index.read_text(encoding="utf-8")
    masking = page.split('id="masking-table"')[1].split("</table>")[0]
    assert 'data-metric="model_difference"' in masking and "phenotype permutation p" in masking
    assert "The unit of evidence is the phenotype" in page
    assert "Phenotype permutation p" in run.report_summary.read_text(encoding="utf-8")


def test_every_figure_declares_its_interval(run: RunPaths):
    intervals = pd.read_csv(run.metrics("intervals")).set_index("figure")["interval"]
    page = run.report_index.read_text(encoding="utf-8")
    for figure in ("headline", "comparisons", "masking", "domains", "trajectories"):
        assert intervals[figure] in page.replace("&#39;", "'"), figure
    assert "profile bootstrap" in intervals["headline"]  # one trial per profile here
    assert intervals["headline"] in run.report_summary.read_text(encoding="utf-8")


def test_no_raw_float_beside_formatted_cells(run: RunPaths):
    page = run.report_index.read_text(encoding="utf-8")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page, re.S)
    raw = [c for c in cells if re.search(r"\d\.\d{4,}", re.sub(r"<[^>]+>", " ", c))]
    assert raw == []
    summary = run.report_summary.read_text(encoding="utf-8")
    assert not re.search(r"\|[^|\n]*\d\.\d{4,}[^|\n]*\|", summary)
    headline = Path(run.report_headline).read_text(encoding="utf-8")
    decimals = re.findall(r"(?<![\w.])(\d+\.\d+)(?:e-?\d+)?(?![\w.])", headline)
    assert decimals and all(len(d.replace(".", "").lstrip("0")) <= 6 for d in decimals)  # .6g, as every CSV


def test_drilldown_marks_every_bled_domain(run: RunPaths):
    import json

    page = run.report_index.read_text(encoding="utf-8")
    data = json.loads(re.search(r"window\.IE_DATA = (\{.*?\});</script>", page, re.S).group(1).replace("<\\/", "</"))
    rows = pd.read_csv(run.metrics("conversations"))
    rows = rows[(rows["judge"] == data["primary"]) & (rows["status"] == "ok")].set_index("conversation_id")
    checked = 0
    for cid, _shard, _arm, pid, status, codes, _trial, _coverage in data["convs"]:
        if not codes or cid not in rows.index:
            continue
        hidden = data["profiles"][pid][2]
        flags = data["bled"].get(cid, "0" * len(hidden))
        marked = {d for d, flag in zip(hidden, flags) if flag == "1"}
        expected = set(filter(None, str(rows.loc[cid, "bled_domains"] if pd.notna(rows.loc[cid, "bled_domains"]) else "").split(";")))
        assert marked == expected, cid
        checked += 1
    assert checked >= 30 and data["bled"], "the synthetic run has bleed to show"
