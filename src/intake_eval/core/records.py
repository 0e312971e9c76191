"""Pydantic models of every artifact record written to a run folder.

Each record carries ``schema_version``. Field names here are a contract other tools read
(see DESIGN.md); add fields with defaults, never rename or remove.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from intake_eval.core.limits import DEFAULT_TURNS
from intake_eval.core.schema import SCHEMA_VERSION

QuestionType = Literal["closed_hypothesis", "open", "clarifying", "treatment_planning", "other"]
QUESTION_TYPES: tuple[str, ...] = ("closed_hypothesis", "open", "clarifying", "treatment_planning", "other")
Severity = Literal["mild", "moderate", "severe"]
PatientMode = Literal["prompted", "tracked"]


def record_config(extra: Literal["ignore", "allow"]) -> ConfigDict:
    """Every record model's settings. ``defer_build``: a model builds its validator on first use, not
    when this module is imported, so a command pays only for the records it reads or writes (before a
    run's first request, the profile's alone)."""
    return ConfigDict(extra=extra, defer_build=True)


class Record(BaseModel):
    model_config = record_config("ignore")
    schema_version: int = SCHEMA_VERSION


# A count no record reaches (llm/usage_check refuses an implausible count as it arrives): a record claiming
# more, or a negative count, is not a valid record (skipped with a warning like a corrupt line), and every
# count a record holds fits the 64-bit integer columns of metrics/*.parquet.
MAX_COUNT = 10**12
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class Usage(BaseModel):
    """Token usage and cost of one or more model calls. cost_usd is 0.0 when unknown-free (local)."""

    model_config = record_config("ignore")
    calls: Count = 0
    cache_hits: Count = 0
    attempts: Count = 0  # HTTP attempts, retries included
    prompt_tokens: Count = 0  # every input token, cached ones included
    completion_tokens: Count = 0
    reasoning_tokens: Count = 0
    cached_prompt_tokens: Count = 0  # input tokens the provider read from its prompt cache
    cache_write_tokens: Count = 0  # input tokens the provider wrote to its prompt cache (Anthropic)
    cost_usd: float = 0.0
    cost_known: bool = True  # False once any call had no known price

    def add(self, other: "Usage") -> "Usage":
        """The sum (not validated again: a total over many records may pass ``MAX_COUNT``)."""
        return Usage.model_construct(
            calls=self.calls + other.calls,
            cache_hits=self.cache_hits + other.cache_hits,
            attempts=self.attempts + other.attempts,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            cost_known=self.cost_known and other.cost_known,
        )


# ---------------------------------------------------------------- profiles

class DomainDraw(BaseModel):
    """One domain of a profile: its sampled severity, symptoms and rendered phenomenology."""

    model_config = record_config("ignore")
    domain: str
    label: str = ""
    severity: Severity
    symptoms: list[str]  # symptom texts from the catalog (paraphrased criteria)
    symptom_ids: list[str] = Field(default_factory=list)
    phenomenology: str = ""  # first-person text written by the generator (stage 6)


class Demographics(BaseModel):
    model_config = record_config("allow")
    age: int
    sex: Literal["female", "male"]
    occupation: str = ""
    relationship: str = ""
    name: str = ""
    postpartum: bool = False


class RenderInfo(BaseModel):
    model_config = record_config("ignore")
    generator: str = ""
    attempts: int = 0
    qc_passed: bool = False
    qc_scores: dict[str, float] = Field(default_factory=dict)  # symptom id -> best fuzzy match score
    failure: str | None = None
    usage: Usage = Field(default_factory=Usage)  # the generator calls this profile took


class Profile(Record):
    profile_id: str
    index: int = 0
    seed: int = 0
    phenotype: str
    alignment: Literal["masked", "aligned"] = "aligned"
    presenting: DomainDraw
    hidden: list[DomainDraw]
    demographics: Demographics
    life_context: list[str] = Field(default_factory=list)
    render: RenderInfo = Field(default_factory=RenderInfo)

    @property
    def hidden_domains(self) -> list[str]:
        return [draw.domain for draw in self.hidden]


class RenderFailure(Record):
    """A profile whose render never passed QC (render_failures.jsonl); it is not in profiles.jsonl."""

    profile_id: str
    phenotype: str
    generator: str = ""
    attempts: int = 0
    missing: dict[str, list[str]] = Field(default_factory=dict)  # domain -> symptom texts QC did not find
    failure: str = ""
    usage: Usage = Field(default_factory=Usage)


# ---------------------------------------------------------------- conversations

class TrackerDecision(BaseModel):
    """Tracked patient mode: what the tracker decided before the patient replied to one turn."""

    model_config = record_config("ignore")
    question_type: QuestionType = "other"
    asked_domains: list[str] = Field(default_factory=list)  # hidden domains the turn asked about
    newly_unlocked: list[str] = Field(default_factory=list)
    unlocked_after: list[str] = Field(default_factory=list)
    source: str = ""  # tracker model alias or "offline/classifier"
    repaired: bool = False  # the tracker's first JSON answer was invalid and one repair call fixed it


class ConversationTurn(BaseModel):
    model_config = record_config("ignore")
    turn: int  # 1..N
    clinician: str
    patient: str
    clinician_reasoning: str | None = None
    tracker: TrackerDecision | None = None
    nudge: str | None = None  # a fork's supervisor note, given to the clinician just before this turn
    # Why each role's answer of this turn ended, in the provider's words (role -> stop | length | …;
    # roles: clinician, patient, tracker), and the roles whose answer was cut at the token cap.
    finish_reason: dict[str, str] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)


def _number_list(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:16])
    return shown + (", …" if len(numbers) > 16 else "")


class Conversation(Record):
    conversation_id: str
    profile_id: str
    phenotype: str
    clinician: str  # alias as given
    clinician_model: str = ""  # provider id
    patient: str
    patient_model: str = ""
    patient_mode: PatientMode = "prompted"
    # how the patient spoke (core/patient_styles.py); records made before styles are forthcoming
    patient_style: str = "forthcoming"
    condition: str = "minimal"
    trial: int = 0
    max_turns: int = DEFAULT_TURNS
    opening: str
    turns: list[ConversationTurn] = Field(default_factory=list)
    status: str = "ok"  # "ok" or a failure reason
    # completed | model_error | empty_after_length | refused | empty_answer | truncated | budget
    # (clinician_ended: records made before an answer without visible text was a failure)
    termination: str = "completed"
    error: str | None = None
    failed_role: str | None = None  # clinician | patient | tracker: whose answer failed the conversation
    refusal: str | None = None  # the provider's words when that answer was refused
    opening_finish_reason: str | None = None
    # answers cut at the token cap, per role (the opening and the formulation included); a turn says which
    truncated: dict[str, int] = Field(default_factory=dict)
    usage: dict[str, Usage] = Field(default_factory=dict)  # role -> usage
    formulation: dict | None = None  # post-intake case formulation, validated elsewhere
    fork: dict | None = None  # a counterfactual fork: {parent, at, turn, nudge}; None for an original intake

    @field_validator("turns")
    @classmethod
    def _numbered_once_each(cls, turns: list[ConversationTurn]) -> list[ConversationTurn]:
        """A turn given twice or a gap would be scored as if it were a real intake: refused instead."""
        numbers = [t.turn for t in turns]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"turn numbers must run 1, 2, … once each, in order (got {_number_list(numbers)})")
        return turns

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def arm_condition(self) -> str:
        return arm_condition(self.condition, self.fork)


def arm_condition(condition: str, fork: dict | None) -> str:
    """The condition a conversation is analysed under: a fork is its own arm ("minimal+review@closure"),
    never mixed with the intakes it was forked from."""
    if not fork:
        return condition
    return f"{condition}+{fork.get('nudge', '')}@{fork.get('at', '')}"


# ---------------------------------------------------------------- judgments

class DomainLabel(BaseModel):
    model_config = record_config("ignore")
    asked_about: bool
    disclosed: bool
    reasoning: str = ""


class TurnJudgment(BaseModel):
    """Labels for one turn. Turn 0 is the patient's opening (never asked_about; question_type 'other')."""

    model_config = record_config("ignore")
    turn: int
    question_type: QuestionType
    patient_faithful: bool = True
    domains: dict[str, DomainLabel]
    reasoning: str = ""


