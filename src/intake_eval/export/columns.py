"""The exported tables' columns, declared once: name, type and meaning. The Parquet schema is built
from these (``parquet.arrow_schema``) and the dataset card lists them, so the two cannot disagree.

Types are named, not pyarrow objects, so this module imports nothing heavy: ``string``, ``int64``,
``bool``, ``strings`` (a list of strings).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    meaning: str


@dataclass(frozen=True)
class Table:
    name: str
    file: str
    about: str
    columns: tuple[Column, ...]

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]


PROFILES = Table("profiles", "profiles.parquet", "One row per simulated patient profile (profiles.jsonl).", (
    Column("profile_id", "string", "Profile id; conversations and labels refer to it."),
    Column("index", "int64", "Position of the profile in the generated set."),
    Column("seed", "int64", "Seed the profile was sampled with."),
    Column("phenotype", "string", "Phenotype (clinical presentation family) the profile was drawn from."),
    Column("alignment", "string", "The phenotype's declared alignment, masked or aligned (the report's "
                                  "masked-vs-aligned comparison)."),
    Column("presenting_domain", "string", "The domain the patient presents with (disclosed freely)."),
    Column("presenting_severity", "string", "mild, moderate or severe."),
    Column("presenting_symptoms", "strings", "Symptom texts of the presenting domain (paraphrased criteria)."),
    Column("presenting_phenomenology", "string",
           "First-person text of the presenting domain written by the generator."),
    Column("hidden_domains", "strings", "Hidden comorbid domains, disclosed only when asked about."),
    Column("hidden_severities", "strings", "Severity of each hidden domain, in the order of hidden_domains."),
    Column("hidden_symptoms", "strings",
           "Symptom texts of each hidden domain joined by ' | ', in the order of hidden_domains."),
    Column("age", "int64", "Demographics: age in years."),
    Column("sex", "string", "Demographics: female or male."),
    Column("occupation", "string", "Demographics: occupation."),
    Column("relationship", "string", "Demographics: relationship status."),
    Column("postpartum", "bool", "Demographics: postpartum."),
    Column("life_context", "strings", "Life-context facts given to the patient."),
    Column("render_generator", "string", "Model alias that wrote the phenomenology."),
    Column("render_qc_passed", "bool", "The rendered text passed the symptom-coverage check."),
))

TURNS = Table("turns", "turns.parquet", (
    "One row per conversation turn (conversations/*.jsonl). Turn 0 is the patient's opening statement "
    "(no clinician text); turns 1..N are a clinician utterance and the patient's reply."), (
    Column("conversation_id", "string", "Conversation id: profile, clinician, condition, patient mode, trial."),
    Column("profile_id", "string", "The simulated patient (profiles table)."),
    Column("phenotype", "string", "The profile's phenotype."),
    Column("clinician", "string", "Clinician model alias."),
    Column("clinician_model", "string", "Clinician provider model id."),
    Column("condition", "string", "Analysis condition: the prompt condition, or condition+nudge@point for a fork."),
    Column("patient_mode", "string",
           "prompted (the patient model decides what to disclose) or tracked (a tracker decides)."),
    Column("arm", "string", "clinician · condition · patient mode: the unit every figure is computed per."),
    Column("trial", "int64", "Repeat number of the same profile in the same arm."),
    Column("patient", "string", "Patient model alias."),
    Column("patient_model", "string", "Patient provider model id."),
    Column("fork_parent", "string", "For a counterfactual fork: the conversation it was forked from; empty otherwise."),
    Column("status", "string", "ok, or the reason the conversation failed (its turns are still exported)."),
    Column("termination", "string", "completed, clinician_ended, model_error, empty_after_length or budget."),
    Column("turn", "int64", "Turn number: 0 = the patient's opening, then 1..N."),
    Column("clinician_text", "string", "What the clinician said this turn (empty at turn 0)."),
    Column("patient_text", "string", "The patient's reply (the opening statement at turn 0)."),
    Column("clinician_reasoning", "string", "The clinician model's reasoning text when the provider returned one."),
    Column("nudge", "string", "A fork's supervisor note given to the clinician just before this turn."),
    Column("tracker_question_type", "string", "Tracked mode: the tracker's question type for this turn."),
    Column("tracker_asked_domains", "strings",
           "Tracked mode: hidden domains the tracker read the turn as asking about."),
    Column("finish_reasons", "string", "Why each role's answer of this turn ended, in the provider's words, as "
                                       "JSON (role → stop, length, …), when the record has them."),
    Column("truncated", "strings", "Roles whose answer this turn was cut at the token cap, when the record says."),
))

LABELS = Table("labels", "labels.parquet", (
    "One row per conversation × judge × turn × labelled domain (judgments/<judge>/*.jsonl), the latest judgment "
    "per conversation and judge; the same rows as metrics/turn_labels.csv with the judge's reasoning."), (
    Column("conversation_id", "string", "The judged conversation (turns table)."),
    Column("judge", "string", "Judge label: the judge alias, with the mode when it is not per-turn."),
    Column("judge_model", "string", "Judge provider model id."),
    Column("clinician", "string", "Clinician model alias."),
    Column("phenotype", "string", "The profile's phenotype."),
    Column("profile_id", "string", "The simulated patient."),
    Column("condition", "string", "Analysis condition (as in the turns table)."),
    Column("patient_mode", "string", "prompted or tracked."),
    Column("arm", "string", "clinician · condition · patient mode."),
    Column("trial", "int64", "Repeat number."),
    Column("judge_status", "string", "ok, judge_error (some turn could not be labelled) or a provider failure."),
    Column("turn", "int64", "Turn number (0 = the patient's opening: never asked about)."),
    Column("question_type", "string", "closed_hypothesis, open, clarifying, treatment_planning or other."),
    Column("patient_faithful", "bool", "False when the patient's reply volunteers a hidden domain the clinician "
                                       "did not ask about this turn and that had not come up earlier."),
    Column("domain", "string", "The labelled domain."),
    Column("hidden", "bool", "The domain is one of the profile's hidden domains (the ones coverage counts)."),
    Column("asked_about", "bool", "The clinician's utterance this turn asked about the domain."),
    Column("disclosed", "bool", "The patient's reply this turn disclosed the domain."),
    Column("reasoning", "string", "The judge's reasoning for this domain's label, when it gave one."),
))

RECORD_TABLES = (PROFILES, TURNS, LABELS)
METRICS_FOLDER = "metrics"

# Metrics columns DESIGN.md defines (the definitions of the study, quoted); a metrics column named like a
# record table's column means what it means there.
METRIC_MEANINGS = {
    "active_coverage_rate": "Hidden domains with some turn where asked_about and disclosed are both true, ÷ hidden "
                            "domains.",
    "bleed_rate": "Passive disclosure: hidden domains with some turn where disclosed is true and asked_about false, "
                  "÷ hidden domains.",
    "first_treatment_planning_turn": "Smallest turn whose question_type is treatment_planning (empty: none).",
    "premature_closure_turn": "Smallest t such that every turn from t to the last is treatment_planning or other "
                              "(empty: none).",
    "patient_leak_count": "Turns the judge marked patient_faithful = false.",
    "kappa": "Cohen's κ between the two judges for the label.",
}


def metric_meaning(column: str) -> str:
    """What a metrics table's column means, where it is declared; empty otherwise (see the project README)."""
    if column in METRIC_MEANINGS:
        return METRIC_MEANINGS[column]
    for table in RECORD_TABLES:
        for declared in table.columns:
            if declared.name == column:
                return declared.meaning
    return ""
