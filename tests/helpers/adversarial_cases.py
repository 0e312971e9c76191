"""Bad inputs an adversarial user can hand intake-eval, each with what must happen.

Every case damages a copy of a small finished offline run folder (or a config next to it), runs one
CLI command in a subprocess and is judged by ``verdict``:
- expect "error": exit 2, exactly one ``error:`` line that contains ``names``, no traceback, and
  every record file that was on disk before is byte-identical after;
- expect "warning": exit 0 or 1, a ``warning:`` line that contains ``names`` (the file:line of the
  skipped line), no traceback;
- expect "ok": exit 0, no traceback, and ``names`` in the output;
- expect "stop": exit 1 (a budget stop), ``names`` in the output, no traceback, records unchanged.
Anything else is a traceback (a Python traceback or an exit code other than 0/1/2), a silent
acceptance (exit 0/1 without the error or warning that should have been given), or wrong.

``scripts/adversarial_sweep.py`` runs them all; tests/e2e/test_fault_lines.py runs a named subset.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
CONVERSATIONS = "conversations/offline__screener.jsonl"
JUDGMENTS = "judgments/offline__judge/offline__screener.jsonl"
PROFILES = "profiles.jsonl"
STUDY_YAML = """name: base
seed: 1
profiles: {n: 3, mode: stratified}
generator: offline/generator
patient: {model: offline/patient, mode: tracked}
clinicians: [offline/screener]
judges: [offline/judge]
turns: 3
concurrency: 2
"""
STUDY = ("study", "{tmp}/study.yaml", "--run-dir", "{run}")
REPORT = ("report", "--run-dir", "{run}")
JUDGE = ("judge", "--judge", "offline/judge", "--run-dir", "{run}")
RUN = ("run", "--clinician", "offline/screener", "--patient", "offline/patient", "--patient-mode", "tracked",
       "--turns", "3", "--run-dir", "{run}")
STATUS = ("status", "--run-dir", "{run}")
GENERATE = ("generate", "--n", "3", "--seed", "1", "--run-dir", "{run}")
QC = ("qc-patient", "--patient", "offline/patient", "--n", "1", "--run-dir", "{run}")
SHOW = ("show", "P00000.offline__screener.minimal.tracked.t0", "--run-dir", "{run}")
ANNOTATE = ("annotate", "export", "--run-dir", "{run}")


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    expect: str  # error | warning | ok | stop
    names: str  # what the error / warning / output must contain ({run} and {tmp} substituted)
    damage: Callable[[Path, Path], None]  # (case folder, run folder)
    needs_mount: bool = False


def env() -> dict[str, str]:
    source = os.environ.get("INTAKE_EVAL_SWEEP_SRC", str(PROJECT / "src"))  # another checkout's src/ to compare
    return {**os.environ, "PYTHONPATH": source, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_MODE": "PRODUCTION", "COLUMNS": "200", "NO_COLOR": "1"}


def cli(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "intake_eval.cli", *args], capture_output=True, text=True,
                          env=env(), cwd=cwd, timeout=timeout)


def build_base(folder: Path) -> Path:
    """A finished offline study (3 profiles, 3 turns): the run folder every case starts from."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "study.yaml").write_text(STUDY_YAML)
    run = folder / "base"
    done = cli("study", str(folder / "study.yaml"), "--run-dir", str(run))
    if done.returncode != 0:
        raise RuntimeError(f"building the base run failed:\n{done.stderr[-2000:]}")
    return run


# ---------------------------------------------------------------- damage helpers

def rewrite_line(relative: str, change: Callable[[Any], Any], line: int = 1) -> Callable[[Path, Path], None]:
    """Replace one line of a JSONL file by ``change(record)`` (valid JSON, possibly the wrong shape)."""
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        lines = path.read_text().splitlines(keepends=True)
        lines[line - 1] = json.dumps(change(json.loads(lines[line - 1]))) + "\n"
        path.write_text("".join(lines))
    return damage


def compact_line(relative: str, change: Callable[[Any], Any], line: int = 1) -> Callable[[Path, Path], None]:
    """Like ``rewrite_line``, written the way the store writes records (so compaction keeps its bytes)."""
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        lines = path.read_text().splitlines(keepends=True)
        record = change(json.loads(lines[line - 1]))
        lines[line - 1] = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        path.write_text("".join(lines))
    return damage


