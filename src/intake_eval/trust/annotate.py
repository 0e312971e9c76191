"""Judge validation against people: blinded annotation packs and judge-vs-human agreement.

export: sample judged (turn, hidden domain) items across clinicians, question types and label
values (stratified round-robin over the strata, seeded), and write
``annotations/form.html`` (self-contained, offline; saves a CSV through a Blob download),
``annotations/sheet.csv`` (the same items for a spreadsheet) and ``annotations/key.json``
(item id → conversation, turn, domain and the judge's labels; never given to annotators).
Annotators see neither the judge's labels nor the clinician's name.

import: read filled CSVs (columns item_id, asked_about, disclosed, question_type and optionally
annotator — else the file name is the annotator), then per label Cohen's κ and raw agreement of
the judge vs each annotator, and of every pair of annotators on their shared items.
Note: a stratified pack over-represents rare label combinations on purpose, so κ here describes
agreement on a deliberately balanced item set, not the run's label prevalence.
"""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.limits import MAX_ANNOTATION_ITEMS
from intake_eval.core.numbers import csv_cell
from intake_eval.core.records import QUESTION_TYPES, Conversation, Judgment, Profile
from intake_eval.core.spreadsheet import spreadsheet_row
from intake_eval.core.store import (
    RunPaths,
    file_safe,
    iter_records,
    stable_hash,
    write_text_atomic,
)
from intake_eval.metrics.agreement import cohen_kappa, raw_agreement

ANNOTATION_METRICS = "annotation_agreement"
LABELS: tuple[str, ...] = ("asked_about", "disclosed", "question_type")
SHEET_COLUMNS = ["item_id", "domain", "domain_label", "domain_symptoms", "turn", "context", "clinician_utterance",
                 "patient_reply", "annotator", "asked_about", "disclosed", "question_type", "notes"]
AGREEMENT_COLUMNS = ["comparison", "rater_a", "rater_b", "label", "n", "agreement", "kappa", "kappa_ci_low",
                     "kappa_ci_high", "judge"]
TRUE_WORDS = {"yes", "y", "true", "t", "1"}
FALSE_WORDS = {"no", "n", "false", "f", "0"}
FORM_TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "annotation_form.html"
KAPPA_BOOTSTRAP = 1000


@dataclass(frozen=True)
class Unit:
    """One judged (conversation, turn, hidden domain) with the judge's labels."""

    conversation_id: str
    clinician: str
    profile_id: str
    turn: int
    domain: str
    question_type: str
    asked_about: bool
    disclosed: bool

    @property
    def stratum(self) -> tuple[str, str, bool, bool]:
        return (self.clinician, self.question_type, self.asked_about, self.disclosed)


# ---------------------------------------------------------------- export

def judge_dirs(paths: RunPaths) -> dict[str, Path]:
    """file-safe judge name → its judgments folder."""
    if not paths.judgments_dir.exists():
        return {}
    return {p.name: p for p in sorted(paths.judgments_dir.iterdir()) if p.is_dir() and any(p.glob("*.jsonl"))}


def choose_judge(paths: RunPaths, judge: str | None) -> Path:
    found = judge_dirs(paths)
    if not found:
        raise IntakeEvalError(f"{paths.judgments_dir}: no judgments yet; run `intake-eval judge` first")
    if judge is not None:
        if file_safe(judge) not in found:
            raise IntakeEvalError(f"--judge {judge}: no judgments by it in {paths.judgments_dir} "
                                  f"(found: {', '.join(found)})")
        return found[file_safe(judge)]
    if len(found) > 1:
        raise IntakeEvalError(f"{paths.judgments_dir} holds several judges ({', '.join(found)}); choose one with --judge")
    return next(iter(found.values()))


def iter_units(folder: Path) -> Iterator[tuple[str, Unit]]:
    """(judge alias, unit) for every clinician turn × hidden domain of every ok judgment."""
    for path in sorted(folder.glob("*.jsonl")):
        for judgment in iter_records(path, Judgment):
            if not judgment.ok:
                continue
            for turn in judgment.turns:
                if turn.turn < 1:
                    continue  # the opening has no clinician question to label
                for domain, label in sorted(turn.domains.items()):
                    yield judgment.judge, Unit(judgment.conversation_id, judgment.clinician, judgment.profile_id,
                                               turn.turn, domain, turn.question_type, label.asked_about, label.disclosed)


