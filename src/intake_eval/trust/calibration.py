"""Judge calibration from human labels: active coverage corrected for judge error (PPI).

export (``annotate export --for-calibration``): a uniform random sample of judged conversations,
the same number from every arm (clinician × condition × patient mode), and in the pack every
clinician turn × hidden domain of each sampled conversation, so a person's labels decide that
conversation's active coverage exactly as the judge's do. The key records which conversations were
sampled from how many. It also says how many conversations (and items) a target CI width needs.

import (``annotate import`` of such a pack): per arm, and per arm × phenotype where at least
``MIN_LABELLED_PER_PHENOTYPE`` conversations are labelled, the judge-only mean, the human-only
mean of the labelled conversations, and the prediction-powered mean (metrics/ppi.py: judge on
every conversation + the human-minus-judge correction on the labelled ones), each with a 95 %
interval, written to metrics/calibrated.csv. A conversation counts as labelled by an annotator
only when every one of its items has asked_about and disclosed filled; several annotators of one
conversation are averaged.
"""

from __future__ import annotations

import json
import random
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.limits import MAX_ANNOTATION_ITEMS
from intake_eval.core.records import Profile
from intake_eval.core.store import (
    RunPaths,
    iter_records,
    stable_hash,
    write_text_atomic,
)
from intake_eval.metrics.figures import figures
from intake_eval.metrics.ppi import labels_needed, mean_ci, ppi_mean_ci
from intake_eval.metrics.reading import iter_judgment_labels, write_csv
from intake_eval.trust.annotate import (
    LABELS,
    SHEET_COLUMNS,
    Unit,
    _csv_text,
    _guard_existing,
    _item,
    _load_needed,
    choose_judge,
    load_key,
    read_annotations,
    render_form,
)

CALIBRATED_METRICS = "calibrated"
CALIBRATION_MODE = "calibration"
MIN_LABELLED_PER_PHENOTYPE = 10
PLANNING_DISAGREEMENTS = (0.05, 0.10, 0.20)  # share of (conversation, domain) outcomes judge and human call differently
CALIBRATED_COLUMNS = ["scope", "judge", "clinician", "condition", "patient_mode", "phenotype", "n_conversations",
                      "n_labelled", "n_incomplete", "judge_mean", "judge_ci_low", "judge_ci_high", "human_mean",
                      "human_ci_low", "human_ci_high", "calibrated_mean", "calibrated_ci_low", "calibrated_ci_high",
                      "judge_bias", "lambda", "rectifier_sd"]

Arm = tuple[str, str, str]  # clinician, condition, patient mode


@dataclass
class Judged:
    """One ok judgment of the chosen judge: what calibration needs of it."""

    conversation_id: str
    arm: Arm
    phenotype: str
    hidden: list[str]
    judge_rate: float
    units: list[Unit]


def arm_name(arm: Arm) -> str:
    return " · ".join(arm)


def judged_conversations(paths: RunPaths, folder: Path) -> tuple[str, dict[str, Judged]]:
    """(judge alias, conversation id → Judged) over the judge's ok judgments with a known profile."""
    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    alias = folder.name
    found: dict[str, Judged] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for judgment, labels in iter_judgment_labels(path):
            alias = judgment.judge
            profile = profiles.get(judgment.profile_id)
            found.pop(judgment.conversation_id, None)  # the latest record wins
            if not judgment.ok or profile is None or not profile.hidden_domains:
                continue
            hidden = profile.hidden_domains
            rate = figures(labels, hidden).metrics.active_coverage_rate
            assert rate is not None  # defined whenever the profile hides a domain, checked above
            units = [Unit(judgment.conversation_id, judgment.clinician, judgment.profile_id, turn.turn, domain,
                          turn.question_type, asked, disclosed)
                     for turn in labels if turn.turn >= 1
                     for domain, (asked, disclosed) in sorted(turn.domains.items()) if domain in hidden]
            found[judgment.conversation_id] = Judged(
                judgment.conversation_id, (judgment.clinician, judgment.condition, judgment.patient_mode),
                profile.phenotype, hidden, rate, units)
    return alias, found


# ---------------------------------------------------------------- export


@dataclass
class ArmPlan:
    arm: Arm
    conversations: int
    sampled: int
    judge_mean: float
    judge_sd: float
    items_per_conversation: float
    needed: dict[float, int | None]  # planning disagreement → labelled conversations for the target width


