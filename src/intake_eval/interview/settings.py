"""The run stage's settings: one model for `intake-eval run`'s flags and the study config.

Every default and limit of a run is declared here once (the study config composes these field
types); so is the rule that a tracked patient's tracker is the patient model unless one is named.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.limits import DEFAULT_TURNS, MAX_CONCURRENCY, MAX_TRIALS, MAX_TURNS
from intake_eval.core.patient_styles import DEFAULT_STYLE
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

    FLAGS: ClassVar[dict[str, str]] = {"clinicians": "--clinician", "conditions": "--condition",
                                       "patients": "--patient", "patient_styles": "--patient-style"}
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
    # how the patients speak (core/patient_styles.py): every style crossed with every clinician and condition
    patient_styles: list[str] = Field(default_factory=lambda: [DEFAULT_STYLE], min_length=1)
    # Every patient model, ``patient`` first; empty: ``patient`` alone. With several, each profile is
    # interviewed once per patient model and the alias enters the conversation id.
    patients: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _patients_start_with_the_patient(self) -> "RunSettings":
        if not self.patients:
            self.patients = [self.patient]
        if self.patients[0] != self.patient:
            raise IntakeEvalError(f"patient models {self.patients}: the first must be the patient '{self.patient}'")
        if len(set(self.patients)) != len(self.patients):
            raise IntakeEvalError(f"patient models {self.patients}: the same patient model is given twice")
        return self

    @property
    def several_patients(self) -> bool:
        return len(self.patients) > 1

    @property
    def tracker_alias(self) -> str | None:
        """The tracker a run calls: tracked mode only, the patient model unless one is named."""
        return (self.tracker or self.patient) if self.patient_mode == "tracked" else None

    def tracker_for(self, patient: str) -> str | None:
        """Tracked mode: the tracker a patient model's conversations use (the given one, else that patient
        model itself); prompted mode has none."""
        return (self.tracker or patient) if self.patient_mode == "tracked" else None

    def aliases(self) -> list[str | None]:
        """Every model the run calls (clinicians, patients, trackers)."""
        return [*self.clinicians, *self.patients, *(self.tracker_for(patient) for patient in self.patients)]
