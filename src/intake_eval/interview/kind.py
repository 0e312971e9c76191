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
from intake_eval.core.records import Conversation, Record, Usage
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import (
    CLINICIAN_ROLES,
    add_usage,
    count_ok,
    latest_lines,
    latest_usages,
    usage_from_figures,
)

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
    def belongs_to(self, stage_name: str, data: Mapping[str, Any]) -> bool:
        """Whether a conversation record is one of stage ``stage_name``'s."""

    @abstractmethod
    def stage_name_of(self, data: Mapping[str, Any]) -> str | None:
        """The name of the stage of this kind that wrote a conversation record (None: not this kind's)."""

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return Conversation if path.parent == paths.conversations_dir and path.suffix == ".jsonl" else None

    def _conversations(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> list[dict[str, Any]]:
        clinicians = sorted((stage.get("additive_models") or {}).get("clinician", {}))
        lines = latest_lines([paths.conversations(alias) for alias in clinicians], "conversation_id")
        return [data for data in lines.values() if self.belongs_to(stage_name, data)]

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        """Per alias; the clinician's own roles go to the conversation's clinician, the patient's and
        the tracker's to the aliases the stage registered for them."""
        config = stage.get("config") or {}
        roles = config.get("models") or {}
        patient = next(iter(roles.get("patient") or {}), str(config.get("patient", "patient")))
        owners = {"patient": patient, "tracker": next(iter(roles.get("tracker") or {}), str(config.get("tracker") or patient))}
        total: dict[str, Usage] = {}
        clinicians = sorted((stage.get("additive_models") or {}).get("clinician", {}))
        latest = latest_usages([paths.conversations(alias) for alias in clinicians], "conversation_id",
                               lambda data: data.get("usage"), facts=("clinician", "fork"))
        for facts, by_role in latest.values():
            if not self.belongs_to(stage_name, facts):
                continue
            clinician = str(facts.get("clinician", ""))
            for role, figures in by_role.items():
                add_usage(total, clinician if role in CLINICIAN_ROLES else owners.get(role, role),
                          usage_from_figures(figures))
        return dict(sorted(total.items()))

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return count_ok({str(index): data for index, data in enumerate(self._conversations(paths, stage_name, stage))})

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

    def belongs_to(self, stage_name: str, data: Mapping[str, Any]) -> bool:
        return fork_of(data) is None

    def stage_name_of(self, data: Mapping[str, Any]) -> str | None:
        return RUN_STAGE if fork_of(data) is None else None
