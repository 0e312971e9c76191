"""Judge stages as a stage kind: ``judge:<label>`` writes judgments/<label file name>/<clinician>.jsonl,
one judgment per conversation; its usage is the judge's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import rebuilt_model_entry
from intake_eval.core.record_facts import FactReader, FolderFacts, UsageReader, group_totals, usage_fact
from intake_eval.core.records import Judgment, Record, Usage
from intake_eval.core.stage_kinds import StageFacts
from intake_eval.core.store import RunPaths, file_safe, iter_json_lines

JUDGE_PREFIX = "judge:"
JUDGMENT_FACTS = "judgments"  # the kept summaries' name (core/record_facts)


def judge_stage_name(label: str) -> str:
    """The manifest stage of one judge (its label: the alias, or alias@mode for a second mode)."""
    return f"{JUDGE_PREFIX}{label}"


class JudgeKind:
    """The judgments of one judge label."""

    pattern = judge_stage_name("<label>")

    def owns(self, stage_name: str) -> bool:
        return stage_name.startswith(JUDGE_PREFIX)

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return Judgment if path.parent.parent == paths.judgments_dir and path.suffix == ".jsonl" else None

    def readers(self) -> tuple[FactReader, ...]:
        """Per judgment file: judgments, done and the judge's usage."""
        return (UsageReader(JUDGMENT_FACTS, "conversation_id",
                            lambda paths, path: self.record_model_of(paths, path) is Judgment,
                            lambda data: usage_fact([], data.get("status", "ok") == "ok", {"judge": data.get("usage")})),)

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts) -> StageFacts:
        """The judge's usage and judgments ok over its folder's files."""
        label = stage_name.removeprefix(JUDGE_PREFIX)
        folder = paths.judge_dir(label)
        total, done = Usage(), 0
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        for group in group_totals(facts.summaries(JUDGMENT_FACTS, files)).values():
            total = total.add(group.usage.get("judge", Usage()))
            done += group.done
        return StageFacts({str((stage.get("config") or {}).get("alias", label)): total}, done)

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).usage

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).done

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        """One stage per judgments folder, named from its first judgment's judge and mode."""
        stages: dict[str, dict[str, Any]] = {}
        if not paths.judgments_dir.is_dir():
            return stages
        for folder in sorted(p for p in paths.judgments_dir.iterdir() if p.is_dir()):
            for data in (line for path in sorted(folder.glob("*.jsonl")) for line in iter_json_lines(path)):
                alias = str(data.get("judge", folder.name))
                label = alias if file_safe(alias) == folder.name else folder.name  # the folder is the label's file name
                stages[judge_stage_name(label)] = {"config": {
                    "alias": alias, "mode": str(data.get("mode", "per-turn")),
                    "models": {"judge": {alias: rebuilt_model_entry(data.get("judge_model"))}}}}
                break
        return stages