def stratified_sample(units: list[Unit], n: int, seed: int) -> list[Unit]:
    """Round-robin over strata (clinician × question type × asked_about × disclosed), seeded.

    A (conversation, turn) appears at most once while other turns remain, so items stay varied.
    """
    rng = random.Random(f"annotate:{seed}")
    strata: dict[tuple, list[Unit]] = defaultdict(list)
    for unit in units:
        strata[unit.stratum].append(unit)
    order = sorted(strata, key=repr)
    rng.shuffle(order)
    for key in order:
        rng.shuffle(strata[key])
    chosen: list[Unit] = []
    used_turns: set[tuple[str, int]] = set()
    for allow_repeat_turns in (False, True):
        progress = True
        while len(chosen) < n and progress:
            progress = False
            for key in order:
                if len(chosen) >= n:
                    break
                bucket = strata[key]
                pick = next((i for i, u in enumerate(bucket)
                             if allow_repeat_turns or (u.conversation_id, u.turn) not in used_turns), None)
                if pick is None:
                    continue
                unit = bucket.pop(pick)
                chosen.append(unit)
                used_turns.add((unit.conversation_id, unit.turn))
                progress = True
    rng.shuffle(chosen)  # item order must not reveal the strata
    return chosen


def _load_needed(paths: RunPaths, chosen: list[Unit]) -> tuple[dict[str, Conversation], dict[str, Profile]]:
    wanted = {u.conversation_id for u in chosen}
    conversations: dict[str, Conversation] = {}
    for clinician in sorted({u.clinician for u in chosen}):
        for conversation in iter_records(paths.conversations(clinician), Conversation):
            if conversation.conversation_id in wanted:
                conversations[conversation.conversation_id] = conversation
    missing = wanted - conversations.keys()
    if missing:
        first = sorted(missing)[0]
        clinician = next(u.clinician for u in chosen if u.conversation_id == first)
        raise IntakeEvalError(f"{paths.conversations(clinician)}: conversation {first} is judged but not there "
                              "(missing, or skipped above as not a valid record); rerun `intake-eval run` to redo it")
    profile_ids = {u.profile_id for u in chosen}
    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile) if p.profile_id in profile_ids}
    return conversations, profiles


def _context(conversation: Conversation, turn: int) -> str:
    lines = [f"Patient (opening): {conversation.opening}"]
    for previous in conversation.turns:
        if previous.turn >= turn:
            break
        lines.append(f"[turn {previous.turn}] Clinician: {previous.clinician}")
        lines.append(f"[turn {previous.turn}] Patient: {previous.patient}")
    return "\n".join(lines)


def _item(item_id: str, unit: Unit, conversation: Conversation, profile: Profile | None) -> dict[str, Any]:
    turn = next((t for t in conversation.turns if t.turn == unit.turn), None)
    if turn is None:
        raise IntakeEvalError(f"{conversation.conversation_id}: judged turn {unit.turn} is not in the conversation")
    draw = next((d for d in (profile.hidden if profile else []) if d.domain == unit.domain), None)
    return {
        "item_id": item_id,
        "domain": unit.domain,
        "domain_label": (draw.label if draw and draw.label else unit.domain.replace("_", " ")),
        "domain_symptoms": "; ".join(draw.symptoms) if draw else "",
        "turn": unit.turn,
        "context": _context(conversation, unit.turn),
        "clinician_utterance": turn.clinician,
        "patient_reply": turn.patient,
    }