class Judgment(Record):
    conversation_id: str
    judge: str
    judge_model: str = ""
    clinician: str
    profile_id: str = ""
    phenotype: str = ""
    condition: str = "minimal"
    patient_mode: str = "prompted"
    trial: int = 0
    mode: Literal["per-turn", "conversation"] = "per-turn"
    turns: list[TurnJudgment] = Field(default_factory=list)
    # "ok", "judge_error" (some turn could not be labelled), "refused" (the judge declined: the
    # refusal is in ``errors``) or a provider failure reason
    status: str = "ok"
    errors: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    truncated: int = 0  # judge answers cut at the token cap (each then repaired or a judge error)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ---------------------------------------------------------------- patient QC

class PatientProbe(Record):
    """One fixed probe sent to a patient outside any interview (opening, then this one question),
    with the judge's reading of the reply. Written to qc/patient_<alias>_<mode>.jsonl."""

    key: str  # probe_id + "|" + judge: the resume key
    probe_id: str  # {profile_id}.{kind}.{target}.{index}
    kind: Literal["direct", "open", "absent"]
    target: str = ""  # the probed domain (direct: a hidden one; absent: one the profile lacks); "" for open
    probe: str
    profile_id: str
    phenotype: str = ""
    patient: str
    patient_model: str = ""
    patient_mode: PatientMode = "prompted"
    patient_style: str = "forthcoming"  # core/patient_styles.py
    judge: str
    judge_model: str = ""
    opening: str = ""
    reply: str = ""
    tracker: TrackerDecision | None = None
    target_asked_about: bool | None = None  # the judge agrees the probe asks about the target
    disclosed: list[str] = Field(default_factory=list)  # judged domains (hidden + target) revealed in the reply
    patient_faithful: bool | None = None
    outcome: bool | None = None  # direct: target disclosed; open: leaked; absent: invented (None when not judged)
    status: str = "ok"  # ok | patient_error: <kind> | judge_error | provider_error: <kind>
    error: str | None = None
    usage: dict[str, Usage] = Field(default_factory=dict)  # patient / judge
