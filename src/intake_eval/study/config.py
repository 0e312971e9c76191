"""The study config: one YAML file that says the whole design (profiles, roles, turns, judges).

Unknown keys are rejected naming the file and the key; every value is checked before any work
starts (conditions exist as templates, the generator plays no other role, judges are distinct).

The user's own files: ``prompts_dir:`` (templates there win over the shipped ones), ``catalog:``
(a phenotype folder instead of the shipped one) and ``phenotypes: [ids…]`` (a subset of the
catalog's phenotypes). Relative paths are read from the config file's folder. A bundled config is
named by its stem: ``intake-eval study paper`` reads the shipped configs/paper.yaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from intake_eval.catalog.load import load_catalog
from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR, Catalog
from intake_eval.catalog.subset import catalog_subset
from intake_eval.core.errors import IntakeEvalError, describe_validation_error
from intake_eval.core.limits import DEFAULT_TURNS, MAX_CONCURRENCY
from intake_eval.core.patient_styles import DEFAULT_STYLE, STYLES
from intake_eval.core.package_data import package_folder
from intake_eval.core.prompts import available_conditions, use_prompts
from intake_eval.core.records import PatientMode
from intake_eval.core.shard import Shard
from intake_eval.core.yamlfile import read_yaml
from intake_eval.interview.settings import (
    DEFAULT_RUN_CONCURRENCY,
    Concurrency,
    Dollars,
    RunSettings,
    Trials,
    Turns,
)
from intake_eval.generate.sampling import Mode
from intake_eval.generate.settings import DEFAULT_GENERATOR, GenerateSettings, HiddenCount, ProfileCount
from intake_eval.judge.settings import JudgeMode, JudgeSettings
from intake_eval.trust.stage import QCSettings
from intake_eval.llm.answer import TruncationPolicy

BUNDLED_CONFIGS = package_folder("configs")


def _under(base: Path | None, value: str) -> Path:
    """A path from the config, read from the config file's folder (the working folder without one)."""
    return ((base or Path.cwd()) / Path(value).expanduser()).resolve()


def _relative_to_config(value: str, info: ValidationInfo) -> Path:
    return _under((info.context or {}).get("base"), value)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProfilesConfig(Strict):
    n: ProfileCount = 108
    mode: Mode = "stratified"
    hidden_count: HiddenCount = "seed"


class PatientConfig(Strict):
    model: str = "gpt-4o"
    mode: PatientMode = "prompted"
    tracker: str | None = None  # tracked mode: the model that decides unlocks (None → offline classifier)


class QCConfig(Strict):
    """Patient QC before the study: refuse to start when the patient leaks too often, or discloses
    too rarely when asked directly."""

    enabled: bool = False
    max_leak_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    min_recall: Annotated[float | None, Field(ge=0.0, le=1.0)] = 0.5  # null: no recall gate
    profiles: Annotated[int, Field(ge=1)] = 10
    # How the patient speaks, over its probe replies (metrics/patient_language.py; null: no gate). Checked
    # for every style of the study, each against its own words-per-reply target.
    min_length_on_target: float | None = Field(None, ge=0.0, le=1.0,
                                               description="share of replies inside the style's words target")
    max_early_resolution: float | None = Field(None, ge=0.0, le=1.0,
                                               description="share of early replies that thank or resolve")
    max_repeated_phrasing: float | None = Field(None, ge=0.0, le=1.0,
                                                description="share of 5-grams shared by 3+ profiles")
    max_mattr: float | None = Field(None, ge=0.0, le=1.0, description="lexical diversity (MATTR, 50 words)")

    def population_limits(self) -> dict[str, tuple[float | None, float | None]]:
        """The population gates set, as metrics/patient_language.check_targets takes them."""
        limits = {"length_on_target_share": (self.min_length_on_target, None),
                  "early_resolution_share": (None, self.max_early_resolution),
                  "repeated_phrasing_share": (None, self.max_repeated_phrasing),
                  "mattr": (None, self.max_mattr)}
        return {measure: bounds for measure, bounds in limits.items() if bounds != (None, None)}


class ForkConfig(Strict):
    """A counterfactual fork: re-run each intake from ``at`` with the supervisor's ``nudge``."""

    at: str = Field("closure", description="closure | first-planning | a turn number")
    nudge: str = Field("review", pattern=r"^[A-Za-z0-9_-]+$", description="prompts/nudge_<nudge>.j2")