def _csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """A sheet people open in a spreadsheet: text that starts like a formula is neutralised."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(spreadsheet_row(row) for row in rows)
    return buffer.getvalue()


def render_form(pack: dict[str, Any]) -> str:
    data = json.dumps(pack, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")
    return FORM_TEMPLATE.read_text(encoding="utf-8").replace("__PACK_JSON__", data)


@dataclass
class ExportResult:
    judge: str
    pack_id: str
    items: int
    available: int
    strata: int
    files: list[Path]


def export_pack(paths: RunPaths, *, n: int, judge: str | None = None, seed: int = 0, force: bool = False) -> ExportResult:
    if n < 1:
        raise IntakeEvalError(f"--n {n}: must be at least 1")
    if n > MAX_ANNOTATION_ITEMS:
        raise IntakeEvalError(f"--n {n:,}: must be at most {MAX_ANNOTATION_ITEMS:,} items")
    folder = choose_judge(paths, judge)
    judge_alias, units = folder.name, []
    for alias, unit in iter_units(folder):
        judge_alias = alias
        units.append(unit)
    if not units:
        raise IntakeEvalError(f"{folder}: no successfully judged clinician turns to annotate")
    chosen = stratified_sample(units, n, seed)
    conversations, profiles = _load_needed(paths, chosen)
    pack_id = stable_hash([judge_alias, seed, [asdict(u) for u in chosen]])[:10]
    ids = [f"item-{i:03d}" for i in range(1, len(chosen) + 1)]
    items = [_item(i, u, conversations[u.conversation_id], profiles.get(u.profile_id)) for i, u in zip(ids, chosen)]
    key = {"pack_id": pack_id, "judge": judge_alias, "seed": seed, "n_requested": n, "labels": list(LABELS),
           "items": [{"item_id": i, **asdict(u)} for i, u in zip(ids, chosen)]}
    _guard_existing(paths, pack_id, force)
    write_text_atomic(paths.annotation_key, json.dumps(key, indent=1, ensure_ascii=False) + "\n")
    write_text_atomic(paths.annotation_sheet, _csv_text(SHEET_COLUMNS, items))
    write_text_atomic(paths.annotation_form, render_form({"pack_id": pack_id, "items": items}))
    return ExportResult(judge_alias, pack_id, len(items), len(units), len({u.stratum for u in units}),
                        [paths.annotation_form, paths.annotation_sheet, paths.annotation_key])


def _guard_existing(paths: RunPaths, pack_id: str, force: bool) -> None:
    """Never silently replace a pack annotators may be working on (its item ids would change meaning)."""
    if not paths.annotation_key.exists():
        return
    try:
        old_id = json.loads(paths.annotation_key.read_text(encoding="utf-8")).get("pack_id")
    except ValueError:
        old_id = None
    if old_id == pack_id:
        return
    if not force:
        raise IntakeEvalError(f"{paths.annotation_key}: a different annotation pack ({old_id}) already exists; "
                              "pass --force to replace it (the old pack moves to superseded/)")
    target = paths.superseded_dir / f"annotations-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    for path in (paths.annotation_key, paths.annotation_sheet, paths.annotation_form):
        if path.exists():
            shutil.move(str(path), str(target / path.name))


# ---------------------------------------------------------------- import

def load_key(paths: RunPaths) -> dict[str, Any]:
    if not paths.annotation_key.exists():
        raise IntakeEvalError(f"{paths.annotation_key}: no annotation pack here; run `intake-eval annotate export` first")
    try:
        key = json.loads(paths.annotation_key.read_text(encoding="utf-8"))
        key["by_id"] = {item["item_id"]: item for item in key["items"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise IntakeEvalError(f"{paths.annotation_key}: unreadable pack key ({exc.__class__.__name__})") from None
    return key


def _parse_value(label: str, raw: str, where: str) -> bool | str | None:
    text = raw.strip().lower()
    if not text:
        return None
    if label == "question_type":
        value = text.replace(" ", "_").replace("-", "_")
        if value not in QUESTION_TYPES:
            raise IntakeEvalError(f"{where}: '{raw}' is not a question type ({', '.join(QUESTION_TYPES)})")
        return value
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise IntakeEvalError(f"{where}: '{raw}' is not yes/no")


def read_annotations(files: list[Path], known_items: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """annotator → item id → {label: value}. One-line errors name file, row and column."""
    humans: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    seen: dict[tuple[str, str], str] = {}
    for path in files:
        if not path.exists():
            raise IntakeEvalError(f"{path}: no such file")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise IntakeEvalError(f"{path}: not a UTF-8 CSV file") from None
        header = text.split("\n", 1)[0]
        delimiter = max((",", ";", "\t"), key=header.count)  # spreadsheets in some locales save with ; or tabs
        reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
        columns = {c.strip().lower(): c for c in (reader.fieldnames or []) if c}
        missing = [c for c in ("item_id", *LABELS) if c not in columns]
        if missing:
            raise IntakeEvalError(f"{path}: missing column(s) {', '.join(missing)} "
                                  f"(expected item_id, annotator, {', '.join(LABELS)})")
        for row_number, row in enumerate(reader, start=2):
            item_id = (row.get(columns["item_id"]) or "").strip()
            if not item_id:
                continue
            if item_id not in known_items:
                raise IntakeEvalError(f"{path} row {row_number}, column item_id: '{item_id}' is not in this pack "
                                      "(was the CSV filled for another pack?)")
            annotator = (row.get(columns.get("annotator", ""), "") or "").strip() or path.stem
            values = {label: _parse_value(label, row.get(columns[label]) or "", f"{path} row {row_number}, column {label}")
                      for label in LABELS}
            if all(v is None for v in values.values()):
                continue  # not labelled yet
            where = f"{path} row {row_number}"
            if (annotator, item_id) in seen:
                raise IntakeEvalError(f"{where}, column item_id: {annotator} already labelled {item_id} "
                                      f"({seen[(annotator, item_id)]})")
            seen[(annotator, item_id)] = where
            humans[annotator][item_id] = values
    if not humans:
        raise IntakeEvalError(f"{', '.join(str(f) for f in files)}: no labelled rows found")
    return dict(humans)


def _kappa_ci(a: list[Any], b: list[Any], seed: str) -> tuple[float | None, float | None]:
    """95 % percentile CI of κ from resampling items (seeded); resamples where κ is undefined are skipped."""

    if len(a) < 2:
        return None, None
    rng = random.Random(seed)
    values = []
    for _ in range(KAPPA_BOOTSTRAP):
        idx = [rng.randrange(len(a)) for _ in a]
        kappa = cohen_kappa([a[i] for i in idx], [b[i] for i in idx])
        if kappa is not None:
            values.append(kappa)
    if len(values) < KAPPA_BOOTSTRAP // 2:
        return None, None
    values.sort()
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


def _compare(comparison: str, name_a: str, name_b: str, labels_a: dict[str, dict[str, Any]],
             labels_b: dict[str, dict[str, Any]], judge: str) -> list[dict[str, Any]]:
    rows = []
    for label in LABELS:
        shared = sorted(i for i in labels_a.keys() & labels_b.keys()
                        if labels_a[i].get(label) is not None and labels_b[i].get(label) is not None)
        a = [labels_a[i][label] for i in shared]
        b = [labels_b[i][label] for i in shared]
        low, high = _kappa_ci(a, b, f"{comparison}|{name_a}|{name_b}|{label}")
        rows.append({"comparison": comparison, "rater_a": name_a, "rater_b": name_b, "label": label, "n": len(shared),
                     "agreement": raw_agreement(a, b), "kappa": cohen_kappa(a, b), "kappa_ci_low": low,
                     "kappa_ci_high": high, "judge": judge})
    return rows


def agreement_table(key: dict[str, Any], humans: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    judge = key["judge"]
    judge_labels = {i: {label: item[label] for label in LABELS} for i, item in key["by_id"].items()}
    rows = []
    names = sorted(humans)
    for name in names:
        rows.extend(_compare("judge_vs_human", judge, name, judge_labels, humans[name], judge))
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            rows.extend(_compare("human_vs_human", first, second, humans[first], humans[second], judge))
    return rows


def import_annotations(paths: RunPaths, files: list[Path]) -> tuple[list[dict[str, Any]], Path]:
    key = load_key(paths)
    humans = read_annotations(files, key["by_id"])
    rows = agreement_table(key, humans)
    target = paths.metrics(ANNOTATION_METRICS)
    write_text_atomic(target, _csv_text(AGREEMENT_COLUMNS, [{k: csv_cell(v) for k, v in row.items()} for row in rows]))
    return rows, target
