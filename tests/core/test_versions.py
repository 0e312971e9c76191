"""The package versions manifest.json records: what importlib.metadata says for every tracked package,
looked up once per process however often a manifest is saved."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from importlib import metadata

import pytest

from intake_eval.core import versions
from intake_eval.core.manifest import Manifest
from intake_eval.core.store import RunPaths


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return versions.NOT_INSTALLED


def test_the_manifest_records_each_installed_version(tmp_path: Path) -> None:
    paths = RunPaths(tmp_path / "run")
    manifest = Manifest(paths)
    manifest.begin_stage("run", {"turns": 1})
    recorded = json.loads(paths.manifest.read_text())["versions"]
    expected = {"intake-eval": metadata.version("intake-eval"), "python": platform.python_version(),
                **{name: _installed(name) for name in versions.TRACKED_PACKAGES}}
    assert recorded == expected  # the same keys, none added or left out, and the same values


def test_versions_are_looked_up_once_however_often_the_manifest_is_saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = metadata.version

    def counting(name: str) -> str:
        asked.append(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", counting)
    versions._looked_up.cache_clear()
    try:
        manifest = Manifest(RunPaths(tmp_path / "run"))
        for stage in ("run", "judge:j", "report"):
            manifest.begin_stage(stage, {"stage": stage})
            manifest.finish_stage(stage)
    finally:
        versions._looked_up.cache_clear()
    assert sorted(asked) == sorted(["intake-eval", *versions.TRACKED_PACKAGES])


def test_a_caller_editing_the_versions_it_got_changes_nothing_for_the_next() -> None:
    first = versions.package_versions()
    first["pydantic"] = "edited"
    assert versions.package_versions()["pydantic"] == _installed("pydantic")
