"""`intake-eval view RUN_DIR`: the report served on 127.0.0.1, its URL printed, fetched over HTTP."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from tests.helpers.offline_runs import offline_run

pytestmark = pytest.mark.slow  # offline studies end to end

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return offline_run(tmp_path_factory.mktemp("view"))


def serve(run_dir: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, "-m", "intake_eval.cli", "view", str(run_dir), "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    return process, process.stdout.readline().strip()


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=30)


def test_view_serves_the_report_on_loopback_and_builds_it_when_missing(run_dir):
    shutil.rmtree(run_dir / "report")
    process, url = serve(run_dir)
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/index.html"), process.stderr.read() if not url else url
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode("utf-8")
        assert response.status == 200 and page.startswith("<!DOCTYPE html>") and "tiny" in page
        shard = next((run_dir / "report" / "conversations").glob("*.js")).name
        with urllib.request.urlopen(url.replace("index.html", f"conversations/{shard}"), timeout=30) as response:
            assert response.read() == (run_dir / "report" / "conversations" / shard).read_bytes()
    finally:
        stop(process)


def test_view_of_a_missing_folder_is_one_line(tmp_path):
    result = CliRunner().invoke(app, ["view", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "no such run folder" in result.output
