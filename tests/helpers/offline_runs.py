"""Small offline studies in real run folders, for the API, calibration and compare tests."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from intake_eval.cli import app

STUDY = """\
name: {name}
seed: 11
profiles: {{n: {n}, mode: stratified}}
generator: offline/generator
patient: {{model: offline/patient, mode: tracked}}
clinicians: [offline/screener, offline/anchored]
conditions: [{condition}]
judges: {judges}
turns: 8
concurrency: 8
"""


def offline_run(folder: Path, *, name: str = "tiny", n: int = 8, condition: str = "minimal",
                judges: tuple[str, ...] = ("offline/judge",), extra: str = "") -> Path:
    """Generate, run, judge and report an offline study into ``folder / name``; returns the run folder.
    ``extra``: more lines of study config (e.g. ``patient_styles: [forthcoming, guarded]``)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / f"{name}.yaml"
    config.write_text(STUDY.format(name=name, n=n, condition=condition, judges="[" + ", ".join(judges) + "]") + extra)
    run_dir = folder / name
    result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir
