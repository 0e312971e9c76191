"""metrics/patient_population.csv: how the run's simulated patients spoke, per patient model, mode and style.

The population measures of metrics/patient_language.py over every patient reply of the run's finished,
unforked intakes (the opening included; a reply counts as early before the last third of the intake's
turns). The patient QC (`qc-patient`) writes the same measures over its probe replies to
metrics/patient_qc_population.csv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from intake_eval.core.limits import DEFAULT_TURNS
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.records import PatientMode, Record
from intake_eval.core.spill import SpilledRows, key_of
from intake_eval.core.store import RunPaths, iter_json_lines
from intake_eval.metrics.patient_language import POPULATION_COLUMNS, PopulationTally, Reply, population_row
from intake_eval.metrics.reading import write_csv

POPULATION_TABLE = "patient_population"
EARLY_SHARE = 2 / 3  # turns before the last third of an intake


class SpokenConversation(Record):
    """What the population measures read of a conversation record (fields as ``Conversation`` declares
    them; each turn's patient reply and number are read from the turn as written)."""

    conversation_id: str
    profile_id: str
    patient: str
    patient_model: str = ""
    patient_mode: PatientMode = "prompted"
    patient_style: str = DEFAULT_STYLE
    trial: int = 0
    max_turns: int = DEFAULT_TURNS
    opening: str
    turns: list[dict[str, Any]] = Field(default_factory=list)
    status: str = "ok"
    fork: dict | None = None


class _Superseded(Exception):
    """A conversation appears twice in its file (uncompacted: a crash mid-stage): only its latest line counts."""


def run_tallies(paths: RunPaths) -> dict[tuple[str, str, str, str], PopulationTally]:
    """(patient, patient model, mode, style) → the measures of the patient's replies in the run's ok,
    unforked intakes, tallied reply by reply (no reply's text is kept). The latest line per conversation
    counts: a compacted folder is read once; one whose files repeat a conversation is read again, each
    line checked against where its conversation's latest line is."""
    try:
        return _tallies(paths, latest=None)
    except _Superseded:
        latest = _latest_positions(paths)
        try:
            return _tallies(paths, latest=latest)
        finally:
            latest.close()


def _latest_positions(paths: RunPaths) -> SpilledRows:
    """key_of(file, conversation id) → the position of its latest line among the file's readable lines (on disk)."""
    latest = SpilledRows.alone("latest-lines", paths.metrics_dir)
    for path in paths.conversation_files():
        for position, data in enumerate(iter_json_lines(path, model=SpokenConversation)):
            latest[key_of(str(path), str(data.get("conversation_id", "")))] = position
    return latest


def _tallies(paths: RunPaths, latest: SpilledRows | None
             ) -> dict[tuple[str, str, str, str], PopulationTally]:
    populations: dict[tuple[str, str, str, str], PopulationTally] = {}
    seen = SpilledRows.alone("openings", paths.metrics_dir)  # the opening is shared by a profile's clinicians: counted once
    read = SpilledRows.alone("conversations-read", paths.metrics_dir)  # key_of(file, conversation id)
    try:
        _tally_files(paths, latest, populations, seen, read)
    finally:
        seen.close()
        read.close()
    return populations


def _tally_files(paths: RunPaths, latest: SpilledRows | None,
                 populations: dict[tuple[str, str, str, str], PopulationTally], seen: SpilledRows, read: SpilledRows) -> None:
    for path in paths.conversation_files():
        for position, data in enumerate(iter_json_lines(path, model=SpokenConversation)):
            conversation = key_of(str(path), str(data.get("conversation_id", "")))
            if latest is None:
                if conversation in read:
                    raise _Superseded
                read[conversation] = True
            elif latest.get(conversation) != position:
                continue
            if data.get("fork") or data.get("status", "ok") != "ok":
                continue
            key = (str(data.get("patient", "")), str(data.get("patient_model", "")),
                   str(data.get("patient_mode", "prompted")), str(data.get("patient_style") or DEFAULT_STYLE))
            tally = populations.get(key)
            if tally is None:
                tally = populations[key] = PopulationTally(key[3], spill_dir=paths.metrics_dir)
            profile = str(data.get("profile_id", ""))
            opening = (*key, profile, str(data.get("trial", 0)))
            if data.get("opening") and "|".join(opening) not in seen:
                seen["|".join(opening)] = True
                tally.add(Reply(profile, str(data["opening"]), early=True))
            last_early = int(data.get("max_turns") or 12) * EARLY_SHARE
            for turn in data.get("turns") or []:
                tally.add(Reply(profile, str(turn.get("patient", "")), early=turn.get("turn", 0) <= last_early))


def population_rows(paths: RunPaths) -> list[dict[str, Any]]:
    rows = []
    for key, tally in sorted(run_tallies(paths).items(), key=lambda item: item[0]):
        rows.append(population_row(dict(zip(("patient", "patient_model", "patient_mode", "patient_style"), key)),
                                   tally, "run"))
        tally.close()
    return rows


def write_population_table(paths: RunPaths) -> dict[str, Path]:
    rows = population_rows(paths)
    if not rows:
        return {}
    return {POPULATION_TABLE: write_csv(paths.metrics(POPULATION_TABLE), POPULATION_COLUMNS, rows)}
