"""Fork stages as a stage kind: ``fork:<at>:<nudge>`` writes counterfactual forks into the
conversation files, each record's ``fork`` naming the point (``at``) and the nudge it was made with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from intake_eval.interview.kind import ConversationKind, fork_of

FORK_PREFIX = "fork:"


def fork_stage_name(at: str, nudge: str) -> str:
    """The manifest stage of the forks made at one point with one nudge."""
    return f"{FORK_PREFIX}{at}:{nudge}"


class ForkKind(ConversationKind):
    """The forks of one (at, nudge) pair."""

    pattern = fork_stage_name("<at>", "<nudge>")

    def owns(self, stage_name: str) -> bool:
        return stage_name.startswith(FORK_PREFIX)

    def stage_name_of(self, data: Mapping[str, Any]) -> str | None:
        fork = fork_of(data)
        return fork_stage_name(str(fork.get("at", "")), str(fork.get("nudge", ""))) if fork is not None else None

    def rebuilt_config(self, data: Mapping[str, Any]) -> dict[str, Any]:
        fork = fork_of(data) or {}
        return {"at": fork.get("at"), "nudge": fork.get("nudge")}