@dataclass
class CalibrationExport:
    judge: str
    pack_id: str
    items: int
    conversations: int
    ci_width: float
    plans: list[ArmPlan]
    files: list[Path]


def plan_arm(arm: Arm, judged: list[Judged], sampled: int, ci_width: float) -> ArmPlan:
    rates = [j.judge_rate for j in judged]
    sd = statistics.pstdev(rates) if len(rates) > 1 else 0.0
    hidden = statistics.fmean(len(j.hidden) for j in judged)
    # planning: judge and human disagree on a share e of the h domain outcomes of a conversation,
    # each a ±1/h difference → SD(human − judge) ≤ √(e/h)
    needed = {e: labels_needed(sd, (e / hidden) ** 0.5, len(rates), ci_width / 2) for e in PLANNING_DISAGREEMENTS}
    return ArmPlan(arm, len(judged), sampled, statistics.fmean(rates), sd,
                   statistics.fmean(len(j.units) for j in judged), needed)


def export_calibration_pack(paths: RunPaths, *, per_arm: int, judge: str | None = None, seed: int = 0,
                            ci_width: float = 0.10, force: bool = False) -> CalibrationExport:
    if per_arm < 1:
        raise IntakeEvalError(f"--n {per_arm}: must be at least 1 (conversations per arm)")
    if per_arm > MAX_ANNOTATION_ITEMS:
        raise IntakeEvalError(f"--n {per_arm:,}: must be at most {MAX_ANNOTATION_ITEMS:,} conversations per arm")
    if not 0 < ci_width < 1:
        raise IntakeEvalError(f"--ci-width {ci_width}: must be between 0 and 1 (e.g. 0.1 for ±5 points)")
    folder = choose_judge(paths, judge)
    alias, judged = judged_conversations(paths, folder)
    if not judged:
        raise IntakeEvalError(f"{folder}: no successfully judged conversations with hidden domains to calibrate on")
    by_arm: dict[Arm, list[Judged]] = defaultdict(list)
    for item in judged.values():
        by_arm[item.arm].append(item)
    rng = random.Random(f"calibrate:{seed}")
    chosen: dict[Arm, list[str]] = {}
    for arm in sorted(by_arm):
        ids = sorted(j.conversation_id for j in by_arm[arm])
        chosen[arm] = sorted(rng.sample(ids, min(per_arm, len(ids))))
    units = [unit for arm in sorted(chosen) for cid in chosen[arm] for unit in judged[cid].units]
    rng.shuffle(units)  # item order must reveal neither the conversation nor the arm
    conversations, profiles = _load_needed(paths, units)
    ids = [f"item-{i:04d}" for i in range(1, len(units) + 1)]
    items = [_item(i, u, conversations[u.conversation_id], profiles.get(u.profile_id)) for i, u in zip(ids, units)]
    sampled = {arm_name(arm): cids for arm, cids in chosen.items()}
    pack_id = stable_hash([alias, seed, CALIBRATION_MODE, sampled])[:10]
    key = {"pack_id": pack_id, "judge": alias, "seed": seed, "mode": CALIBRATION_MODE, "n_requested": per_arm,
           "labels": list(LABELS), "sampled": sampled,
           "population": {arm_name(arm): len(by_arm[arm]) for arm in sorted(by_arm)},
           "items": [{"item_id": i, **asdict(u)} for i, u in zip(ids, units)]}
    _guard_existing(paths, pack_id, force)
    write_text_atomic(paths.annotation_key, json.dumps(key, indent=1, ensure_ascii=False) + "\n")
    write_text_atomic(paths.annotation_sheet, _csv_text(SHEET_COLUMNS, items))
    write_text_atomic(paths.annotation_form, render_form({"pack_id": pack_id, "items": items}))
    plans = [plan_arm(arm, by_arm[arm], len(chosen[arm]), ci_width) for arm in sorted(by_arm)]
    return CalibrationExport(alias, pack_id, len(items), sum(len(c) for c in chosen.values()), ci_width, plans,
                             [paths.annotation_form, paths.annotation_sheet, paths.annotation_key])


# ---------------------------------------------------------------- import


