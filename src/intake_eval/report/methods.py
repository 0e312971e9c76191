"""The methods section's facts, read from the run folder alone (manifest, snapshot of the prompts,
sampling table), so what it states is what this run did, not what the installed intake-eval would do.

- sampling: the generate stage's settings and, when the run folder has it, ``sampling_rates.csv``
  (per phenotype and optional domain: cited rate and source, design inclusion probability, realised
  rate); an older run folder without it is said to have none, nothing is inferred.
- models: every role's resolved provider id and parameters (manifest ``models``).
- interview and judging: turn cap, patient mode, conditions, trials, formulation; judges and modes; the
  judge's label definitions quoted from the run's own judge-rules template.
- prompts: each role's rendered prompt and every template, from ``prompts/`` (runner.prompt_snapshot).
- intervals: which interval each figure carries (declared once in ``metrics.intervals``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from typing import Any

from intake_eval.generate.kind import GENERATE_STAGE
from intake_eval.interview.kind import RUN_STAGE
from intake_eval.interview.tracker import TRACKER_MAX_TOKENS
from intake_eval.judge.judging import MODES, judge_label
from intake_eval.metrics.intervals import shown_intervals
from intake_eval.report.load import RunData
from intake_eval.report.tables import intervals
from intake_eval.runner.prompt_snapshot import (
    SnapshotText,
    snapshot_rendered_read,
    snapshot_templates_read,
)

SAMPLING_RATES_FILE = "sampling_rates.csv"
# Column of sampling_rates.csv → its heading, in the order shown; other columns follow under their own name.
RATE_HEADINGS = {"phenotype": "Phenotype", "domain": "Optional domain", "cited": "Cited rate", "source": "Source",
                 "design": "Design probability", "lift": "Lift (design ÷ cited)", "realised": "Realised rate",
                 "n_included": "n included", "n_eligible": "n eligible"}
PROPORTION_COLUMNS = ("cited", "design", "lift", "realised")
HIDDEN_COUNT_COLUMN = "hidden_count"  # one value per run: stated in the text, not a column
HIDDEN_COUNT_MODES = {
    "seed": "the seed study's design, one presenting and 4–5 hidden domains",
    "literature": "every optional domain at its cited rate, so the number of hidden domains varies (at least one)",
}
JUDGE_RULES_TEMPLATE = "judge_rules"
LABELS_HEADING = "LABELS"
MODEL_HEADER = ["Role", "Alias", "Provider model id", "Temperature", "Max tokens", "Reasoning", "Other parameters"]
MODEL_PARAMETERS = ("temperature", "max_tokens", "reasoning")
NOT_PARAMETERS = {"alias", "model", "description", "api_key_env", "api_base", "timeout_s", "rpm", "tpm",
                  "max_concurrency", "input_cost_per_token", "output_cost_per_token", "cache_read_cost_per_token",
                  "cache_write_cost_per_token", "batch_cost_factor", "rebuilt_from_records", *MODEL_PARAMETERS}
ROLE_ORDER = ("generator", "clinician", "patient", "tracker", "judge", "formulation", "nudge")
OFFLINE_PREFIX = "offline/"


@dataclass(frozen=True)
class PromptText:
    title: str
    note: str
    text: str | None
    file: str
    problem: str = ""


@dataclass
class Methods:
    sampling: list[str] = field(default_factory=list)
    rates: list[list[str]] | None = None  # rows of the sampling table as shown; None: the run folder has none
    rate_header: list[str] = field(default_factory=list)
    hidden_counts: list[str] = field(default_factory=list)
    models: list[list[str]] = field(default_factory=list)
    model_notes: list[str] = field(default_factory=list)
    interview: list[str] = field(default_factory=list)
    judging: list[str] = field(default_factory=list)
    label_definitions: str | None = None
    prompts: list[PromptText] = field(default_factory=list)
    templates: list[PromptText] = field(default_factory=list)
    intervals: dict[str, str] = field(default_factory=dict)  # figure → the sentence stating its interval
    software: str = ""
    problems: list[str] = field(default_factory=list)  # snapshot files missing or edited


def _stage_config(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    stage = (manifest.get("stages") or {}).get(name) or {}
    return stage.get("config") or {} if isinstance(stage, dict) else {}


def _rate_cell(column: str, value: str) -> str:
    if column in PROPORTION_COLUMNS and value:
        try:
            return f"{float(value):.2f}"
        except ValueError:
            return value
    return value


def read_sampling_rates(data: RunData, methods: Methods) -> None:
    """The run folder's sampling table into ``methods`` (header, formatted rows, hidden-count modes)."""
    path = data.paths.root / SAMPLING_RATES_FILE
    if not path.is_file():
        return
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    columns = [c for c in RATE_HEADINGS if c in fields] + [c for c in fields
                                                           if c not in RATE_HEADINGS and c != HIDDEN_COUNT_COLUMN]
    methods.rate_header = [RATE_HEADINGS.get(column, column) for column in columns]
    methods.rates = [[_rate_cell(column, row.get(column) or "") for column in columns] for row in rows]
    methods.hidden_counts = sorted({row.get(HIDDEN_COUNT_COLUMN) or "" for row in rows} - {""})


