"""Every terminal table at 80 columns: no line wider than the terminal, no number cut, and the
numbers printed are the numbers of the JSON / CSV output (models, status, qc-patient; estimate
has its own test in test_estimate_columns.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from intake_eval.core import numbers

from intake_eval.commands.common import compact_number, print_fitted
from intake_eval.commands.models import per_million_text
from tests.helpers.offline_runs import offline_run

WIDTH = 80


def cli(*args: str, cwd: Path) -> str:
    env = {**os.environ, "COLUMNS": str(WIDTH), "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "intake_eval", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def assert_fits(text: str) -> None:
    widest = max(text.splitlines(), key=len)
    assert len(widest) <= WIDTH, widest
    assert "…" not in text


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("narrow"), n=4)


def test_models_prints_every_price_of_the_json_at_80_columns(tmp_path):
    extra = tmp_path / "priced.yaml"
    extra.write_text("models:\n  my-priced:\n    model: openai/served-model\n    api_base: https://example.org/v1\n"
                     "    input_cost_per_token: 0.0000012345\n    output_cost_per_token: 0.00002\n"
                     "    cache_read_cost_per_token: 0.0000001\n")
    text = cli("models", "--models", str(extra), cwd=tmp_path)
    rows = json.loads(cli("models", "--models", str(extra), "--json", cwd=tmp_path))
    assert_fits(text)
    blocks = {block.split()[0]: " ".join(block.split()) for block in text.split("\n\n")[1:]}
    for row in rows:
        block = blocks[row["alias"]]
        assert row["model"] in block
        prices = (f"price: input {per_million_text(row['input_per_1m'])}, cached input "
                  f"{per_million_text(row['cached_input_per_1m'])}, output {per_million_text(row['output_per_1m'])} "
                  f"({row['price_source']})")
        assert prices in block, block
    assert rows[-1]["alias"] == "my-priced" and rows[-1]["price_source"] == "alias override"
    assert (rows[-1]["input_per_1m"], rows[-1]["cached_input_per_1m"], rows[-1]["output_per_1m"]) == (1.2345, 0.1, 20.0)
    assert "price: input 1.2345, cached input 0.10, output 20.00 (alias override)" in blocks["my-priced"]
    gpt = next(row for row in rows if row["alias"] == "gpt-4o")
    assert gpt["price_source"] == "litellm's table" and gpt["input_per_1m"] > 0 and gpt["cached_input_per_1m"] > 0


def test_status_prints_the_records_numbers_at_80_columns(run, tmp_path):
    text = cli("status", "--run-dir", str(run), cwd=tmp_path)
    data = json.loads(cli("status", "--run-dir", str(run), "--json", cwd=tmp_path))
    assert_fits(text)
    flat = " ".join(text.split())
    for name, stage in data["stages"].items():
        for model, usage in (stage.get("usage") or {}).items():
            assert name in flat and model in flat, (name, model)
            assert compact_number(usage["calls"]) in flat
    history = data["study"]["history"][-1]
    assert compact_number(history["calls"]) in flat


def test_qc_patient_prints_the_csv_rates_at_80_columns(run, tmp_path):
    text = cli("qc-patient", "--patient", "offline/patient", "--patient-mode", "tracked", "--n", "4",
               "--run-dir", str(run), cwd=tmp_path)
    assert_fits(text)
    rows = list(csv.DictReader(io.StringIO((run / "metrics" / "patient_qc.csv").read_text())))
    for row in rows:
        line = next(line for line in text.splitlines() if row["metric"] in line)
        # the terminal writes rates as the report does (core.numbers): the same figures, as percentages
        assert numbers.pct(float(row["rate"])) in line
        assert numbers.ci(float(row["ci_low"]), float(row["ci_high"])) in line
        assert f"{row['successes']}/{row['n']}" in line


@pytest.mark.parametrize("width", [80, 60])
def test_a_table_too_wide_for_its_numbers_prints_blocks_with_every_number_whole(width):
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Usage per stage and model", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("stage · model", overflow="fold")
    values = {"calls": 1_234_567, "cached": 234_567, "retries": 12_345, "prompt": 123_456_789, "output": 9_876_543}
    for column in (*values, "$"):
        table.add_column(column, justify="right", no_wrap=True)
    label = "judge:claude-sonnet-4.6 · anthropic/claude-sonnet-4-6-20260101"
    table.add_row(label, *(compact_number(value) for value in values.values()), "$1,234.5678")
    table.add_row("run · openai/gpt-4o", *(compact_number(value) for value in values.values()), "$0.2025")
    out = Console(width=width, record=True, file=io.StringIO())
    print_fitted(out, table)
    text = out.export_text()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    words = " ".join(text.split())
    for value in values.values():
        assert re.search(rf"\b{re.escape(compact_number(value))}(,|$| )", words)
    assert "$1,234.5678" in words and "$0.2025" in words and label in words


def test_a_table_that_fits_keeps_its_columns_and_narrows_only_text():
    from rich.console import Console
    from rich.table import Table

    table = Table(title="t")
    table.add_column("name", overflow="fold")
    table.add_column("dollars", justify="right", no_wrap=True)
    table.add_row("a rather long description that has to wrap between its words " * 2, "$0.2025")
    out = Console(width=WIDTH, record=True, file=io.StringIO())
    print_fitted(out, table)
    text = out.export_text()
    assert "│" in text or "┃" in text  # still a table
    assert "$0.2025" in text and max(len(line.rstrip()) for line in text.splitlines()) <= WIDTH
    assert all(word in text.split() for word in ("description", "between"))
