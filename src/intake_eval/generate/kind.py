"""The generate stage as a stage kind: ``generate`` writes profiles.jsonl (and render_failures.jsonl
for profiles whose render never passed QC); its usage is the generator's, from both files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.records import Profile, Record, RenderFailure, Usage
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import latest_lines, latest_usages, usage_from_figures

GENERATE_STAGE = "generate"


class GenerateKind:
    """Profiles and render failures, keyed by profile_id."""

    pattern = GENERATE_STAGE

    def owns(self, stage_name: str) -> bool:
        return stage_name == GENERATE_STAGE

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        models: dict[Path, type[Record]] = {paths.profiles: Profile, paths.render_failures: RenderFailure}
        return models.get(path)

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        total = Usage()
        profiles = latest_usages([paths.profiles], "profile_id",
                                 lambda data: {"generator": (data.get("render") or {}).get("usage")})
        failures = latest_usages([paths.render_failures], "profile_id", lambda data: {"generator": data.get("usage")})
        for _facts, by_role in [*profiles.values(), *failures.values()]:
            total = total.add(usage_from_figures(by_role["generator"]))
        generator = str((stage.get("config") or {}).get("generator", "generator"))
        return {generator: total}

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return len(latest_lines([paths.profiles], "profile_id"))

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        profiles = latest_lines([paths.profiles], "profile_id")
        if not profiles:
            return {}
        generator = next((str((p.get("render") or {}).get("generator", "")) for p in profiles.values()), "")
        return {GENERATE_STAGE: {"config": {"generator": generator, "n": len(profiles)}}}