def drop_last_line(relative: str) -> Callable[[Path, Path], None]:
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:-1]))
    return damage


def edit_json(relative: str, change: Callable[[Any], Any]) -> Callable[[Path, Path], None]:
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return damage


def write_text(relative: str, text: str) -> Callable[[Path, Path], None]:
    def damage(_tmp: Path, run: Path) -> None:
        (run / relative).write_text(text)
    return damage


def replace_with_dir(relative: str) -> Callable[[Path, Path], None]:
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        (path / "inner").mkdir(parents=True)
    return damage


def replace_with_file(relative: str) -> Callable[[Path, Path], None]:
    def damage(_tmp: Path, run: Path) -> None:
        path = run / relative
        if path.is_dir():
            shutil.rmtree(path)
        path.write_text("not a folder\n")
    return damage


def run_dir_is_file(tmp: Path, run: Path) -> None:
    shutil.rmtree(run)
    run.write_text("I am a file\n")


def run_dir_under_file(tmp: Path, run: Path) -> None:
    shutil.rmtree(run)
    run.write_text("I am a file\n")  # the case's args use {run}/inner


def tmp_file(name: str, text: str) -> Callable[[Path, Path], None]:
    def damage(tmp: Path, _run: Path) -> None:
        (tmp / name).write_text(text)
    return damage


def both(*steps: Callable[[Path, Path], None]) -> Callable[[Path, Path], None]:
    def damage(tmp: Path, run: Path) -> None:
        for step in steps:
            step(tmp, run)
    return damage


def nothing(_tmp: Path, _run: Path) -> None:
    return None


def drop(key: str) -> Callable[[dict], dict]:
    return lambda d: {k: v for k, v in d.items() if k != key}


def put(key: str, value: Any) -> Callable[[dict], dict]:
    return lambda d: {**d, key: value}


def put_in(path: tuple, value: Any) -> Callable[[dict], dict]:
    """Set a nested value: ("turns", 0, "domains") → d["turns"][0]["domains"] = value."""
    def change(d: dict) -> dict:
        d = json.loads(json.dumps(d))
        node = d
        for part in path[:-1]:
            node = node[part] if not (isinstance(node, dict) and part == "*") else next(iter(node.values()))
        node[path[-1]] = value
        return d
    return change


def first_domain(value: Any) -> Callable[[dict], dict]:
    def change(d: dict) -> dict:
        d = json.loads(json.dumps(d))
        domains = d["turns"][0]["domains"]
        domains[next(iter(domains))] = value
        return d
    return change


# ---------------------------------------------------------------- the cases

CONVERSATION_SHAPES = {
    "turns-is-string": put("turns", "x"),
    "no-conversation-id": drop("conversation_id"),
    "conversation-id-is-int": put("conversation_id", 5),
    "turn-is-not-an-object": put("turns", [1, 2]),
    "turn-number-is-text": put_in(("turns", 0, "turn"), "first"),
    "turn-without-text": lambda d: {**d, "turns": [{"turn": 1}]},
    "no-profile-id": drop("profile_id"),
    "usage-is-string": put("usage", "x"),
    "opening-is-object": put("opening", {}),
    "schema-version-is-text": put("schema_version", "one"),
    "tracker-is-string": put_in(("turns", 0, "tracker"), "x"),
    "max-turns-is-text": put("max_turns", "many"),
    "formulation-is-string": put("formulation", "x"),
    "status-is-null": put("status", None),
}
JUDGMENT_SHAPES = {
    "turns-is-string": put("turns", "x"),
    "turn-missing-labels": lambda d: {**d, "turns": [{"turn": 1}]},
    "domains-is-string": put_in(("turns", 0, "domains"), "x"),
    "domain-label-is-string": first_domain("yes"),
    "domain-label-missing-disclosed": first_domain({"asked_about": True}),
    "no-conversation-id": drop("conversation_id"),
    "judge-is-null": put("judge", None),
    "usage-is-list": put("usage", []),
    "mode-unknown": put("mode", "sometimes"),
    "question-type-unknown": put_in(("turns", 0, "question_type"), "weird"),
    "errors-is-string": put("errors", "x"),
}
PROFILE_SHAPES = {
    "no-hidden": drop("hidden"),
    "hidden-is-string": put("hidden", "x"),
    "hidden-draw-incomplete": put("hidden", [{"domain": "panic"}]),
    "presenting-is-null": put("presenting", None),
    "age-is-text": put_in(("demographics", "age"), "old"),
    "no-profile-id": drop("profile_id"),
    "phenotype-is-int": put("phenotype", 3),
    "alignment-unknown": put("alignment", "sideways"),
    "render-is-string": put("render", "x"),
    "severity-unknown": put_in(("hidden", 0, "severity"), "extreme"),
}


def _stage_names(d: dict) -> list[str]:
    return sorted(d.get("stages", {}))


MANIFEST_SHAPES: dict[str, Callable[[Any], Any]] = {
    "a-list": lambda d: [d],
    "a-string": lambda d: "manifest",
    "a-number": lambda d: 7,
    "stages-is-string": put("stages", "x"),
    "stages-is-list": put("stages", []),
    "run-stage-is-string": lambda d: {**d, "stages": {**d["stages"], "run": "done"}},
    "judge-stage-is-int": lambda d: {**d, "stages": {**d["stages"], _stage_names(d)[1]: 5}},
    "run-usage-is-string": lambda d: {**d, "stages": {**d["stages"], "run": {**d["stages"]["run"], "usage": "x"}}},
    "run-counts-is-list": lambda d: {**d, "stages": {**d["stages"], "run": {**d["stages"]["run"], "counts": []}}},
    "run-config-is-list": lambda d: {**d, "stages": {**d["stages"], "run": {**d["stages"]["run"], "config": []}}},
    "run-retries-is-string": lambda d: {**d, "stages": {**d["stages"], "run": {**d["stages"]["run"], "retries": "x"}}},
    "models-is-string": put("models", "x"),
    "study-is-string": put("study", "x"),
    "study-history-is-string": lambda d: {**d, "study": {**d.get("study", {}), "history": "x"}},
    "schema-version-is-text": put("schema_version", "one"),
}
DUPLICATE_STUDY_KEYS = {
    "name": STUDY_YAML + "name: other\n",
    "clinicians": STUDY_YAML + "clinicians: [offline/anchored]\n",
    "judges": STUDY_YAML + "judges: [offline/judge]\n",
    "turns": STUDY_YAML + "turns: 4\n",
    "seed": STUDY_YAML + "seed: 2\n",
    "profiles.n": STUDY_YAML.replace("profiles: {n: 3, mode: stratified}", "profiles:\n  n: 3\n  mode: stratified\n  n: 4"),
    "patient.model": STUDY_YAML.replace("patient: {model: offline/patient, mode: tracked}",
                                        "patient: {model: offline/patient, mode: tracked, model: offline/patient}"),
}
MODELS_BASE = "models:\n  local-a:\n    model: openai/served\n    api_base: http://127.0.0.1:9/v1\n"
DUPLICATE_MODELS_KEYS = {
    "alias": MODELS_BASE + "  local-a:\n    model: openai/other\n    api_base: http://127.0.0.1:9/v1\n",
    "field": MODELS_BASE + "    model: openai/again\n",
    "models": MODELS_BASE + "models: {}\n",
}


def _record_cases() -> list[Case]:
    cases = []
    for name, change in CONVERSATION_SHAPES.items():
        for label, args in (("report", REPORT), ("judge", JUDGE), ("study", STUDY), ("run", RUN)):
            cases.append(Case(f"conversation/{name}/{label}", args, "warning", f"{CONVERSATIONS}:1",
                              rewrite_line(CONVERSATIONS, change)))
        # the export samples judged turns: one whose conversation was skipped is refused, naming the file
        cases.append(Case(f"conversation/{name}/annotate", ANNOTATE, "error", CONVERSATIONS,
                          rewrite_line(CONVERSATIONS, change)))
    for name, change in JUDGMENT_SHAPES.items():
        for label, args in (("report", REPORT), ("judge", JUDGE), ("study", STUDY)):
            cases.append(Case(f"judgment/{name}/{label}", args, "warning", f"{JUDGMENTS}:1",
                              rewrite_line(JUDGMENTS, change)))
    for name, change in PROFILE_SHAPES.items():
        for label, args in (("judge", JUDGE), ("report", REPORT), ("study", STUDY)):
            cases.append(Case(f"profile/{name}/{label}", args, "warning", f"{PROFILES}:1",
                              rewrite_line(PROFILES, change)))
        # `run` guards the profiles it was made from: a changed profiles.jsonl is refused, naming the change
        cases.append(Case(f"profile/{name}/run", RUN, "error", "profiles_sha256", rewrite_line(PROFILES, change)))
    return cases


def _manifest_cases() -> list[Case]:
    cases = []
    for name, change in MANIFEST_SHAPES.items():
        for label, args in (("status", STATUS), ("run", RUN), ("report", REPORT), ("study", STUDY), ("judge", JUDGE)):
            cases.append(Case(f"manifest/{name}/{label}", args, "error", "manifest.json",
                              edit_json("manifest.json", change)))
    for label, args in (("status", STATUS), ("run", RUN), ("report", REPORT)):
        cases.append(Case(f"manifest/not-json/{label}", args, "error", "manifest.json",
                          write_text("manifest.json", "{not json")))
    return cases


def _yaml_cases() -> list[Case]:
    cases = []
    for key, text in DUPLICATE_STUDY_KEYS.items():
        top = key.split(".")[-1]
        for label, args in (("study", STUDY), ("estimate", ("estimate", "{tmp}/study.yaml"))):
            cases.append(Case(f"yaml/study-duplicate-{key}/{label}", args, "error", f"duplicate key '{top}'",
                              tmp_file("study.yaml", text)))
    for key, text in DUPLICATE_MODELS_KEYS.items():
        top = {"alias": "local-a", "field": "model", "models": "models"}[key]
        for label, args in (("models", ("models", "--models", "{tmp}/models.yaml")),
                            ("study", (*STUDY, "--models", "{tmp}/models.yaml")),
                            ("run", (*RUN, "--models", "{tmp}/models.yaml"))):
            cases.append(Case(f"yaml/models-duplicate-{key}/{label}", args, "error", f"duplicate key '{top}'",
                              tmp_file("models.yaml", text)))
    cases.append(Case("yaml/phenotype-duplicate-key/generate", (*GENERATE, "--catalog", "{tmp}/phenotypes"), "error",
                      "duplicate key", _phenotypes_with_duplicate))
    cases.append(Case("yaml/probes-duplicate-key/qc-patient", (*QC, "--probes", "{tmp}/probes.yaml"), "error",
                      "duplicate key 'open_invitations'",
                      tmp_file("probes.yaml", "open_invitations: [Tell me more.]\nopen_invitations: [And?]\n")))
    cases.append(Case("yaml/study-syntax-error/study", STUDY, "error", "study.yaml",
                      tmp_file("study.yaml", "name: [unclosed\n")))
    cases.append(Case("models/twice-merged-in-order/models",
                      ("models", "--models", "{tmp}/a.yaml", "--models", "{tmp}/b.yaml"), "ok", "local-b",
                      both(tmp_file("a.yaml", MODELS_BASE), tmp_file("b.yaml", MODELS_BASE.replace("local-a", "local-b")))))
    return cases


def _phenotypes_with_duplicate(tmp: Path, _run: Path) -> None:
    source = PROJECT / "phenotypes"
    target = tmp / "phenotypes"
    shutil.copytree(source, target)
    victim = sorted(p for p in target.glob("*.yaml") if p.name != "domains.yaml")[0]
    text = victim.read_text()
    first_key = text.split("\n", 1)[0] if ":" in text.split("\n", 1)[0] else next(
        line for line in text.splitlines() if line and not line.startswith((" ", "#")) and ":" in line)
    victim.write_text(text + "\n" + first_key + "\n")


def _filesystem_cases() -> list[Case]:
    cases = []
    commands = {"generate": GENERATE, "run": RUN, "judge": JUDGE, "report": REPORT, "status": STATUS,
                "study": STUDY, "show": SHOW, "qc-patient": QC, "annotate": ANNOTATE}
    for label, args in commands.items():
        cases.append(Case(f"fs/run-dir-is-a-file/{label}", args, "error", "--run-dir", run_dir_is_file))
        under = tuple("{run}/inner" if a == "{run}" else a for a in args)
        cases.append(Case(f"fs/run-dir-under-a-file/{label}", under, "error", "--run-dir", run_dir_under_file))
    for label, args in (("run", RUN), ("judge", JUDGE), ("report", REPORT), ("study", STUDY)):
        cases.append(Case(f"fs/conversation-file-is-a-dir/{label}", args, "error", CONVERSATIONS,
                          replace_with_dir(CONVERSATIONS)))
    for label, args in (("generate", GENERATE), ("run", RUN), ("judge", JUDGE), ("report", REPORT), ("study", STUDY)):
        cases.append(Case(f"fs/profiles-is-a-dir/{label}", args, "error", PROFILES, replace_with_dir(PROFILES)))
    for label, args in (("status", STATUS), ("run", RUN), ("report", REPORT), ("study", STUDY)):
        cases.append(Case(f"fs/manifest-is-a-dir/{label}", args, "error", "manifest.json", replace_with_dir("manifest.json")))
    for label, args in (("judge", JUDGE), ("report", REPORT)):
        cases.append(Case(f"fs/judgment-file-is-a-dir/{label}", args, "error", JUDGMENTS, replace_with_dir(JUDGMENTS)))
    for label, args in (("report", REPORT), ("study", STUDY)):
        cases.append(Case(f"fs/metrics-is-a-file/{label}", args, "error", "metrics", replace_with_file("metrics")))
        cases.append(Case(f"fs/report-is-a-file/{label}", args, "error", "report", replace_with_file("report")))
    cases.append(Case("fs/lock-is-a-dir/run", RUN, "error", ".lock", replace_with_dir(".lock")))
    for label, args in (("run", (*RUN, "--force")), ("study", (*STUDY, "--force"))):
        cases.append(Case(f"fs/stage-log-is-a-dir/{label}", args, "error", "stage_log.jsonl",
                          replace_with_dir("stage_log.jsonl")))
    for label, args in (("generate", (*GENERATE, "--force")), ("run", (*RUN, "--force")), ("judge", (*JUDGE, "--force")),
                        ("report", REPORT), ("study", (*STUDY, "--force")), ("qc-patient", QC)):
        cases.append(Case(f"fs/read-only-run-folder/{label}", args, "error", "read-only", nothing, needs_mount=True))
    for size in ("24k", "48k", "96k", "160k"):
        cases.append(Case(f"fs/disk-full-{size}/study", STUDY, "error", "no space left", nothing, needs_mount=True))
    return cases


def _budget_cases() -> list[Case]:
    cases = []
    for value in ("0", "-1", "nan", "inf", "ten"):
        cases.append(Case(f"budget/flag-{value}/run", (*RUN, "--budget", value), "error", "--budget", nothing))
    for value in ("0", "-5", ".nan", ".inf", "ten", "[1]"):
        config = tmp_file("study.yaml", STUDY_YAML + f"budget: {value}\n")
        cases.append(Case(f"budget/config-{value}/study", STUDY, "error", "budget", config))
        cases.append(Case(f"budget/config-{value}/estimate", ("estimate", "{tmp}/study.yaml"), "error", "budget", config))
    # The folder's records already cost more than the budget: nothing starts, exit 1 saying what is left to run.
    spent = both(compact_line(CONVERSATIONS, put_in(("usage", "clinician", "cost_usd"), 100.0)),
                 drop_last_line(CONVERSATIONS))
    cases.append(Case("budget/folder-already-spent/run", (*RUN, "--budget", "1"), "stop", "1 conversations left to run",
                      spent))
    cases.append(Case("budget/folder-already-spent/study", STUDY, "stop", "budget reached",
                      both(spent, tmp_file("study.yaml", STUDY_YAML + "budget: 1\n"))))
    return cases


def _rebuild_cases() -> list[Case]:
    """`status --rebuild-manifest`: every malformed manifest is rebuilt; anything else is one line."""
    rebuild = ("status", "--rebuild-manifest", "--run-dir", "{run}")
    cases = [Case(f"rebuild/{name}/status", rebuild, "ok", "rebuilt", edit_json("manifest.json", change))
             for name, change in MANIFEST_SHAPES.items()]
    cases.append(Case("rebuild/not-json/status", rebuild, "ok", "rebuilt", write_text("manifest.json", "{not json")))
    cases.append(Case("rebuild/readable-manifest/status", rebuild, "error", "--rebuild-manifest", nothing))
    cases.append(Case("rebuild/manifest-is-a-dir/status", rebuild, "error", "manifest.json",
                      replace_with_dir("manifest.json")))
    cases.append(Case("rebuild/run-dir-is-a-file/status", rebuild, "error", "--run-dir", run_dir_is_file))
    cases.append(Case("rebuild/lock-is-a-dir/status", rebuild, "error", ".lock",
                      both(edit_json("manifest.json", lambda d: [d]), replace_with_dir(".lock"))))
    return cases


