"""Judge stages as a stage kind: ``judge:<label>`` writes judgments/<label file name>/<clinician>.jsonl,
one judgment per conversation; its usage is the judge's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import rebuilt_model_entry
from intake_eval.core.records import Judgment, Record, Usage
from intake_eval.core.store import RunPaths, file_safe, iter_json_lines
from intake_eval.core.usage import count_ok, latest_lines, latest_usages, usage_from_figures

JUDGE_PREFIX = "judge:"


def judge_stage_name(label: str) -> str:
    """The manifest stage of one judge (its label: the alias, or alias@mode for a second mode)."""
    return f"{JUDGE_PREFIX}{label}"


def _judgments(paths: RunPaths, label: str) -> dict[str, dict[str, Any]]:
    folder = paths.judge_dir(label)
    return latest_lines(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [], "conversation_id")


class JudgeKind:
    """The judgments of one judge label."""

    pattern = judge_stage_name("<label>")

    def owns(self, stage_name: str) -> bool:
        return stage_name.startswith(JUDGE_PREFIX)

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return Judgment if path.parent.parent == paths.judgments_dir and path.suffix == ".jsonl" else None

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        label = stage_name.removeprefix(JUDGE_PREFIX)
        folder = paths.judge_dir(label)
        total = Usage()
        for _facts, by_role in latest_usages(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [],
                                             "conversation_id", lambda data: {"judge": data.get("usage")}).values():
            total = total.add(usage_from_figures(by_role["judge"]))
        return {str((stage.get("config") or {}).get("alias", label)): total}

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return count_ok(_judgments(paths, stage_name.removeprefix(JUDGE_PREFIX)))

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
