"""One streaming pass over a run folder's conversations and judgments, written to Parquet as it goes.

Nothing per judgment is held in memory: each judgment's row, domain events, turns and agreement units are
appended to Parquet files in a folder of their own inside metrics/ (``Collected.folder``), one row group per
judgments file at least (so a table can read one judge × clinician arm alone). Two of them are published:
metrics/conversations.parquet (a row per conversation × judge: every column of conversations.csv) and
metrics/domain_events.parquet (a row per conversation × judge × hidden domain), moved into metrics/ by
``publish`` once every table is written; the rest are removed with the folder, also when the pass fails.
The latest record per (judge, conversation), and per conversation, wins (``columnar.ParquetRows``), so an
uncompacted file (a crash mid-stage) collects the same as a compacted one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.records import Judgment, Profile, arm_condition
from intake_eval.core.spill import SpilledRows, spill_folder
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.core.usage import CLINICIAN_ROLES, usage_of
from intake_eval.metrics import registry
from intake_eval.metrics.agreement import LABELS, units_from_labels
from intake_eval.metrics.columnar import ParquetRows
from intake_eval.metrics.events import DOMAIN_EVENT_COLUMNS, DOMAIN_EVENT_TYPES
from intake_eval.metrics.figures import Figures, TurnLabels, figures, last_clinician_turn
from intake_eval.metrics.integrity import ConversationIndex, conversation_index, counted_judgments

_CONVERSATION_FACTS = ("conversation_id", "judge", "judge_mode", "clinician", "phenotype", "profile_id", "condition",
                       "patient_mode", "trial", "alignment", "n_hidden", "status")
_CONVERSATION_BOOKKEEPING = ("caught_domains", "missed_domains", "bled_domains", "judge_calls", "judge_prompt_tokens",
                             "judge_completion_tokens", "judge_cost_usd", "judge_errors")
_BOOKKEEPING_TYPES = {"trial": "int64", "n_hidden": "int64", "judge_calls": "int64", "judge_prompt_tokens": "int64",
                      "judge_completion_tokens": "int64", "judge_cost_usd": "float64",
                      "judge_cached_prompt_tokens": "int64"}


def conversation_columns() -> list[str]:
    """metrics/conversations.csv: the conversation's facts, the declared metrics (registry.METRICS) and the
    judge's bookkeeping, each generation of columns after those published before it."""
    return [*_CONVERSATION_FACTS, *registry.conversation_metric_columns(1, 1), *_CONVERSATION_BOOKKEEPING,
            *registry.conversation_metric_columns(2, 2), "judge_cached_prompt_tokens",
            *registry.conversation_metric_columns(3, 3), "patient", *registry.conversation_metric_columns(4)]


def conversation_types() -> dict[str, str]:
    """The Parquet type of every non-text column of metrics/conversations.parquet."""
    return {**_BOOKKEEPING_TYPES, **{metric.name: metric.dtype for metric in registry.METRICS}}


# Spill tables, each with the arm (judge, clinician) its row groups are cut by.
TURN_COLUMNS = ("judge", "clinician", "conversation_id", "condition", "patient_mode", "profile_id", "turn",
                "coverage", "question_type")  # question_type: none for the opening (turn 0)
TURN_TYPES = {"turn": "int64", "coverage": "float64"}
TURN_HEAD_COLUMNS = TURN_COLUMNS.index("turn")  # a judgment's turn rows share the cells before "turn"
EVENT_HEAD_COLUMNS = DOMAIN_EVENT_COLUMNS.index("domain")  # a judgment's domain rows share the cells before "domain"
UNIT_COLUMNS = ("judge", "clinician", "conversation_id", "condition", "patient_mode", "premature_closure", "last_turn",
                *(f"{label}_{part}" for label in LABELS for part in ("keys", "values")))
UNIT_TYPES = {"premature_closure": "int64", "last_turn": "int64"}
META_COLUMNS = ("conversation_id", "clinician", "condition", "patient_mode", "status", "profile_id",
                "clinician_tokens", "clinician_cost")
META_TYPES = {"clinician_tokens": "int64", "clinician_cost": "float64"}
USAGE_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "cost_usd", "cost_known")
USAGE_COLUMNS = ("conversation_id", "clinician", "role", *USAGE_FIELDS)
USAGE_TYPES = {"calls": "int64", "prompt_tokens": "int64", "completion_tokens": "int64",
               "cached_prompt_tokens": "int64", "cost_usd": "float64", "cost_known": "bool"}
SEPARATOR = "\x1f"  # joins a judgment's unit keys and text values in one cell
_FLAGS = bytes.maketrans(b"\x00\x01", b"01")  # true/false labels as one "0110…" text
# Rows held before a row group is written: small enough that what a writer holds is a few MB whatever
# the run's size (an arm of a 10^4-conversation run already fills each), large enough for few row groups.
_JUDGMENT_ROWS = 2_000  # a row per judgment (wide rows)
_LONG_ROWS = 20_000  # a row per domain or turn of a judgment


@dataclass(frozen=True)
class Collected:
    """Where the pass wrote its tables (all inside ``folder``)."""

    folder: Path

    @property
    def conversations(self) -> Path:
        return self.folder / "conversations.parquet"

    @property
    def domain_events(self) -> Path:
        return self.folder / "domain_events.parquet"

    @property
    def turns(self) -> Path:
        return self.folder / "turns.parquet"

    @property
    def units(self) -> Path:
        return self.folder / "units.parquet"

    @property
    def meta(self) -> Path:
        return self.folder / "conversation_meta.parquet"

    @property
    def usage(self) -> Path:
        return self.folder / "conversation_usage.parquet"


PUBLISHED = ("conversations", "domain_events")  # moved to metrics/<name>.parquet by ``publish``


def publish(collected: Collected, paths: RunPaths) -> dict[str, Path]:
    """Move the published Parquet tables into metrics/; name → path."""
    out = {}
    for name in PUBLISHED:
        target = paths.metrics(name).with_suffix(".parquet")
        os.replace(getattr(collected, name), target)
        out[name] = target
    return out


@contextmanager
def collected(paths: RunPaths, also: Callable[..., None] | None = None) -> Iterator[Collected]:
    """The pass over the run folder, its tables in a temporary folder inside metrics/ removed on leaving."""
    folder = spill_folder("metrics-pass", paths.metrics_dir)  # one a killed pass left is swept by the next
    try:
        yield collect(paths, folder, also)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _profile_facts(paths: RunPaths) -> dict[str, tuple[str, str, list[str]]]:
    facts: dict[str, tuple[str, str, list[str]]] = {}
    for profile in iter_records(paths.profiles, Profile):
        facts[profile.profile_id] = (profile.phenotype, profile.alignment, profile.hidden_domains)
    return facts


class _Writers:
    def __init__(self, collected: Collected) -> None:
        self.columns = conversation_columns()
        self.key_texts = _KeyTexts()
        self.conversations = ParquetRows(collected.conversations, self.columns, conversation_types(),
                                         row_group_rows=_JUDGMENT_ROWS)
        self.domain_events = ParquetRows(collected.domain_events, DOMAIN_EVENT_COLUMNS, DOMAIN_EVENT_TYPES,
                                         row_group_rows=_LONG_ROWS, head_columns=EVENT_HEAD_COLUMNS)
        self.turns = ParquetRows(collected.turns, TURN_COLUMNS, TURN_TYPES, row_group_rows=_LONG_ROWS,
                                 head_columns=TURN_HEAD_COLUMNS)
        self.units = ParquetRows(collected.units, UNIT_COLUMNS, UNIT_TYPES, row_group_rows=_JUDGMENT_ROWS)
        self.meta = ParquetRows(collected.meta, META_COLUMNS, META_TYPES, row_group_rows=_LONG_ROWS)
        self.usage = ParquetRows(collected.usage, USAGE_COLUMNS, USAGE_TYPES, row_group_rows=_LONG_ROWS)

    def all(self) -> list[ParquetRows]:
        return [self.conversations, self.domain_events, self.turns, self.units, self.meta, self.usage]


def _conversation_rows(data: dict[str, Any], writers: _Writers, patients: SpilledRows) -> None:
    """One conversation record's meta row and usage rows (its roles in the record's order)."""
    usage = data.get("usage") or {}
    # the clinician's calls: its turns and its post-intake formulation
    clinician_usage = [usage.get(role) or {} for role in CLINICIAN_ROLES]
    cid, clinician = str(data.get("conversation_id")), data.get("clinician", "")
    writers.meta.add(cid, [(
        cid, clinician, arm_condition(str(data.get("condition", "minimal")), data.get("fork")),
        data.get("patient_mode", "prompted"), data.get("status", "ok"), str(data.get("profile_id", "")),
        sum(int(u.get("prompt_tokens", 0)) + int(u.get("completion_tokens", 0)) for u in clinician_usage),
        sum(float(u.get("cost_usd", 0.0)) for u in clinician_usage))])
    roles = [(str(role), usage_of(raw)) for role, raw in usage.items()] if isinstance(usage, dict) else []
    writers.usage.add(cid, [(cid, clinician, role, *(getattr(spent, name) for name in USAGE_FIELDS))
                            for role, spent in roles])
    patients[cid] = str(data.get("patient", ""))


class _KeyTexts:
    """Unit keys as text, built once per distinct key set (most judgments share theirs) and shared."""

    LIMIT = 10_000  # distinct key sets kept; beyond, the cache starts over (memory stays bounded)

    def __init__(self) -> None:
        self._texts: dict[tuple, str] = {}

    def text(self, keys: tuple) -> str:
        found = self._texts.get(keys)
        if found is None:
            if len(self._texts) >= self.LIMIT:
                self._texts.clear()
            found = self._texts[keys] = SEPARATOR.join(":".join(map(str, key)) for key in keys)
        return found


def _units_row(judgment: Judgment, labels: list[TurnLabels], hidden: list[str], result: Figures,
               key_texts: _KeyTexts) -> tuple:
    units = units_from_labels(labels, hidden, result.covered)
    cells: list[Any] = [judgment.judge, judgment.clinician, judgment.conversation_id, judgment.condition,
                        judgment.patient_mode, result.metrics.premature_closure_turn, last_clinician_turn(labels)]
    for label in LABELS:
        values = units[label].values()
        text = (SEPARATOR.join(map(str, values)) if label == "question_type"
                else bytes(map(bool, values)).translate(_FLAGS).decode("ascii"))
        cells += [key_texts.text(tuple(units[label])), text]
    return tuple(cells)


def _collect_judgment(judgment: Judgment, labels: list[TurnLabels], facts: tuple[str, str, list[str]] | None,
                      writers: _Writers, patients: SpilledRows) -> tuple[list[str], Figures | None]:
    """Write this judgment's rows; returns (the hidden domains used, its figures or None when not ok)."""
    key = (judgment.judge, judgment.conversation_id)
    hidden = facts[2] if facts else sorted({d for t in labels for d in t.domains})
    usage = judgment.usage
    row: dict[str, Any] = {
        "conversation_id": judgment.conversation_id, "judge": judgment.judge, "judge_mode": judgment.mode,
        "clinician": judgment.clinician, "phenotype": (facts[0] if facts else "") or judgment.phenotype,
        "profile_id": judgment.profile_id, "condition": judgment.condition, "patient_mode": judgment.patient_mode,
        "trial": judgment.trial, "alignment": facts[1] if facts else "", "n_hidden": len(hidden),
        "status": judgment.status, "judge_calls": usage.calls,
        "judge_prompt_tokens": usage.prompt_tokens, "judge_completion_tokens": usage.completion_tokens,
        "judge_cached_prompt_tokens": usage.cached_prompt_tokens,
        "judge_cost_usd": usage.cost_usd if usage.cost_known else None,
        "judge_errors": " | ".join(judgment.errors),
        # the patient model that spoke (pooled over, and broken down by, in metrics/patient_models)
        "patient": patients.get(judgment.conversation_id, ""),
    }
    result = None
    events: list[tuple] = []
    turns: list[tuple] = []
    units: list[tuple] = []
    event_head: tuple = (None,) * EVENT_HEAD_COLUMNS  # no rows: the head is never written
    turn_head: tuple = (None,) * TURN_HEAD_COLUMNS
    if judgment.ok:
        result = figures(labels, hidden)
        row.update(registry.metric_row(registry.Judged(labels, hidden, result)))
        outcomes = result.outcomes
        row["caught_domains"] = ";".join(o.domain for o in outcomes if o.actively_covered)
        row["missed_domains"] = ";".join(o.domain for o in outcomes if not o.actively_covered)
        row["bled_domains"] = ";".join(o.domain for o in outcomes if o.bled)
        last = last_clinician_turn(labels)
        event_head = (judgment.conversation_id, judgment.judge, judgment.clinician, judgment.condition,
                      judgment.patient_mode, row["phenotype"], judgment.profile_id, judgment.trial)
        events = [(o.domain, o.first_asked_turn, o.first_disclosed_turn, o.first_covered_turn, o.leaked,
                   o.actively_covered, o.bled, last) for o in outcomes]
        turn_head = (judgment.judge, judgment.clinician, judgment.conversation_id, judgment.condition,
                     judgment.patient_mode, judgment.profile_id)
        qtypes = {t.turn: t.question_type for t in labels if t.turn >= 1}
        turns = [(turn, coverage, qtypes.get(turn)) for turn, coverage in result.trajectory]
        units = [_units_row(judgment, labels, hidden, result, writers.key_texts)]
    writers.conversations.add(key, [tuple([row.get(name) for name in writers.columns])])
    writers.domain_events.add(key, events, head=event_head)
    writers.turns.add(key, turns, head=turn_head)
    writers.units.add(key, units)
    return hidden, result


def collect(paths: RunPaths, folder: Path, also: Callable[..., None] | None = None) -> Collected:
    """One pass over every conversation and judgment, written to Parquet in ``folder``;
    ``also(judgment, labels, hidden, figures)`` sees each judgment too (the diagnosis/safety rows), with the
    figures computed here over ``hidden``."""
    facts = _profile_facts(paths)
    result = Collected(folder)
    writers = _Writers(result)
    patients = SpilledRows.alone("conversation-patients", paths.metrics_dir,  # conversation id → the patient model that spoke
                                  read_ahead=True)  # looked up in judgment order
    index: ConversationIndex | None = None
    try:
        index = conversation_index(paths, on_valid=lambda data: _conversation_rows(data, writers, patients))
        arm: tuple[str, str] | None = None
        for judgment, labels in counted_judgments(paths, index):
            if (judgment.judge, judgment.clinician) != arm:
                for writer in writers.all()[:4]:
                    writer.flush()  # one arm's rows in row groups of their own
                arm = (judgment.judge, judgment.clinician)
            hidden, figures_seen = _collect_judgment(judgment, labels, facts.get(judgment.profile_id), writers,
                                                     patients)
            if also is not None:
                also(judgment, labels, hidden, figures_seen)
        for writer in writers.all():
            writer.close()
    except BaseException:
        for writer in writers.all():
            writer.discard()
        raise
    finally:
        patients.close()
        if index is not None:
            index.close()
    return result