def sampling_sentences(data: RunData, methods: Methods) -> list[str]:
    config = _stage_config(data.manifest, GENERATE_STAGE)
    phenotypes = sorted({str(p.get("phenotype", "")) for p in data.profiles.values()})
    out = []
    if config:
        out.append(f"{len(data.profiles):,} simulated patient profiles over {len(phenotypes)} phenotypes were generated "
                   f"(requested n = {config.get('n')}, {config.get('mode')} sampling, seed {config.get('seed')}) by "
                   f"{config.get('generator')} ({config.get('generator_model')}); each profile has one presenting "
                   "domain and hidden domains drawn from its phenotype's optional domains. A rendered profile is kept "
                   f"only when its quality check scores at least {config.get('qc_threshold')} (up to "
                   f"{config.get('max_attempts')} attempts).")
    else:
        out.append(f"{len(data.profiles):,} simulated patient profiles over {len(phenotypes)} phenotypes; the run "
                   "folder does not record how they were generated (no generate stage in its manifest).")
    if methods.rates is None:
        out.append(f"This run folder has no sampling table ({SAMPLING_RATES_FILE}; older run folders lack it), so the "
                   "inclusion rates of the hidden domains are not stated here.")
    else:
        counts = methods.hidden_counts
        design = (f" Number of hidden domains: {'; '.join(HIDDEN_COUNT_MODES.get(c, c) for c in counts)}."
                  if counts else "")
        out.append("The table gives, per phenotype and optional domain, the co-occurrence rate cited in the phenotype "
                   "file (with its source), the design inclusion probability used to draw it, and the realised rate "
                   f"among the profiles where it is not the presenting domain (n eligible), from {SAMPLING_RATES_FILE}."
                   + design)
    return out


def _value(value: Any) -> str:
    if value is None or value == "" or value == {}:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _role_rank(role: str) -> int:
    return ROLE_ORDER.index(role) if role in ROLE_ORDER else len(ROLE_ORDER)


def model_rows(manifest: dict[str, Any]) -> list[list[str]]:
    models = manifest.get("models") or {}
    rows = []
    for role in sorted(models, key=lambda r: (_role_rank(r), r)):
        for spec in models[role] if isinstance(models[role], list) else []:
            if not isinstance(spec, dict):
                continue
            extra = {k: v for k, v in sorted(spec.items()) if k not in NOT_PARAMETERS and v not in (None, {}, "")}
            rows.append([role, _value(spec.get("alias")), _value(spec.get("model")),
                         *(_value(spec.get(name)) for name in MODEL_PARAMETERS),
                         "; ".join(f"{k}={v}" for k, v in extra.items()) or "–"])
    return rows


def model_notes(rows: list[list[str]]) -> list[str]:
    notes = [f"Parameters are each model's configuration as resolved for this run. The tracker asks at temperature 0 "
             f"with a {TRACKER_MAX_TOKENS}-token cap; judges and the formulation cap an answer at the longest answer "
             "their JSON schema allows."]
    offline = sorted({row[1] for row in rows if row[2].startswith(OFFLINE_PREFIX)})
    if offline:
        notes.append(f"{', '.join(offline)}: offline participants of intake-eval (deterministic and rule-based, no "
                     "language model); they receive the same messages a model would, and have no sampling parameters.")
    return notes


