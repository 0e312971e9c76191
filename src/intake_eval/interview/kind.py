"""The run stage as a stage kind, and the conversation-file reading it shares with the forks.

``run`` writes conversations/<clinician>.jsonl, one record per intake (``fork`` unset). Fork stages
write counterfactual forks into the same files; ``ConversationKind`` holds what both read alike,
and each says which conversations are its own and what its stages are named.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import rebuilt_model_entry
from intake_eval.core.record_facts import FactReader, FolderFacts, UsageReader, group_totals, usage_fact
from intake_eval.core.records import Conversation, Record, Usage
from intake_eval.core.stage_kinds import StageFacts
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import CLINICIAN_ROLES, add_usage, latest_lines

RUN_STAGE = "run"


def fork_of(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A conversation record's fork description, or None for an original intake."""
    fork = data.get("fork")
    return fork if isinstance(fork, Mapping) else None


class ConversationKind(ABC):
    """A stage whose records are conversations; subclasses say which are theirs and how they are named."""

    pattern: str

    @abstractmethod
    def owns(self, stage_name: str) -> bool:
        """Whether a manifest stage of this name is of this kind."""

    @abstractmethod
    def stage_name_of(self, data: Mapping[str, Any]) -> str | None:
        """The name of the stage of this kind that wrote a conversation record (None: not this kind's)."""

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return Conversation if path.parent == paths.conversations_dir and path.suffix == ".jsonl" else None

    def readers(self) -> tuple[FactReader, ...]:
        """Per conversation file, grouped by (stage, clinician): records, done and usage per role."""
        return (UsageReader(f"conversations {self.pattern}", "conversation_id", self._claims, self._fact),)

    def _claims(self, paths: RunPaths, path: Path) -> bool:
        return self.record_model_of(paths, path) is Conversation

    def _fact(self, data: Mapping[str, Any]) -> Any:
        name = self.stage_name_of(data)
        if name is None:
            return None  # another kind's conversation (it still supersedes an earlier line of its id)
        usage = data.get("usage")
        return usage_fact([name, str(data.get("clinician", ""))], data.get("status", "ok") == "ok",
                          usage if isinstance(usage, Mapping) else {})

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts) -> StageFacts:
        """Per alias; the clinician's own roles go to the conversation's clinician, the patient's and
        the tracker's to the aliases the stage registered for them. Done: its conversations ok."""
        config = stage.get("config") or {}
        roles = config.get("models") or {}
        patient = next(iter(roles.get("patient") or {}), str(config.get("patient", "patient")))
        owners = {"patient": patient, "tracker": next(iter(roles.get("tracker") or {}), str(config.get("tracker") or patient))}
        clinicians = sorted((stage.get("additive_models") or {}).get("clinician", {}))
        files = [paths.conversations(alias) for alias in clinicians]
        totals = group_totals(facts.summaries(self.readers()[0].name, files), lambda group: group[0] == stage_name)
        usage: dict[str, Usage] = {}
        done = 0
        for (_name, clinician), group in totals.items():
            done += group.done
            for role, used in group.usage.items():
                add_usage(usage, clinician if role in CLINICIAN_ROLES else owners.get(role, role), used)
        return StageFacts(dict(sorted(usage.items())), done)

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).usage

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).done

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        """This kind's stages from the conversations: clinicians, patient, tracker, turns, trials, conditions."""
        stages: dict[str, dict[str, Any]] = {}
        for data in latest_lines(paths.conversation_files(), "conversation_id").values():
            name = self.stage_name_of(data)
            if name is None:
                continue
            stage = stages.setdefault(name, {"config": {"conditions": [], "models": {}},
                                             "additive_models": {"clinician": {}}})
            config = stage["config"]
            stage["additive_models"]["clinician"][str(data.get("clinician", ""))] = rebuilt_model_entry(
                data.get("clinician_model"))
            patient = str(data.get("patient", ""))
            config["models"].setdefault("patient", {})[patient] = rebuilt_model_entry(data.get("patient_model"))
            config.update(patient=patient, patient_mode=str(data.get("patient_mode", "prompted")))
            config["turns"] = max(int(data.get("max_turns") or 0), config.get("turns", 0))
            config["trials"] = max(int(data.get("trial") or 0) + 1, config.get("trials", 0))
            config["conditions"] = sorted({*config["conditions"], str(data.get("condition", "minimal"))})
            config.update(self.rebuilt_config(data))
            sources = {str(turn.get("tracker", {}).get("source")) for turn in data.get("turns") or []
                       if isinstance(turn, dict) and isinstance(turn.get("tracker"), dict)
                       and turn["tracker"].get("source")}
            for source in sources - {"offline/classifier"}:
                config["tracker"] = source
                config["models"].setdefault("tracker", {})[source] = rebuilt_model_entry("")
            if data.get("formulation") is not None:
                config["formulation"] = True
        return stages

    def rebuilt_config(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Config keys of this kind's own, recovered from one of its conversation records."""
        return {}


class RunKind(ConversationKind):
    """The intakes: conversations that are not forks."""

    pattern = RUN_STAGE

    def owns(self, stage_name: str) -> bool:
        return stage_name == RUN_STAGE

    def stage_name_of(self, data: Mapping[str, Any]) -> str | None:
        return RUN_STAGE if fork_of(data) is None else None
