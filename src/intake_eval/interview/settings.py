"""The run stage's settings: one model for `intake-eval run`'s flags and the study config.

Every default and limit of a run is declared here once (the study config composes these field
types); so is the rule that a tracked patient's tracker is the patient model unless one is named.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from intake_eval.core.limits import DEFAULT_TURNS, MAX_CONCURRENCY, MAX_TRIALS, MAX_TURNS
from intake_eval.core.records import PatientMode
from intake_eval.core.shard import Shard
from intake_eval.llm.answer import TruncationPolicy
from intake_eval.runner.settings import StageSettings

Turns = Annotated[int, Field(ge=1, le=MAX_TURNS, description="clinician turns per conversation")]
Trials = Annotated[int, Field(ge=1, le=MAX_TRIALS,
                              description="independent conversations per (profile, clinician, condition)")]
Concurrency = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY, description="tasks in flight at once")]
Dollars = Annotated[float | None, Field(gt=0, allow_inf_nan=False, description="dollars for the whole run folder "
                                        "(what its records already cost counts)")]
DEFAULT_RUN_CONCURRENCY = 16


class RunSettings(StageSettings):
    """What a run holds (profiles × clinicians × conditions × trials) and how it is run."""

    FLAGS: ClassVar[dict[str, str]] = {"clinicians": "--clinician", "conditions": "--condition"}
    HINTS: ClassVar[dict[str, str]] = {"budget": "must be a positive, finite number of dollars"}

    clinicians: list[str] = Field(min_length=1)
    patient: str
    patient_mode: PatientMode = "prompted"
    tracker: str | None = None  # tracked mode: the model that decides unlocks (default: the patient model)
    turns: Turns = DEFAULT_TURNS
    conditions: list[str] = Field(default_factory=lambda: ["minimal"], min_length=1)
    trials: Trials = 1
    concurrency: Concurrency = DEFAULT_RUN_CONCURRENCY
    limit: Annotated[int | None, Field(ge=1)] = None  # only the first N profiles
    budget: Dollars = None
    formulation: bool = False  # post-intake case formulation after the last turn
    on_truncation: TruncationPolicy = "keep"  # an answer cut at its token cap: keep and flag it, or fail
    shard: Shard | None = None  # only the profiles of this shard (the folder is one shard of a study)

    @property
    def tracker_alias(self) -> str | None:
        """The tracker a run calls: tracked mode only, the patient model unless one is named."""
        return (self.tracker or self.patient) if self.patient_mode == "tracked" else None

    def aliases(self) -> list[str | None]:
        """Every model the run calls (clinicians, patient, tracker)."""
        return [*self.clinicians, self.patient, self.tracker_alias]