def interview_sentences(data: RunData) -> list[str]:
    config = _stage_config(data.manifest, RUN_STAGE)
    if not config:
        return ["The run folder records no run stage."]
    out = [f"Each intake lasted up to {config.get('turns')} clinician turns; the patient spoke first (turn 0, its "
           f"opening), then clinician and patient alternated. Patient: {config.get('patient')} "
           f"({config.get('patient_model')}), {config.get('patient_mode')} mode"
           + (f", tracker {config.get('tracker')} ({config.get('tracker_model')})" if config.get("tracker") else "")
           + f". Clinician conditions: {', '.join(config.get('conditions') or [])}; "
           f"{config.get('trials')} trial(s) per profile, clinician and condition."]
    if config.get("formulation"):
        out.append("After the last turn each clinician was asked for a case formulation (not shown to the patient).")
    arms = sorted({str(c.get("condition", "")) for c in data.conversations.values()})
    if arms:
        out.append(f"Arms analysed (condition, with forked arms as condition+nudge@point): {', '.join(arms)}.")
    return out


def judging_sentences(data: RunData) -> list[str]:
    judges = ((data.manifest.get("models") or {}).get("judge")) or []
    found = []
    for spec in judges if isinstance(judges, list) else []:
        alias = str(spec.get("alias", "")) if isinstance(spec, dict) else ""
        for mode in MODES:
            if judge_label(alias, mode) in data.judgments:
                found.append(f"{alias} ({spec.get('model')}, {mode})")
    if not found:
        return ["No judge has labelled this run's conversations."]
    primary = (data.manifest.get("judges") or {}).get("primary")
    return [f"Judges: {', '.join(found)}; primary (the report's numbers): {primary or found[0]}. Per-turn judges label "
            "each turn 0..N in its own call, seeing the conversation up to that turn; conversation-mode judges label "
            "every turn in one call. An answer that does not validate gets one repair request; if that fails too the "
            "conversation is a judge error, never read as a negative label."]


def label_definitions(templates: list[SnapshotText]) -> str | None:
    """The judge-rules template's label block (from its LABELS heading to the next blank line), verbatim."""
    rules = next((t.text for t in templates if t.key == JUDGE_RULES_TEMPLATE and t.text), None)
    if rules is None or LABELS_HEADING not in rules:
        return None
    block = rules[rules.index(LABELS_HEADING):]
    end = block.find("\n\n")
    return (block if end < 0 else block[:end]).strip()


def _prompt_title(item: SnapshotText) -> str:
    entry = item.entry
    role, variant = str(entry.get("role", item.key)), str(entry.get("variant", ""))
    title = f"{role} · {variant}" if variant else role
    return title + (f" (example: {entry['example']})" if entry.get("example") else "")


def software_sentence(manifest: dict[str, Any]) -> str:
    versions = manifest.get("versions") or {}
    source = manifest.get("source")
    revision = ""
    if isinstance(source, dict) and source.get("commit"):
        revision = f" from source revision {source['commit']}" + (" with uncommitted changes" if source.get("dirty") else "")
    version = versions.get("intake-eval", "unknown version")
    return f"intake-eval {version}{revision}, Python {versions.get('python', '–')}."


def collect_methods(data: RunData) -> Methods:
    methods = Methods()
    read_sampling_rates(data, methods)
    methods.sampling = sampling_sentences(data, methods)
    methods.models = model_rows(data.manifest)
    methods.model_notes = model_notes(methods.models)
    methods.interview = interview_sentences(data)
    methods.judging = judging_sentences(data)
    templates = snapshot_templates_read(data.paths, data.manifest)
    rendered = snapshot_rendered_read(data.paths, data.manifest)
    methods.label_definitions = label_definitions(templates)
    by_role = sorted(rendered, key=lambda item: (_role_rank(str(item.entry.get("role"))), item.key))
    methods.prompts = [PromptText(_prompt_title(item), str(item.entry.get("note", "")), item.text,
                                  str(item.entry.get("file", "")), item.problem) for item in by_role]
    methods.templates = [PromptText(item.key, "", item.text, str(item.entry.get("file", "")), item.problem)
                         for item in templates]
    methods.problems = [item.problem for item in [*rendered, *templates] if item.problem]
    present = set(data.tables) | ({"calibrated"} if data.paths.metrics("calibrated").exists() else set())
    methods.intervals = shown_intervals(intervals(data), present)
    methods.software = software_sentence(data.manifest)
    return methods