class StudyConfig(Strict):
    name: str = Field(..., min_length=1, pattern=r"^[A-Za-z0-9._-]+$", description="run name → runs/<name>")
    description: str = ""
    seed: int = 7
    prompts_dir: str | None = Field(None, description="your prompt templates (a template there wins over the shipped "
                                    "one); relative to this file's folder")
    catalog: str | None = Field(None, description="phenotype folder instead of the shipped one; relative to this "
                                "file's folder")
    phenotypes: list[str] | None = Field(None, min_length=1, description="only these phenotype ids of the catalog")
    profiles: ProfilesConfig = Field(default_factory=ProfilesConfig)
    generator: str = DEFAULT_GENERATOR
    patient: PatientConfig = Field(default_factory=PatientConfig)
    patients: list[str] | None = Field(None, min_length=1, description="several patient models, each interviewed on "
                                       "the same profiles (instead of patient.model; patient.mode and .tracker apply "
                                       "to all)")
    clinicians: list[str] = Field(..., min_length=1)
    conditions: list[str] = Field(default_factory=lambda: ["minimal"], min_length=1)
    patient_styles: list[str] = Field(
        default_factory=lambda: [DEFAULT_STYLE], min_length=1,
        description="how the patients speak (core/patient_styles.py), crossed with every clinician and condition")
    trials: Trials = 1
    turns: Turns = DEFAULT_TURNS
    judges: list[str] = Field(..., min_length=1)
    judge_mode: JudgeMode = "per-turn"
    formulation: bool = False
    on_truncation: TruncationPolicy = Field(
        "keep", description="an answer cut at its token cap: keep it and flag the turn, or fail the conversation "
                            "(run --on-truncation)")
    concurrency: Concurrency = DEFAULT_RUN_CONCURRENCY
    budget: Dollars = None  # a conversation starts only if its estimated cost fits
    cache: bool = True
    qc: QCConfig = Field(default_factory=QCConfig)
    forks: list[ForkConfig] = Field(default_factory=list, description="could-it-ask forks, judged like any intake")

    _base: Path | None = PrivateAttr(None)

    @field_validator("name")
    @classmethod
    def _a_folder_name(cls, value: str) -> str:
        if set(value) == {"."}:  # "." and ".." would write into the current or the parent folder
            raise ValueError(f"'{value}' is not a run name (it names an existing folder, not runs/<name>)")
        return value

    @field_validator("prompts_dir", "catalog")
    @classmethod
    def _folder_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not _relative_to_config(value, info).is_dir():
            raise ValueError(f"{_relative_to_config(value, info)} is not a folder")
        return value

    @field_validator("clinicians", "judges", "conditions", "phenotypes", "patients")
    @classmethod
    def _distinct(cls, values: list[str] | None) -> list[str] | None:
        if values is None:
            return values
        seen = set()
        for value in values:
            if not value.strip():
                raise ValueError("empty name")
            if value in seen:
                raise ValueError(f"'{value}' is listed twice")
            seen.add(value)
        return values

    @field_validator("patient_styles")
    @classmethod
    def _known_styles(cls, values: list[str]) -> list[str]:
        for value in values:
            if value not in STYLES:
                raise ValueError(f"unknown patient style '{value}' (styles: {', '.join(STYLES)})")
            if values.count(value) > 1:
                raise ValueError(f"'{value}' is listed twice")
        return values

    @field_validator("conditions")
    @classmethod
    def _known_conditions(cls, values: list[str], info: ValidationInfo) -> list[str]:
        prompts = info.data.get("prompts_dir")
        if prompts:
            with use_prompts(_relative_to_config(prompts, info), label="prompts_dir:"):
                known = available_conditions()
        else:  # the --prompts folder in effect, if any
            known = available_conditions()
        for value in values:
            if value not in known:
                raise ValueError(f"unknown condition '{value}' (templates: {', '.join(known)})")
        return values

    @model_validator(mode="after")
    def _one_patient_list(self) -> "StudyConfig":
        if self.patients is not None and "model" in self.patient.model_fields_set:
            raise ValueError("patient.model and patients: both name the patient; list every patient model under "
                             "patients: alone")
        return self

    @model_validator(mode="after")
    def _generator_held_out(self) -> "StudyConfig":
        others = {*self.patient_models(), *self.clinicians, *self.judges}
        if self.patient.tracker:
            others.add(self.patient.tracker)
        if self.generator in others:
            raise ValueError(f"generator '{self.generator}' may not play another role in the same study "
                             "(leakage guard)")
        return self

    # ------------------------------------------------------------ the stages' settings

    def run_settings(self, shard: Shard | None = None) -> RunSettings:
        """The run stage's settings (validated by this model's own fields already)."""
        patients = self.patient_models()
        return RunSettings(
            clinicians=list(self.clinicians), patient=patients[0], patients=patients, patient_mode=self.patient.mode,
            tracker=self.patient.tracker, turns=self.turns, conditions=list(self.conditions), trials=self.trials,
            concurrency=self.concurrency, budget=self.budget, formulation=self.formulation,
            on_truncation=self.on_truncation, shard=shard, patient_styles=list(self.patient_styles))

    def generate_settings(self) -> GenerateSettings:
        return GenerateSettings(n=self.profiles.n, mode=self.profiles.mode, seed=self.seed, generator=self.generator,
                                concurrency=self.concurrency, hidden_count=self.profiles.hidden_count)

    def qc_settings(self) -> list[QCSettings]:
        """Patient QC of every patient model of the study in every style, judged by its primary judge."""
        return [QCSettings(patient=patient, mode=self.patient.mode, judge=self.judges[0], tracker=self.patient.tracker,
                           n=self.qc.profiles, concurrency=self.concurrency, style=style)
                for patient in self.patient_models() for style in self.patient_styles]

    def judge_settings(self, shard: Shard | None = None) -> JudgeSettings:
        """The judge stage's settings. A per-turn judge's calls for one conversation go one after another
        (each reads the previous one's prefix from the provider's cache), so as many conversations are
        judged at once as there are calls per conversation: the calls in flight stay those of
        ``concurrency`` conversations."""
        calls = self.turns + 1 if self.judge_mode == "per-turn" else 1
        return JudgeSettings(judges=list(self.judges), mode=self.judge_mode,
                             concurrency=min(MAX_CONCURRENCY, self.concurrency * calls), shard=shard)

    # ------------------------------------------------------------ derived

    def _resolved(self, value: str | None) -> Path | None:
        return None if value is None else _under(self._base, value)

    def prompts_folder(self) -> Path | None:
        """The user's prompts folder (None: the shipped templates only)."""
        return self._resolved(self.prompts_dir)

    def catalog_folder(self) -> Path:
        return self._resolved(self.catalog) or DEFAULT_CATALOG_DIR

    def study_catalog(self) -> Catalog:
        """The catalog the study samples from: ``catalog:`` (or the shipped one), cut to ``phenotypes:``."""
        catalog = load_catalog(self.catalog_folder())
        return catalog_subset(catalog, self.phenotypes, label="phenotypes:") if self.phenotypes else catalog

    def patient_models(self) -> list[str]:
        """Every patient model of the study (``patients:``, else ``patient.model``), in the config's order."""
        return list(self.patients) if self.patients else [self.patient.model]

    @property
    def conversation_count(self) -> int:
        return (self.profiles.n * len(self.patient_models()) * len(self.patient_styles) * len(self.clinicians)
                * len(self.conditions) * self.trials)

    def roles(self) -> dict[str, list[str]]:
        roles = {"generator": [self.generator], "patient": self.patient_models(),
                 "clinician": list(self.clinicians), "judge": list(self.judges)}
        if self.patient.tracker:
            roles["tracker"] = [self.patient.tracker]
        return roles

    def model_names(self) -> list[str]:
        names: list[str] = []
        for aliases in self.roles().values():
            names.extend(alias for alias in aliases if alias not in names)
        return names


