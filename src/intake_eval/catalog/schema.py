"""The clinical catalog: symptom domains (phenotypes/domains.yaml) and comorbidity phenotypes
(phenotypes/<id>.yaml). Schema + loading + cross-file validation.

Unknown keys are forbidden everywhere so a typo'd key is an error, not a silently ignored field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from intake_eval.core.package_data import package_folder

Severity = Literal["mild", "moderate", "severe"]
SEVERITIES: tuple[Severity, ...] = ("mild", "moderate", "severe")
Sex = Literal["female", "male"]

DEFAULT_CATALOG_DIR = package_folder("phenotypes")

# Bounds checked while parsing, before any loop or draw uses the value (an age range of
# [19, 1e20] would otherwise be walked year by year). Finer clinical checks live in catalog.load.
Age = Annotated[int, Field(ge=0, le=130)]
Weeks = Annotated[int, Field(ge=0, le=520)]
Count = Annotated[int, Field(ge=0, le=1000)]


def _default_symptom_counts() -> dict[Severity, tuple[int, int]]:
    return {"mild": (2, 3), "moderate": (3, 4), "severe": (4, 6)}


def _default_names() -> dict[Sex, list[str]]:
    return {"female": ["Alex"], "male": ["Alex"]}


def _even_sex_weights() -> dict[Sex, float]:
    return {"female": 0.5, "male": 0.5}


class Strict(BaseModel):
    # defer_build: each model builds its validator when a catalog is first read, not when this module is
    # imported (a run of real models imports it but reads no catalog before its first request)
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Symptom(Strict):
    id: str
    text: str  # paraphrased criterion, in our own words (never DSM text)
    # Other domains this experience also describes (poor sleep → insomnia): a profile never gives it
    # to any domain while one of these is hidden, so voicing it cannot disclose that hidden domain.
    describes: list[str] = Field(default_factory=list)


class Diagnosis(Strict):
    name: str
    icd10: list[str] = Field(default_factory=list)
    synonyms: list[str] = Field(default_factory=list)


class Prerequisites(Strict):
    sex: Sex | None = None
    min_age: Age | None = None
    max_age: Age | None = None
    postpartum: bool | None = None


class Domain(Strict):
    id: str
    label: str  # lay label
    kind: Literal["core", "adjacency"]
    safety_critical: bool = False
    description: str = ""
    symptoms: list[Symptom]
    min_symptoms: Count | None = None  # minimum count where the diagnosis needs one
    severity_prior: dict[Severity, float]
    severity_source: str = ""  # where the severity prior comes from (or "clinical judgement")
    symptom_counts: dict[Severity, tuple[Count, Count]] = Field(
        default_factory=_default_symptom_counts
    )  # inclusive range of symptoms drawn per severity band
    prerequisites: Prerequisites = Field(default_factory=Prerequisites)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    probe_questions: list[str] = Field(default_factory=list)  # specific screening questions (screener, QC)


class ContextItem(Prerequisites):
    """A demographic or life-context option, usable only when its prerequisites hold."""

    text: str


class ContextPools(Strict):
    names: dict[Sex, list[str]] = Field(default_factory=_default_names)
    occupations: list[ContextItem] = Field(default_factory=lambda: [ContextItem(text="office worker")])
    relationships: list[ContextItem] = Field(default_factory=lambda: [ContextItem(text="single")])
    life_context: list[ContextItem] = Field(default_factory=list)


class DomainCatalog(Strict):
    version: str = "1"
    domains: list[Domain]
    context: ContextPools = Field(default_factory=ContextPools)

    def by_id(self) -> dict[str, Domain]:
        return {domain.id: domain for domain in self.domains}


class OptionalDomain(Strict):
    domain: str
    probability: float  # co-occurrence with the presenting concern
    source: str  # citation for the rate (NCS-R, NESARC, disorder-specific study)


class ConflictRule(Strict):
    """When both domains are drawn, ``drop`` is removed (e.g. mania overrides hypomania)."""

    keep: str
    drop: str
    reason: str = ""


class DemographicConstraints(Strict):
    age: tuple[Age, Age] = (18, 70)
    sex_weights: dict[Sex, float] = Field(default_factory=_even_sex_weights)
    postpartum: bool = False
    weeks_postpartum: tuple[Weeks, Weeks] = (2, 26)  # only used when postpartum
    occupations: list[str] = Field(default_factory=list)  # optional phenotype-specific pool
    life_context: list[str] = Field(default_factory=list)  # phenotype-specific life-context seeds


class PrincipalDiagnosis(Strict):
    domain: str
    name: str
    icd10: list[str] = Field(default_factory=list)


class Phenotype(Strict):
    id: str
    name: str
    description: str
    alignment: Literal["masked", "aligned"]
    population_weight: float
    weight_source: str = ""
    presenting: list[str]  # presenting-domain pool
    hidden_required: list[str] = Field(default_factory=list)
    hidden_optional: list[OptionalDomain] = Field(default_factory=list)
    hidden_count: tuple[Count, Count] = (4, 5)
    conflicts: list[ConflictRule] = Field(default_factory=list)
    demographics: DemographicConstraints = Field(default_factory=DemographicConstraints)
    principal_diagnosis: PrincipalDiagnosis
    sources: list[str] = Field(default_factory=list)


class Catalog(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True, defer_build=True)
    directory: Path
    domains: dict[str, Domain]
    phenotypes: dict[str, Phenotype]  # sorted by id
    context: ContextPools = Field(default_factory=ContextPools)
    content_hash: str = ""  # stable_hash of the parsed catalog: part of the generate config

    def domain(self, domain_id: str) -> Domain:
        return self.domains[domain_id]


def allowed(req: Prerequisites, age: int, sex: str, postpartum: bool) -> bool:
    return (
        (req.min_age is None or age >= req.min_age)
        and (req.max_age is None or age <= req.max_age)
        and (req.sex is None or req.sex == sex)
        and (req.postpartum is None or req.postpartum == postpartum)
    )