def human_rates(key: dict[str, Any], humans: dict[str, dict[str, dict[str, Any]]],
                hidden_of: dict[str, list[str]]) -> tuple[dict[str, float], set[str]]:
    """(conversation → human active coverage averaged over complete annotators, conversations
    some annotator left incomplete and nobody completed)."""
    items_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in key["items"]:
        items_of[item["conversation_id"]].append(item)
    rates, incomplete = {}, set()
    for cid, items in sorted(items_of.items()):
        hidden = hidden_of.get(cid) or sorted({i["domain"] for i in items})
        per_annotator = []
        for labels in humans.values():
            given = [labels.get(i["item_id"], {}) for i in items]
            if not any(given):
                continue
            if any(g.get("asked_about") is None or g.get("disclosed") is None for g in given):
                incomplete.add(cid)
                continue
            caught = {i["domain"] for i, g in zip(items, given) if g["asked_about"] and g["disclosed"]}
            per_annotator.append(len(caught & set(hidden)) / len(hidden))
        if per_annotator:
            rates[cid] = statistics.fmean(per_annotator)
    return rates, incomplete - rates.keys()


def _estimate_row(scope: str, judge: str, arm: Arm, phenotype: str, judged: list[Judged], human: dict[str, float],
                  incomplete: set[str]) -> dict[str, Any]:
    labelled = [j for j in judged if j.conversation_id in human]
    unlabelled = [j.judge_rate for j in judged if j.conversation_id not in human]
    judge_only = mean_ci([j.judge_rate for j in judged])
    human_only = mean_ci([human[j.conversation_id] for j in labelled])
    ppi = ppi_mean_ci([human[j.conversation_id] for j in labelled], [j.judge_rate for j in labelled], unlabelled)
    row = {"scope": scope, "judge": judge, "clinician": arm[0], "condition": arm[1], "patient_mode": arm[2],
           "phenotype": phenotype, "n_conversations": len(judged), "n_labelled": len(labelled),
           "n_incomplete": sum(1 for j in judged if j.conversation_id in incomplete)}
    for prefix, estimate in (("judge", judge_only), ("human", human_only), ("calibrated", ppi)):
        row.update({f"{prefix}_mean": estimate.mean if estimate else None,
                    f"{prefix}_ci_low": estimate.ci_low if estimate else None,
                    f"{prefix}_ci_high": estimate.ci_high if estimate else None})
    row["judge_bias"] = judge_only.mean - ppi.mean if ppi and judge_only else None
    row["lambda"] = ppi.lam if ppi else None
    row["rectifier_sd"] = ppi.rectifier_sd if ppi else None
    return row


def calibrated_rows(judge: str, judged: dict[str, Judged], human: dict[str, float], incomplete: set[str]) -> list[dict[str, Any]]:
    by_arm: dict[Arm, list[Judged]] = defaultdict(list)
    for item in judged.values():
        by_arm[item.arm].append(item)
    rows = []
    for arm in sorted(by_arm):
        rows.append(_estimate_row("clinician", judge, arm, "", by_arm[arm], human, incomplete))
        by_phenotype: dict[str, list[Judged]] = defaultdict(list)
        for item in by_arm[arm]:
            by_phenotype[item.phenotype].append(item)
        for phenotype in sorted(by_phenotype):
            group = by_phenotype[phenotype]
            if sum(1 for j in group if j.conversation_id in human) >= MIN_LABELLED_PER_PHENOTYPE:
                rows.append(_estimate_row("phenotype", judge, arm, phenotype, group, human, incomplete))
    return rows


def is_calibration_pack(paths: RunPaths) -> bool:
    return load_key(paths).get("mode") == CALIBRATION_MODE


def import_calibration(paths: RunPaths, files: list[Path]) -> tuple[list[dict[str, Any]], Path]:
    """Read the filled CSVs of a calibration pack and write metrics/calibrated.csv."""
    key = load_key(paths)
    if key.get("mode") != CALIBRATION_MODE:
        raise IntakeEvalError(f"{paths.annotation_key}: not a calibration pack; export one with "
                              "`intake-eval annotate export --for-calibration`")
    humans = read_annotations(files, key["by_id"])
    alias, judged = judged_conversations(paths, choose_judge(paths, key["judge"]))
    sampled = {cid for cids in key.get("sampled", {}).values() for cid in cids}
    missing = sampled - judged.keys()
    if missing:
        raise IntakeEvalError(f"{paths.annotation_key}: sampled conversation {min(missing)} is no longer judged "
                              f"ok by {alias}; export a new pack")
    human, incomplete = human_rates(key, humans, {cid: j.hidden for cid, j in judged.items()})
    rows = calibrated_rows(alias, judged, human, incomplete)
    return rows, write_csv(paths.metrics(CALIBRATED_METRICS), CALIBRATED_COLUMNS, rows)