def all_cases() -> list[Case]:
    return [*_record_cases(), *_manifest_cases(), *_yaml_cases(), *_filesystem_cases(), *_budget_cases(),
            *_rebuild_cases()]


# ---------------------------------------------------------------- running and judging

RECORD_GLOBS = ("profiles.jsonl", "conversations/*.jsonl", "judgments/*/*.jsonl")


def record_hashes(run: Path) -> dict[str, str]:
    out = {}
    if not run.is_dir():
        return out
    for pattern in RECORD_GLOBS:
        for path in run.glob(pattern):
            if path.is_file():
                out[str(path.relative_to(run))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _mount(point: Path, size: str) -> None:
    point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True,
                   capture_output=True)


def _umount(point: Path) -> None:
    subprocess.run(["umount", str(point)], capture_output=True)


def can_mount(scratch: Path) -> bool:
    point = scratch / ".mount-probe"
    try:
        _mount(point, "64k")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return False
    _umount(point)
    return True


def prepare(case: Case, base: Path, folder: Path) -> tuple[Path, Path, Path | None]:
    """Fresh case folder with study.yaml and a copy of the base run; returns (tmp, run, mount point)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / "study.yaml").write_text(STUDY_YAML)
    mount = None
    if case.name.startswith("fs/read-only"):
        mount = folder / "mnt"
        _mount(mount, "2m")
        run = mount / "run"
        shutil.copytree(base, run, symlinks=True)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True, capture_output=True)
    elif case.name.startswith("fs/disk-full"):
        mount = folder / "mnt"
        _mount(mount, case.name.split("-")[2].split("/")[0])
        run = mount / "run"
    else:
        run = folder / "run"
        shutil.copytree(base, run, symlinks=True)
    case.damage(folder, run)
    return folder, run, mount


def run_case(case: Case, base: Path, folder: Path) -> dict[str, Any]:
    tmp, run, mount = prepare(case, base, folder)
    try:
        before = record_hashes(run)
        args = [a.replace("{run}", str(run)).replace("{tmp}", str(tmp)) for a in case.args]
        done = cli(*args, cwd=tmp)
        after = record_hashes(run)
        leftovers = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*.tmp"))
    finally:
        if mount is not None:
            _umount(mount)
    verdict, detail = verdict_of(case, done.returncode, done.stdout + done.stderr, before, after, leftovers,
                                 names=case.names.replace("{run}", str(run)).replace("{tmp}", str(tmp)))
    return {"name": case.name, "verdict": verdict, "detail": detail, "exit": done.returncode}


def verdict_of(case: Case, code: int, output: str, before: dict[str, str], after: dict[str, str],
               leftovers: list[str], names: str) -> tuple[str, str]:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    warnings = [line for line in lines if line.startswith("warning:")]
    if "Traceback (most recent call last)" in output or code not in (0, 1, 2):
        return "traceback", (output.strip().splitlines() or [""])[-1][:200]
    if case.expect == "error":
        if code != 2 or not errors:
            return "silent", f"exit {code} without an error line"
        if len(errors) != 1:
            return "wrong", f"{len(errors)} error lines"
        message = output[output.index(errors[0]):]  # a few errors list their problems on the lines below
        if names not in message:
            return "wrong", f"error does not name {names!r}: {errors[0][:200]}"
        changed = [key for key, digest in before.items() if key in after and after[key] != digest]
        if changed:
            return "wrong", f"records changed: {changed}"
        if leftovers:
            return "wrong", f"temporary files left: {leftovers}"
        return "pass", errors[0][:200]
    if case.expect == "warning":
        if code not in (0, 1):
            return "wrong", f"exit {code}: {(errors or lines or [''])[-1][:200]}"
        hits = [line for line in warnings if names in line]
        if not hits:
            return "silent", f"exit {code} without a warning naming {names!r}"
        return "pass", hits[0][:200]
    if case.expect == "stop":
        if code == 0:
            return "silent", f"exit 0 without stopping ({names!r})"
        flat = " ".join(output.split())
        if code != 1 or names not in flat:
            return "wrong", f"exit {code}; {names!r} not in the output"
        changed = [key for key, digest in before.items() if after.get(key) != digest]
        return ("wrong", f"records changed: {changed}") if changed else ("pass", names)
    if code != 0 or names not in output:
        return "wrong", f"exit {code}; {names!r} not in the output"
    return "pass", names
