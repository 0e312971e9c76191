"""Faults as one clear line, nothing lost: filesystem faults on the run folder, records of the wrong
shape, malformed manifests, duplicate YAML keys, repeated --models, report file modes and the
patient QC recall gate. Real files, real subprocesses (and a real tmpfs where mounting is allowed)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from intake_eval.core.store import write_text_atomic
from tests.helpers.adversarial_cases import (
    CONVERSATIONS,
    GENERATE,
    JUDGE,
    JUDGMENTS,
    MODELS_BASE,
    PROFILES,
    REPORT,
    RUN,
    STATUS,
    STUDY,
    STUDY_YAML,
    all_cases,
    build_base,
    can_mount,
    cli,
    record_hashes,
    run_case,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("base"))


@pytest.fixture
def mounting(tmp_path) -> bool:
    if not can_mount(tmp_path):
        pytest.skip("needs permission to mount a tmpfs (root)")
    return True


def copy_run(base: Path, tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    (tmp_path / "study.yaml").write_text(STUDY_YAML)
    return run


def invoke(args: tuple[str, ...], run: Path, tmp: Path) -> subprocess.CompletedProcess:
    return cli(*(a.replace("{run}", str(run)).replace("{tmp}", str(tmp)) for a in args), cwd=tmp)


def one_error_line(done: subprocess.CompletedProcess, *names: str) -> str:
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == 2, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    message = output[output.index(errors[0]):]  # the catalog lists its problems on the lines below
    for name in names:
        assert name in message, message
    return message


# ---------------------------------------------------------------- filesystem

def test_read_only_run_folder_is_one_line_and_changes_nothing(base, tmp_path, mounting):
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    try:
        run = mount / "run"
        shutil.copytree(base, run)
        (tmp_path / "study.yaml").write_text(STUDY_YAML)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        before = record_hashes(run)
        for args in (GENERATE, RUN, JUDGE, REPORT, STUDY):
            line = one_error_line(invoke((*args, "--force") if args in (RUN, GENERATE) else args, run, tmp_path),
                                  str(run), "read-only file system")
            assert "choose another --run-dir" in line
        assert record_hashes(run) == before
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("size", ["24k", "48k", "160k"])
def test_full_disk_is_one_line_no_temp_files_and_a_rerun_is_byte_identical(base, tmp_path, mounting, size):
    mount = tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], check=True)
    try:
        (tmp_path / "study.yaml").write_text(STUDY_YAML)
        run = mount / "run"
        one_error_line(invoke(STUDY, run, tmp_path), "no space left on device", str(run))
        assert not list(mount.rglob("*.tmp")), list(mount.rglob("*"))
        subprocess.run(["mount", "-o", "remount,size=4m", str(mount)], check=True)
        done = invoke(STUDY, run, tmp_path)
        assert done.returncode == 0, done.stderr
        for relative in (PROFILES, CONVERSATIONS, JUDGMENTS):
            assert (run / relative).read_bytes() == (base / relative).read_bytes(), relative
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("command", ["generate", "run", "judge", "report", "status", "study", "show"])
def test_run_dir_that_is_a_file_is_refused_naming_the_flag(tmp_path, command):
    target = tmp_path / "afile"
    target.write_text("x")
    args = {"generate": ("generate", "--n", "1"), "run": RUN[:-2], "judge": JUDGE[:-2], "report": ("report",),
            "status": ("status",), "study": STUDY[:2], "show": ("show", "some-id")}[command]
    (tmp_path / "study.yaml").write_text(STUDY_YAML)
    for run_dir in (target, target / "inner"):
        line = one_error_line(invoke((*args, "--run-dir", str(run_dir)), run_dir, tmp_path), "--run-dir", "not a folder")
        assert str(run_dir) in line
    assert target.read_text() == "x"


@pytest.mark.parametrize("relative", [CONVERSATIONS, PROFILES, "manifest.json"])
def test_a_directory_where_a_record_file_belongs(base, tmp_path, relative):
    run = copy_run(base, tmp_path)
    (run / relative).unlink()
    (run / relative / "inner").mkdir(parents=True)
    before = record_hashes(run)
    for args in (REPORT, STUDY):
        one_error_line(invoke(args, run, tmp_path), str(run / relative), "is a directory")
    assert record_hashes(run) == before


def test_a_failed_atomic_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "manifest.json"
    target.mkdir()  # os.replace onto a directory fails after the temporary file was written
    with pytest.raises(OSError):
        write_text_atomic(target, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


# ---------------------------------------------------------------- records of the wrong shape

def rewrite_first_line(path: Path, change) -> None:
    import json

    lines = path.read_text().splitlines(keepends=True)
    lines[0] = json.dumps(change(json.loads(lines[0]))) + "\n"
    path.write_text("".join(lines))


@pytest.mark.parametrize(("relative", "change", "reason"), [
    (CONVERSATIONS, lambda d: {**d, "turns": "x"}, "turns"),
    (CONVERSATIONS, lambda d: {k: v for k, v in d.items() if k != "conversation_id"}, "conversation_id"),
    (JUDGMENTS, lambda d: {**d, "turns": [{"turn": 1}]}, "turns.0"),
    (PROFILES, lambda d: {k: v for k, v in d.items() if k != "hidden"}, "hidden"),
])
def test_a_wrong_shape_record_is_skipped_named_and_redone(base, tmp_path, relative, change, reason):
    run = copy_run(base, tmp_path)
    rewrite_first_line(run / relative, change)
    report = invoke(REPORT, run, tmp_path)
    output = report.stdout + report.stderr
    assert report.returncode == 0 and "Traceback" not in output, output
    warning = next(line for line in output.splitlines() if line.startswith("warning:") and f"{relative}:1" in line)
    assert "not a valid" in warning and reason in warning
    # the study resumes: the skipped record is redone (never counted as done), the files end as an uninterrupted run's
    study = invoke(STUDY, run, tmp_path)
    assert study.returncode == 0 and "Traceback" not in study.stderr, study.stderr
    for name in (PROFILES, CONVERSATIONS, JUDGMENTS):
        assert (run / name).read_bytes() == (base / name).read_bytes(), name


def test_a_wrong_shape_judgment_is_judged_again(base, tmp_path):
    run = copy_run(base, tmp_path)
    rewrite_first_line(run / JUDGMENTS, lambda d: {**d, "turns": "x"})
    done = invoke(JUDGE, run, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (run / JUDGMENTS).read_bytes() == (base / JUDGMENTS).read_bytes()


# ---------------------------------------------------------------- manifest, YAML, --models

@pytest.mark.parametrize(("shape", "where"), [
    ([], "a JSON list"), ({"stages": {"run": "done"}}, "stages.run"), ({"stages": "x"}, "stages"),
])
def test_a_malformed_manifest_is_one_line(base, tmp_path, shape, where):
    import json

    run = copy_run(base, tmp_path)
    data = json.loads((run / "manifest.json").read_text())
    if isinstance(shape, dict):
        shape = {**data, **shape, "stages": shape["stages"] if shape["stages"] == "x" else {**data["stages"], **shape["stages"]}}
    (run / "manifest.json").write_text(json.dumps(shape))
    before = (run / "manifest.json").read_bytes()
    records = record_hashes(run)
    for args in (STATUS, RUN, STUDY, REPORT):
        line = one_error_line(invoke(args, run, tmp_path), "manifest.json", "malformed", where)
        assert "move it aside" in line and "status --rebuild-manifest" in " ".join(line.split())
    assert (run / "manifest.json").read_bytes() == before and record_hashes(run) == records
    # the flag the error names rebuilds it from the records; the malformed file is kept beside it
    rebuilt = invoke(("status", "--rebuild-manifest", "--run-dir", "{run}"), run, tmp_path)
    assert rebuilt.returncode == 0 and "Traceback" not in rebuilt.stderr, rebuilt.stderr
    assert [p.read_bytes() for p in run.glob("manifest.json.malformed-*")] == [before]
    assert invoke(STUDY, run, tmp_path).returncode == 0 and record_hashes(run) == records


@pytest.mark.parametrize(("text", "key", "line"), [
    (STUDY_YAML + "clinicians: [offline/anchored]\n", "clinicians", 10),
    (STUDY_YAML.replace("profiles: {n: 3, mode: stratified}", "profiles:\n  n: 3\n  n: 4"), "n", 5),
])
def test_duplicate_study_keys_are_refused(tmp_path, text, key, line):
    (tmp_path / "study.yaml").write_text(text)
    for args in (STUDY, ("estimate", "{tmp}/study.yaml")):
        error = one_error_line(invoke(args, tmp_path / "run", tmp_path), "study.yaml", f"duplicate key '{key}'")
        assert f"line {line}:" in error
    assert not (tmp_path / "run").exists()


def test_duplicate_keys_in_models_probes_and_phenotypes(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(MODELS_BASE + "  local-a:\n    model: openai/other\n")
    one_error_line(cli("models", "--models", str(models)), str(models), "duplicate key 'local-a'", "line 5")
    probes = tmp_path / "probes.yaml"
    probes.write_text("open_invitations: [Tell me more.]\nopen_invitations: [And?]\n")
    one_error_line(cli("qc-patient", "--patient", "offline/patient", "--probes", str(probes),
                       "--run-dir", str(tmp_path / "run")), "duplicate key 'open_invitations'")
    catalog = tmp_path / "phenotypes"
    shutil.copytree(Path(__file__).resolve().parents[2] / "phenotypes", catalog)
    domains = catalog / "domains.yaml"
    first = next(line for line in domains.read_text().splitlines() if line and not line.startswith((" ", "#")))
    domains.write_text(domains.read_text() + "\n" + first + "\n")
    done = cli("generate", "--n", "1", "--catalog", str(catalog), "--run-dir", str(tmp_path / "run"))
    one_error_line(done, "domains.yaml", f"duplicate key '{first.rstrip(':').split(':')[0]}'")


def test_repeated_models_files_merge_in_order(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(MODELS_BASE + "  local-b:\n    model: openai/first\n    api_base: http://127.0.0.1:9/v1\n")
    second.write_text("models:\n  local-b:\n    model: openai/second\n    api_base: http://127.0.0.1:9/v1\n")
    done = cli("models", "--models", str(first), "--models", str(second))
    assert done.returncode == 0, done.stderr
    assert "local-a" in done.stdout and "openai/second" in done.stdout and "openai/first" not in done.stdout
    assert "Repeatable: files merge in the order given" in " ".join(cli("models", "--help").stdout.split())


# ---------------------------------------------------------------- report modes, patient QC

def test_report_files_respect_the_umask(base, tmp_path):
    run = copy_run(base, tmp_path)
    shutil.rmtree(run / "report")
    previous = os.umask(0o022)
    try:
        done = invoke(REPORT, run, tmp_path)
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    shards = run / "report" / "conversations"
    assert stat.S_IMODE(shards.stat().st_mode) == 0o755
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in shards.iterdir())
    assert stat.S_IMODE((run / "report" / "index.html").stat().st_mode) == 0o644


def test_a_patient_that_never_discloses_fails_the_recall_gate(base, tmp_path):
    from tests.helpers.fakeserver import FakeOpenAIServer, Reply

    run = copy_run(base, tmp_path)
    with FakeOpenAIServer(lambda _body, _index: Reply(content="I'd rather not go into that. I'm just tired.")) as server:
        models = tmp_path / "models.yaml"
        models.write_text(f"models:\n  silent: {{model: openai/silent, api_base: '{server.url}'}}\n")
        args = ("qc-patient", "--patient", "silent", "--n", "1", "--models", str(models), "--run-dir", str(run))
        assert cli(*args).returncode == 0  # no gate asked for: the table only
        line = one_error_line(cli(*args, "--min-recall", "0.5"), "patient silent", "disclosure recall 0.0%")
        assert "below the required 50.0%" in line
        assert cli(*args, "--max-leak-rate", "0.5").returncode == 0  # it leaks nothing
    bad = tmp_path / "study.yaml"
    bad.write_text(STUDY_YAML + "qc: {enabled: true, min_recall: 2}\n")
    one_error_line(cli("estimate", str(bad)), "study.yaml", "qc.min_recall")


# ---------------------------------------------------------------- skipped inputs, budgets, terminal tables

def test_a_corrupt_profile_line_in_the_middle_is_said_with_its_count_and_redone_by_the_study(base, tmp_path):
    run = copy_run(base, tmp_path)
    lines = (run / PROFILES).read_text().splitlines(keepends=True)
    lines[1] = "{torn line\n"
    (run / PROFILES).write_text("".join(lines))
    before = record_hashes(run)
    one_error_line(invoke(RUN, run, tmp_path), "profiles_sha256")  # the run's profiles changed under it
    report = invoke(REPORT, run, tmp_path)
    said = " ".join((report.stdout + report.stderr).split())
    assert report.returncode == 0 and "Traceback" not in said, said
    assert f"{PROFILES}:2: skipping a corrupt line" in said
    # not only a warning: the summary and the report's banner say the results are short, with the count
    assert "profiles.jsonl: 1 unreadable line(s) skipped; the results are short by those records" in said
    assert "1 unreadable line(s) skipped" in (run / "report" / "index.html").read_text()
    assert record_hashes(run) == before
    study = invoke(STUDY, run, tmp_path)  # the study regenerates the lost profile: nothing is short any more
    assert study.returncode == 0, study.stderr
    for name in (PROFILES, CONVERSATIONS, JUDGMENTS):
        assert (run / name).read_bytes() == (base / name).read_bytes(), name


def test_budget_is_the_run_folders_and_sixteen_at_once_overshoot_by_at_most_one_conversation(tmp_path):
    from tests.interview.test_budget import conversation_costs, priced_folder
    from tests.commands.test_run_loopback import study_server

    with study_server() as server:
        run, models = priced_folder(tmp_path, server.url, "run", profiles=30)
        args = ("run", "--clinician", "doc", "--patient", "pat", "--turns", "2", "--concurrency", "16",
                "--models", str(models), "--run-dir", str(run))
        first = cli(*args, "--budget", "2")
        said = " ".join((first.stdout + first.stderr).split())
        assert first.returncode == 1 and "Traceback" not in said, said
        assert "budget reached" in said and "conversations left to run, about $" in said
        costs = conversation_costs(run)
        assert 0 < len(costs) < 30 and sum(costs) <= 2 + max(costs)
        written = set((run / "conversations" / "doc.jsonl").read_text().splitlines())
        second = cli(*args, "--budget", "2")  # no fresh budget per invocation
        assert second.returncode == 1 and "budget reached" in " ".join((second.stdout + second.stderr).split())
        assert sum(conversation_costs(run)) <= 2 + max(costs)
        assert len(conversation_costs(run)) <= len(costs) + 1
        assert written <= set((run / "conversations" / "doc.jsonl").read_text().splitlines())  # kept as written


@pytest.mark.parametrize("columns", ["80", "100"])
def test_status_and_estimate_keep_every_number_whole_at_narrow_widths(base, tmp_path, columns):
    import re

    run = copy_run(base, tmp_path)
    for args in (STATUS, ("estimate", "{tmp}/study.yaml")):
        done = subprocess.run([*invoke_args(args, run, tmp_path)], capture_output=True, text=True,
                              env={**os.environ, **narrow_env(columns)}, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= int(columns) and "…" not in done.stdout
        assert re.search(r"\b\d[\d,.]*[kMG]?\b", done.stdout)


def invoke_args(args: tuple[str, ...], run: Path, tmp: Path) -> list[str]:
    import sys

    return [sys.executable, "-m", "intake_eval.cli",
            *(a.replace("{run}", str(run)).replace("{tmp}", str(tmp)) for a in args)]


def narrow_env(columns: str) -> dict[str, str]:
    from tests.helpers.adversarial_cases import env

    return {**env(), "COLUMNS": columns}


# ---------------------------------------------------------------- the sweep's cases, one per family

SAMPLE = ("budget/folder-already-spent/run", "budget/flag-nan/run", "rebuild/run-stage-is-string/status",
          "conversation/turns-is-string/report", "judgment/domain-label-is-string/judge", "profile/no-hidden/run",
          "manifest/judge-stage-is-int/study", "yaml/models-duplicate-field/run", "fs/stage-log-is-a-dir/run",
          "fs/report-is-a-file/report", "fs/lock-is-a-dir/run", "conversation/no-conversation-id/annotate")


@pytest.mark.parametrize("name", SAMPLE)
def test_sweep_case(base, tmp_path, name):
    case = next(case for case in all_cases() if case.name == name)
    result = run_case(case, base, tmp_path / "case")
    assert result["verdict"] == "pass", result


def test_a_timeout_names_its_cause_instead_of_an_empty_detail():
    import asyncio

    from intake_eval.llm.retry import classify_failure

    for error in (asyncio.TimeoutError(), TimeoutError()):
        failure = classify_failure(error)
        assert failure.reason == "timeout" and failure.detail == "no reply within the request timeout"
    assert classify_failure(ConnectionResetError()).detail == "ConnectionResetError"


def test_only_filesystem_faults_become_error_lines(tmp_path):
    import errno

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.fs import describe_os_error, filesystem_errors

    # root bypasses permissions, so EACCES is built by hand here; its wording is what a user would read
    denied = describe_os_error(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run" / ".lock")))
    assert denied == f"{tmp_path / 'run' / '.lock'}: permission denied; fix its permissions or choose another --run-dir"
    # a network error is an OSError too, but not about the run folder: it must keep its own handling
    assert describe_os_error(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")) is None
    with pytest.raises(ConnectionRefusedError), filesystem_errors():
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    # a fault inside an exception group (a TaskGroup's) is found and named
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(IntakeEvalError, match="is a file, not a folder"), filesystem_errors():
        try:
            (blocked / "sub").mkdir()
        except OSError as error:
            raise ExceptionGroup("tasks", [error]) from None
