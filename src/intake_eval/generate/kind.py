"""The generate stage as a stage kind: ``generate`` writes profiles.jsonl (and render_failures.jsonl
for profiles whose render never passed QC); its usage is the generator's, from both files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.record_facts import FactReader, FolderFacts, UsageReader, group_totals, usage_fact
from intake_eval.core.records import Profile, Record, RenderFailure, Usage
from intake_eval.core.stage_kinds import StageFacts
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import latest_lines

GENERATE_STAGE = "generate"
PROFILE_FACTS = "profiles"  # the kept summaries' names (core/record_facts)
FAILURE_FACTS = "render_failures"


class GenerateKind:
    """Profiles and render failures, keyed by profile_id."""

    pattern = GENERATE_STAGE

    def owns(self, stage_name: str) -> bool:
        return stage_name == GENERATE_STAGE

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        models: dict[Path, type[Record]] = {paths.profiles: Profile, paths.render_failures: RenderFailure}
        return models.get(path)

    def readers(self) -> tuple[FactReader, ...]:
        """The profiles' render usage, and the render failures' usage (one group each)."""
        return (UsageReader(PROFILE_FACTS, "profile_id", lambda paths, path: path == paths.profiles,
                            lambda data: usage_fact([], True, {"render": (data.get("render") or {}).get("usage")})),
                UsageReader(FAILURE_FACTS, "profile_id", lambda paths, path: path == paths.render_failures,
                            lambda data: usage_fact([], True, {"render": data.get("usage")})))

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts) -> StageFacts:
        """Usage is the generator's over profiles and render failures; done is the profiles kept."""
        total, done = Usage(), 0
        for reader, path in ((PROFILE_FACTS, paths.profiles), (FAILURE_FACTS, paths.render_failures)):
            for group in group_totals(facts.summaries(reader, [path])).values():
                total = total.add(group.usage.get("render", Usage()))
                done += group.records if reader == PROFILE_FACTS else 0
        generator = str((stage.get("config") or {}).get("generator", "generator"))
        return StageFacts({generator: total}, done)

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).usage

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).done

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        profiles = latest_lines([paths.profiles], "profile_id")
        if not profiles:
            return {}
        generator = next((str((p.get("render") or {}).get("generator", "")) for p in profiles.values()), "")
        return {GENERATE_STAGE: {"config": {"generator": generator, "n": len(profiles)}}}
