"""The generate stage's settings: one model for `intake-eval generate`'s flags and the study config."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from intake_eval.core.limits import MAX_CONCURRENCY, MAX_PROFILES
from intake_eval.generate.render import MAX_ATTEMPTS, QC_THRESHOLD
from intake_eval.generate.sampling import Mode
from intake_eval.runner.settings import StageSettings

HiddenCount = Literal["seed", "literature"]  # seed: 4-5 hidden, inclusion ∝ cited rate; literature: each at its rate
ProfileCount = Annotated[int, Field(ge=1, le=MAX_PROFILES, description="number of simulated patient profiles")]
DEFAULT_GENERATOR = "offline/generator"
DEFAULT_GENERATE_CONCURRENCY = 8


class GenerateSettings(StageSettings):
    """How many profiles, sampled how, rendered by which generator."""

    HINTS: ClassVar[dict[str, str]] = {"hidden_count": "must be seed or literature",
                                       "mode": "must be stratified or weighted"}

    n: ProfileCount
    mode: Mode = "stratified"
    seed: int
    generator: str = DEFAULT_GENERATOR
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = DEFAULT_GENERATE_CONCURRENCY
    max_attempts: Annotated[int, Field(ge=1)] = MAX_ATTEMPTS
    qc_threshold: Annotated[float, Field(ge=0, le=100)] = QC_THRESHOLD
    hidden_count: HiddenCount = "seed"
