"""`intake-eval estimate` at 80 and 100 columns: every line fits and every figure is printed whole
(counts abbreviated with units, 725.8k, by the same helper as `status`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from intake_eval.commands.common import compact_number
from intake_eval.commands.study import _fmt_money

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "paper.yaml")


def estimate(*args: str, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "NO_COLOR": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "intake_eval.cli", "estimate", CONFIG, *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def figures() -> dict:
    return json.loads(estimate("--json"))


@pytest.mark.parametrize("columns", [80, 100])
def test_every_estimate_figure_is_printed_whole_within_the_width(figures, columns):
    shown = estimate(columns=columns)
    lines = shown.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in shown
    rows = [line for line in lines if line.split(" ")[0] in ("generate", "run", "judge")]
    by_kind: dict[str, list[str]] = {"tokens": [], "dollars": []}
    for line in rows:
        by_kind["dollars" if "$" in line else "tokens"].append(line)
    assert len(by_kind["tokens"]) >= len(figures["lines"]) and len(by_kind["dollars"]) >= len(figures["lines"])
    for kind, shown_rows in by_kind.items():
        rows_iter = iter(shown_rows)
        for line in figures["lines"]:
            row = next(rows_iter)
            while line["alias"] not in row:  # a wrapped stage or model label continues on the next line
                row = next(rows_iter)
            cells = row.split()
            if kind == "tokens":
                expected = [compact_number(line[key]) for key in
                            ("calls", "prompt_tokens", "completion_tokens", "reasoning_tokens")]
            else:
                expected = [_fmt_money(line[key]) for key in ("dollars", "dollars_without_cache", "dollars_at_cap")]
            for figure in expected:
                assert figure in cells, (figure, row)  # a whole cell, not a prefix of a cut number
    assert re.search(r"^total\s.*\s" + re.escape(_fmt_money(figures["dollars"])) + r"\s", shown, re.MULTILINE)
    assert "540 conversations" in shown