def with_flags(config: StudyConfig, path: Path, *, prompts: Path | None = None,
               catalog: Path | None = None) -> StudyConfig:
    """The config with the command line's --prompts / --catalog filled in (recorded as absolute
    paths, so the run folder's manifest says which folders were used). A folder is given once: a
    flag naming what the config already names is refused."""
    update: dict[str, str] = {}
    for flag, key, value in (("--prompts", "prompts_dir", prompts), ("--catalog", "catalog", catalog)):
        if value is None:
            continue
        if getattr(config, key) is not None:
            raise IntakeEvalError(f"{flag} {value}: {path} already names {key}: {getattr(config, key)}; "
                                  "give the folder once")
        if not Path(value).is_dir():
            raise IntakeEvalError(f"{flag} {value}: is not a folder")
        update[key] = str(Path(value).expanduser().resolve())
    if not update:
        return config
    changed = config.model_copy(update=update)
    changed._base = config._base
    if catalog is not None:
        try:
            changed.study_catalog()
        except IntakeEvalError as exc:
            raise IntakeEvalError(f"--catalog {catalog}: {exc.message}") from None
    return changed


def find_study_config(path: Path) -> Path:
    """``path`` itself, or, when no such file exists and it is a bare name, the bundled config of
    that name (``paper`` → the shipped configs/paper.yaml)."""
    path = Path(path)
    if path.exists() or len(path.parts) != 1:
        return path
    bundled = BUNDLED_CONFIGS / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
    return bundled if bundled.is_file() else path


def bundled_config_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_CONFIGS.glob("*.yaml") if p.stem not in ("models", "qc_probes"))


def load_study_config(path: Path) -> StudyConfig:
    """Read and validate a study YAML (a path, or a bundled config's name). Every problem is one
    IntakeEvalError naming the file and key."""
    path = find_study_config(path)
    if not path.exists():
        raise IntakeEvalError(f"{path}: study config not found (bundled configs: {', '.join(bundled_config_names())})")
    if path.is_dir():
        raise IntakeEvalError(f"{path}: is a folder; give a study YAML file (e.g. configs/demo.yaml)")
    try:
        data: Any = read_yaml(path)
    except OSError as exc:
        raise IntakeEvalError(f"{path}: cannot read ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise IntakeEvalError(f"{path}: a study config is a mapping of keys (name, profiles, clinicians, …)")
    base = path.resolve().parent
    try:
        config = StudyConfig.model_validate(data, context={"base": base})
    except ValidationError as exc:
        raise IntakeEvalError(describe_validation_error(exc, path)) from None
    config._base = base
    if config.catalog is not None or config.phenotypes:
        try:
            config.study_catalog()  # a broken catalog or an unknown phenotype id, before any work
        except IntakeEvalError as exc:
            raise IntakeEvalError(f"{path}: {exc.message}") from None
    return config
