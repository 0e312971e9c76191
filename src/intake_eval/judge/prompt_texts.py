"""What the judge stage tells a judge, rendered for the run folder's prompt snapshot
(``runner.prompt_snapshot``).

Every judge prompt, in both modes, opens with the rules (label definitions and the hidden domains'
symptom lists); the conversation so far and the answer format follow. The rules hold the profile,
so they are rendered for one example, the first profile by id (the same on every resume); the
per-mode parts are kept as their templates. An offline judge is sent no prompt, so none is recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from intake_eval.core.records import Profile
from intake_eval.core.store import iter_records
from intake_eval.judge.judging import rules_prompt
from intake_eval.runner.prompt_snapshot import RenderedPrompt

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

RULES_NOTE = ("the opening of every judge prompt in both modes, rendered for the example profile; the conversation "
              "and the answer format follow it (templates judge_turn, judge_conversation)")


def first_profile(profiles_path: Path) -> Profile | None:
    """The profile with the smallest id (streamed: the file may be large)."""
    first = None
    for profile in iter_records(profiles_path, Profile):
        if first is None or profile.profile_id < first.profile_id:
            first = profile
    return first


def judge_prompt_texts(profiles_path: Path, catalog: "Catalog | None", *, offline: bool) -> list[RenderedPrompt]:
    example = None if offline else first_profile(profiles_path)
    if example is None:
        return []
    return [RenderedPrompt("judge", "rules", rules_prompt(example, catalog), "judge_rules",
                           example=f"profile {example.profile_id}", note=RULES_NOTE)]
