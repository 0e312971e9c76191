"""The judge stage's settings: one model for `intake-eval judge`'s flags and the study config."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator

from intake_eval.core.limits import MAX_CONCURRENCY
from intake_eval.core.shard import Shard
from intake_eval.runner.settings import StageSettings

JudgeMode = Literal["per-turn", "conversation"]
DEFAULT_JUDGE_CONCURRENCY = 64


class JudgeSettings(StageSettings):
    """Which judges label the folder's ok conversations, how, and within which budget."""

    FLAGS: ClassVar[dict[str, str]] = {"judges": "--judge"}
    HINTS: ClassVar[dict[str, str]] = {"budget": "must be a positive, finite number of dollars"}

    judges: list[str] = Field(min_length=1)  # the first is the folder's primary judge when it has none yet
    mode: JudgeMode = "per-turn"
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = DEFAULT_JUDGE_CONCURRENCY
    limit: Annotated[int | None, Field(ge=1)] = None  # only the first N ok conversations (by id)
    budget: Annotated[float | None, Field(gt=0, allow_inf_nan=False)] = None
    shard: Shard | None = None

    @field_validator("judges")
    @classmethod
    def _distinct(cls, judges: list[str]) -> list[str]:
        if len(set(judges)) != len(judges):
            raise ValueError("the same judge is given twice")
        return judges
