"""The study config: one YAML file that says the whole design (profiles, roles, turns, judges).

Unknown keys are rejected naming the file and the key; every value is checked before any work
starts (conditions exist as templates, the generator plays no other role, judges are distinct).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from intake_eval.core.errors import IntakeEvalError, describe_validation_error
from intake_eval.core.limits import MAX_CONCURRENCY, MAX_PROFILES
from intake_eval.core.prompts import available_conditions
from intake_eval.core.yamlfile import read_yaml


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProfilesConfig(Strict):
    n: int = Field(108, ge=1, le=MAX_PROFILES, description="number of simulated patient profiles")
    mode: Literal["stratified", "weighted"] = "stratified"


class PatientConfig(Strict):
    model: str = "gpt-4o"
    mode: Literal["prompted", "tracked"] = "prompted"
    tracker: str | None = None  # tracked mode: the model that decides unlocks (None → offline classifier)


class QCConfig(Strict):
    """Patient QC before the study: refuse to start when the patient leaks too often, or discloses
    too rarely when asked directly."""

    enabled: bool = False
    max_leak_rate: float = Field(0.05, ge=0.0, le=1.0)
    min_recall: float | None = Field(0.5, ge=0.0, le=1.0)  # null: no recall gate
    profiles: int = Field(10, ge=1)


class ForkConfig(Strict):
    """A counterfactual fork: re-run each intake from ``at`` with the supervisor's ``nudge``."""

    at: str = Field("closure", description="closure | first-planning | a turn number")
    nudge: str = Field("review", pattern=r"^[A-Za-z0-9_-]+$", description="prompts/nudge_<nudge>.j2")


class StudyConfig(Strict):
    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9._-]+$", description="run name → runs/<name>")
    description: str = ""
    seed: int = 7
    profiles: ProfilesConfig = Field(default_factory=ProfilesConfig)
    generator: str = "offline/generator"
    patient: PatientConfig = Field(default_factory=PatientConfig)
    clinicians: list[str] = Field(..., min_length=1)
    conditions: list[str] = Field(default_factory=lambda: ["minimal"], min_length=1)
    trials: int = Field(1, ge=1, le=100)
    turns: int = Field(12, ge=1, le=100)
    judges: list[str] = Field(..., min_length=1)
    judge_mode: Literal["per-turn", "conversation"] = "per-turn"
    formulation: bool = False
    concurrency: int = Field(16, ge=1, le=MAX_CONCURRENCY)
    budget: float | None = Field(None, gt=0, allow_inf_nan=False, description="dollars for the whole run folder (what its records "
                                 "already cost counts); a conversation starts only if its estimated cost fits")
    cache: bool = True
    qc: QCConfig = Field(default_factory=QCConfig)
    forks: list[ForkConfig] = Field(default_factory=list, description="could-it-ask forks, judged like any intake")

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, value: str) -> str:
        if set(value) == {"."}:  # "." and ".." would write into the current or the parent folder
            raise ValueError(f"'{value}' is not a run name (it names an existing folder, not runs/<name>)")
        return value

    @field_validator("clinicians", "judges", "conditions")
    @classmethod
    def _distinct(cls, values: list[str]) -> list[str]:
        seen = set()
        for value in values:
            if not value.strip():
                raise ValueError("empty name")
            if value in seen:
                raise ValueError(f"'{value}' is listed twice")
            seen.add(value)
        return values

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, values: list[str]) -> list[str]:
        known = available_conditions()
        for value in values:
            if value not in known:
                raise ValueError(f"unknown condition '{value}' (templates: {', '.join(known)})")
        return values

    @model_validator(mode="after")
    def _generator_held_out(self) -> "StudyConfig":
        others = {self.patient.model, *self.clinicians, *self.judges}
        if self.patient.tracker:
            others.add(self.patient.tracker)
        if self.generator in others:
            raise ValueError(f"generator '{self.generator}' may not play another role in the same study "
                             "(leakage guard)")
        return self

    # ------------------------------------------------------------ derived

    @property
    def conversation_count(self) -> int:
        return self.profiles.n * len(self.clinicians) * len(self.conditions) * self.trials

    def roles(self) -> dict[str, list[str]]:
        roles = {"generator": [self.generator], "patient": [self.patient.model],
                 "clinician": list(self.clinicians), "judge": list(self.judges)}
        if self.patient.tracker:
            roles["tracker"] = [self.patient.tracker]
        return roles

    def model_names(self) -> list[str]:
        names: list[str] = []
        for aliases in self.roles().values():
            names.extend(alias for alias in aliases if alias not in names)
        return names


def load_study_config(path: Path) -> StudyConfig:
    """Read and validate a study YAML. Every problem is one IntakeEvalError naming the file and key."""
    if not path.exists():
        raise IntakeEvalError(f"{path}: study config not found")
    if path.is_dir():
        raise IntakeEvalError(f"{path}: is a folder; give a study YAML file (e.g. configs/demo.yaml)")
    try:
        data: Any = read_yaml(path)
    except OSError as exc:
        raise IntakeEvalError(f"{path}: cannot read ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise IntakeEvalError(f"{path}: a study config is a mapping of keys (name, profiles, clinicians, …)")
    try:
        return StudyConfig.model_validate(data)
    except ValidationError as exc:
        raise IntakeEvalError(describe_validation_error(exc, path)) from None
