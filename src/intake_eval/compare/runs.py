"""The runs being compared: loaded through the Python API, checked to share profiles, and cut into
per-profile values per scorer (run × judge) and entity (clinician, or clinician · condition · mode).

Runs are comparable only when their profiles came from the same generate configuration (the
generate stage's config hash in manifest.json). Entities (what is ranked and paired) are clinicians,
with the condition and patient mode where the runs share them (``assign_entities``): "minimal" in one
run pairs with "screening" in the other, and their forks (minimal+review@closure with
screening+review@closure) pair too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.api import Run, load_run
from intake_eval.core.errors import IntakeEvalError
from intake_eval.metrics.sensitivity import entity_profile_trials, entity_profile_values
from intake_eval.report.load import order_judges

@dataclass(frozen=True)
class Scorer:
    """Who produced a set of numbers: a run folder and one of its judges."""

    run: str
    judge: str
    primary: bool

    @property
    def label(self) -> str:
        return f"{self.run} · {self.judge}"


@dataclass
class LoadedRun:
    name: str
    run: Run
    manifest: dict[str, Any]
    judges: list[str]  # primary first
    frame: Any  # ok rows of metrics/conversations.csv
    facts: dict[str, str] = field(default_factory=dict)  # what describes the run: conditions, patient, judges


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IntakeEvalError(f"{path}: no manifest.json; not a run folder") from None
    except ValueError:
        raise IntakeEvalError(f"{path / 'manifest.json'}: not valid JSON") from None


def generate_hash(name: str, manifest: dict[str, Any]) -> str:
    stage = (manifest.get("stages") or {}).get("generate") or {}
    value = stage.get("config_hash")
    if not value:
        raise IntakeEvalError(f"{name}: manifest.json has no generate stage; compare needs the runs' profiles")
    return str(value)


def _facts(frame: Any, manifest: dict[str, Any], judges: list[str]) -> dict[str, str]:
    models = manifest.get("models") or {}
    patient = models.get("patient")
    patients = patient if isinstance(patient, list) else [patient] if patient else []
    names = sorted({str(p.get("alias") if isinstance(p, dict) else p) for p in patients})
    return {"condition": ", ".join(sorted(set(frame["condition"].astype(str)))),
            "patient mode": ", ".join(sorted(set(frame["patient_mode"].astype(str)))),
            "patient": ", ".join(names), "judge": ", ".join(judges),
            "clinicians": ", ".join(sorted(set(frame["clinician"].astype(str))))}


def load_runs(paths: list[Path]) -> list[LoadedRun]:
    if not paths:
        raise IntakeEvalError("compare: give one run folder with several judges, or two or more run folders")
    loaded: list[LoadedRun] = []
    names = unique_names(paths)
    reference = None
    for path, name in zip(paths, names):
        if not path.is_dir():
            raise IntakeEvalError(f"{path}: no such run folder")
        manifest = _manifest(path)
        hashed = generate_hash(name, manifest)
        if reference is None:
            reference = (name, hashed)
        elif hashed != reference[1]:
            raise IntakeEvalError(f"{name}: profiles come from a different generate config than {reference[0]} "
                                  "(generate config hash differs); compare runs that share profiles.jsonl")
        run = load_run(path)
        if "conversations" not in run.metrics:
            raise IntakeEvalError(f"{path}: no judged conversations yet (metrics/conversations.csv); judge the run first")
        frame = run.conversations
        frame = frame[frame["status"] == "ok"].copy()
        frame["profile_id"] = frame["profile_id"].astype(str)
        judged = {str(j): list(group["conversation_id"]) for j, group in frame.groupby("judge")}
        judges = order_judges(judged, manifest, None)
        loaded.append(LoadedRun(name, run, manifest, judges, frame, _facts(frame, manifest, judges)))
    if len(loaded) == 1 and len(loaded[0].judges) < 2:
        raise IntakeEvalError(f"{paths[0]}: one run with one judge has nothing to compare; give a second run folder "
                              "or judge this run with another judge")
    return loaded


def unique_names(paths: list[Path]) -> list[str]:
    """Short names for the runs: the folder name, with its parent when two folders share a name."""
    names = [p.name or str(p) for p in paths]
    if len(set(names)) == len(names):
        return names
    names = [f"{p.parent.name}/{p.name}" for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def _base(condition: str) -> str:
    return condition.split("+", 1)[0]  # a fork's arm is its base condition + the nudge (e.g. minimal+review@closure)


def _part(values: list[set[str]], same: bool, one_base: bool, value: str) -> str:
    """How one arm column enters the entity: itself when every run has the same values (and there are
    several), the fork suffix when each run has one base value (the runs differ in it), else itself."""
    if same:
        return value if len(values[0]) > 1 else ""
    if one_base:
        return value[len(_base(value)):]
    return value


def assign_entities(runs: list[LoadedRun]) -> list[str]:
    """Give every row an ``entity`` that matches across runs: the clinician, plus the condition and
    patient mode where the runs share them. What the runs differ in (one condition each, e.g. minimal
    vs screening, forks of each pairing up) is left out so the arms pair. Returns ["entity"]."""
    for column in ("condition", "patient_mode"):
        values = [set(loaded.frame[column].astype(str)) for loaded in runs]
        same = all(v == values[0] for v in values)
        one_base = all(len({_base(x) for x in v}) == 1 for v in values)
        for loaded in runs:
            loaded.frame[f"_{column}_part"] = [_part(values, same, one_base, str(x)) for x in loaded.frame[column]]
    for loaded in runs:
        frame = loaded.frame
        frame["entity"] = [" · ".join([str(c)] + [p for p in (cond, mode) if p]).replace(" · +", " +")
                           for c, cond, mode in zip(frame["clinician"], frame["_condition_part"], frame["_patient_mode_part"])]
    return ["entity"]


def profile_values(loaded: LoadedRun, judge: str, metric: str, columns: list[str]) -> dict[str, dict[str, float]]:
    """entity → profile id → the metric averaged over trials (undefined values left out)."""
    return entity_profile_values(loaded.frame, judge, metric, columns)


def profile_trials(loaded: LoadedRun, judge: str, metric: str, columns: list[str]) -> dict[str, dict[str, list[float]]]:
    """entity → profile id → the metric of each trial (for the nested interval of a difference)."""
    return entity_profile_trials(loaded.frame, judge, metric, columns)


def scorers(runs: list[LoadedRun]) -> list[Scorer]:
    """Every (run, judge); the first run's primary judge first: the reference."""
    return [Scorer(loaded.name, judge, i == 0) for loaded in runs for i, judge in enumerate(loaded.judges)]


def what_differs(a: LoadedRun, b: LoadedRun) -> str:
    """'condition minimal → screening; patient x → y', or 'nothing recorded' when the design matches.
    Judges are left out: which judge scored is said per scorer."""
    def shown(loaded: LoadedRun, key: str) -> str:
        if key != "condition":
            return loaded.facts.get(key, "")
        return ", ".join(sorted({_base(c) for c in loaded.facts[key].split(", ")}))  # forks pair up: bases differ

    changes = [f"{key} {shown(a, key)} → {shown(b, key)}" for key in a.facts
               if key != "judge" and shown(a, key) != shown(b, key)]
    return "; ".join(changes) or "nothing recorded (same design)"
