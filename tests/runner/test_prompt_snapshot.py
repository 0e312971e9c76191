"""The run folder keeps what every role was told: template texts and rendered prompts by content hash,
the package version and source revision, `show` prints the prompts (real run folders, real CLI)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import intake_eval
from intake_eval.cli import app
from intake_eval.core import prompts as prompt_module
from intake_eval.core.package_data import package_folder
from intake_eval.core.source_revision import source_revision
from intake_eval.core.store import RunPaths, file_hash
from intake_eval.runner.prompt_snapshot import referenced_templates
from tests.commands.test_run_loopback import by_model, invoke, setup_run, study_server

CUSTOM = "You are a custom clinician from a folder outside the checkout. Ask about sleep first.\n"


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def _snapshot_files(run_dir: Path) -> dict[str, bytes]:
    folder = run_dir / "prompts"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_loopback_run_keeps_the_exact_clinician_and_patient_prompts_it_sent(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server)
        result = invoke("--run-dir", str(run_dir), "--models", str(models), "--clinician", "doc", "--patient", "pat",
                        "--patient-mode", "prompted", "--turns", "2")
        assert result.exit_code == 0, result.output
        sent_clinician = {messages[0]["content"] for messages in by_model(server, "doc")}
        sent_patient = {messages[0]["content"] for messages in by_model(server, "pat")
                        if "Daniel1" in messages[0]["content"]}
    manifest = _manifest(run_dir)
    rendered = manifest["prompt_texts"]["rendered"]
    clinician = (run_dir / rendered["clinician.minimal"]["file"]).read_text(encoding="utf-8")
    assert sent_clinician == {clinician}  # byte for byte what the server received
    patient = rendered["patient.prompted"]
    assert patient["example"] == "profile P00001"
    assert sent_patient == {(run_dir / patient["file"]).read_text(encoding="utf-8")}
    # every template by hash, includes too, and the hash is the one the stage guard compares
    templates = manifest["prompt_texts"]["templates"]
    assert {"clinician_minimal", "patient_prompted", "_patient_persona", "_patient_style"} <= set(templates)
    for name, entry in templates.items():
        snapshot = run_dir / entry["file"]
        assert snapshot.name == f"{name}.{manifest['prompts'].get(name, entry['sha256'])}.j2"
        assert snapshot.read_bytes() == prompt_module.template_path(name).read_bytes()
        assert entry["origin"] == "package"
    assert manifest["versions"]["intake-eval"] == intake_eval.__version__


def test_resume_with_the_same_prompts_writes_nothing_new(tmp_path):
    with study_server() as server:
        run_dir, models = setup_run(tmp_path, server)
        args = ("--run-dir", str(run_dir), "--models", str(models), "--clinician", "doc", "--patient", "pat",
                "--patient-mode", "tracked", "--turns", "2")
        assert invoke(*args).exit_code == 0
        before = {path: (run_dir / "prompts" / path).stat().st_mtime_ns for path in _snapshot_files(run_dir)}
        assert invoke(*args).exit_code == 0
    after = {path: (run_dir / "prompts" / path).stat().st_mtime_ns for path in _snapshot_files(run_dir)}
    assert after == before
    assert "patient.tracked" in _manifest(run_dir)["prompt_texts"]["rendered"]


@pytest.fixture
def outside_prompts(tmp_path, monkeypatch) -> Path:
    """A prompts folder outside the checkout (the shipped templates plus a custom condition) in effect
    for this test, the way a user's prompt folder is."""
    folder = tmp_path / "elsewhere" / "my-prompts"
    shutil.copytree(package_folder("prompts"), folder)
    (folder / "clinician_custom.j2").write_text(CUSTOM, encoding="utf-8")
    monkeypatch.setattr(prompt_module, "PROMPTS_DIR", folder)
    caches = [getattr(prompt_module, name, None) for name in ("_environment", "template_path", "_find")]
    from intake_eval.interview import participants

    caches.append(participants.clinician_system_prompt)
    for cached in caches:
        getattr(cached, "cache_clear", lambda: None)()
    yield folder
    for cached in caches:
        getattr(cached, "cache_clear", lambda: None)()


def test_a_custom_condition_outside_the_checkout_is_kept_and_later_edits_do_not_reach_it(tmp_path, outside_prompts):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    generated = runner.invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "2", "--seed", "3",
                                    "--generator", "offline/generator"])
    assert generated.exit_code == 0, generated.output
    ran = runner.invoke(app, ["run", "--run-dir", str(run_dir), "--clinician", "offline/screener", "--patient",
                              "offline/patient", "--condition", "custom", "--turns", "2"])
    assert ran.exit_code == 0, ran.output
    manifest = _manifest(run_dir)
    template = manifest["prompt_texts"]["templates"]["clinician_custom"]
    assert template["origin"] == str((outside_prompts / "clinician_custom.j2").resolve())
    kept = run_dir / template["file"]
    rendered = run_dir / manifest["prompt_texts"]["rendered"]["clinician.custom"]["file"]
    assert kept.read_text(encoding="utf-8") == CUSTOM and rendered.read_text(encoding="utf-8") == CUSTOM.strip()
    snapshot = _snapshot_files(run_dir)

    (outside_prompts / "clinician_custom.j2").write_text("An edited prompt.\n", encoding="utf-8")
    assert _snapshot_files(run_dir) == snapshot
    shown = runner.invoke(app, ["show", "P00001.offline__screener.custom.prompted.t0", "--run-dir", str(run_dir)],
                          env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert CUSTOM.strip() in shown.output and "An edited prompt" not in shown.output


def test_show_prints_the_clinician_and_patient_prompts_from_the_run_folder(tmp_path):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    assert runner.invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "2", "--seed", "5",
                               "--generator", "offline/generator"]).exit_code == 0
    ran = runner.invoke(app, ["run", "--run-dir", str(run_dir), "--clinician", "offline/screener", "--patient",
                              "offline/patient", "--patient-mode", "tracked", "--turns", "6"])
    assert ran.exit_code == 0, ran.output
    cid = "P00001.offline__screener.minimal.tracked.t0"
    shown = runner.invoke(app, ["show", cid, "--run-dir", str(run_dir), "--patient-prompt"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    manifest = _manifest(run_dir)
    clinician = (run_dir / manifest["prompt_texts"]["rendered"]["clinician.minimal"]["file"]).read_text(encoding="utf-8")
    assert "clinician system prompt" in shown.output and clinician in shown.output
    assert "patient system prompt, at the opening (nothing unlocked); from the run folder's templates" in shown.output
    from intake_eval.core.records import Profile
    from intake_eval.core.store import iter_records
    from intake_eval.interview.participants import patient_system_prompt

    profile = next(p for p in iter_records(RunPaths(run_dir).profiles, Profile) if p.profile_id == "P00001")
    assert patient_system_prompt(profile, "tracked", ()) in shown.output

    plain = runner.invoke(app, ["show", cid, "--run-dir", str(run_dir)], env={"COLUMNS": "250"})
    assert "patient system prompt" not in plain.output and clinician in plain.output


def test_show_on_a_run_folder_without_a_snapshot_says_so(tmp_path):
    from tests.commands.test_show import CID, write_run

    write_run(tmp_path / "run")
    shown = CliRunner().invoke(app, ["show", CID, "--run-dir", str(tmp_path / "run")], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "keeps no text for clinician.minimal" in shown.output


def test_includes_are_found_in_a_template_text():
    text = (package_folder("prompts") / "patient_prompted.j2").read_text(encoding="utf-8")
    assert referenced_templates(text) == ["_patient_persona", "_patient_style"]


def test_source_revision_of_a_checkout_and_of_an_install(tmp_path):
    checkout = Path(intake_eval.__file__).resolve().parent
    revision = source_revision(checkout)
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert revision is not None and revision["commit"] == head and isinstance(revision["dirty"], bool)
    # a copy of the package outside git (as a wheel installs it) has no revision
    installed = tmp_path / "site-packages" / "intake_eval"
    installed.mkdir(parents=True)
    (installed / "__init__.py").write_text("", encoding="utf-8")
    assert source_revision(installed) is None


def test_dirty_flag_follows_tracked_changes(tmp_path):
    repo = tmp_path / "repo"
    package = repo / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    assert source_revision(package)["dirty"] is False
    (repo / "notes.txt").write_text("untracked files do not count", encoding="utf-8")
    assert source_revision(package)["dirty"] is False
    (package / "__init__.py").write_text("x = 2\n", encoding="utf-8")
    assert source_revision(package)["dirty"] is True


def test_manifest_names_the_source_revision(tmp_path):
    run_dir = tmp_path / "run"
    assert CliRunner().invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "1", "--seed", "1",
                                    "--generator", "offline/generator"]).exit_code == 0
    manifest = _manifest(run_dir)
    assert manifest["source"] == source_revision(Path(intake_eval.__file__).resolve().parent)
    entry = manifest["prompt_texts"]["templates"]["offline_generator"]
    assert file_hash(run_dir / entry["file"]).startswith(entry["sha256"])


def test_show_with_a_malformed_manifest_still_prints_the_transcript(tmp_path):
    from tests.commands.test_show import CID, write_run

    paths = write_run(tmp_path / "run")
    paths.manifest.write_text("{not json", encoding="utf-8")
    shown = CliRunner().invoke(app, ["show", CID, "--run-dir", str(paths.root)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    assert "manifest is unreadable" in shown.output and "How is your sleep?" in shown.output


def test_a_forced_stage_keeps_the_old_texts_on_disk_but_readers_see_only_what_is_in_use(tmp_path):
    from intake_eval.runner.prompt_snapshot import snapshot_rendered_read

    run_dir = tmp_path / "run"
    runner = CliRunner()
    assert runner.invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "1", "--seed", "4",
                               "--generator", "offline/generator"]).exit_code == 0
    base = ["run", "--run-dir", str(run_dir), "--clinician", "offline/screener", "--patient", "offline/patient",
            "--turns", "2"]
    assert runner.invoke(app, [*base, "--condition", "minimal"]).exit_code == 0
    minimal = _manifest(run_dir)["prompt_texts"]["rendered"]["clinician.minimal"]["file"]
    refused = runner.invoke(app, [*base, "--condition", "screening"])
    assert refused.exit_code != 0 and "screening" in refused.output
    assert runner.invoke(app, [*base, "--condition", "screening", "--force"]).exit_code == 0
    manifest = _manifest(run_dir)
    assert (run_dir / minimal).is_file()  # nothing is ever deleted
    in_use = {item.key for item in snapshot_rendered_read(RunPaths(run_dir), manifest)}
    assert "clinician.screening" in in_use and "clinician.minimal" not in in_use
    assert set(manifest["stages"]["run"]["prompt_texts"]["rendered"]) == in_use


def test_a_rebuilt_manifest_indexes_the_prompts_the_folder_keeps(tmp_path):
    run_dir = tmp_path / "run"
    runner = CliRunner()
    assert runner.invoke(app, ["generate", "--run-dir", str(run_dir), "--n", "1", "--seed", "4",
                               "--generator", "offline/generator"]).exit_code == 0
    assert runner.invoke(app, ["run", "--run-dir", str(run_dir), "--clinician", "offline/screener", "--patient",
                               "offline/patient", "--turns", "2"]).exit_code == 0
    before = _manifest(run_dir)["prompt_texts"]
    (run_dir / "manifest.json").write_text("{broken", encoding="utf-8")
    rebuilt = runner.invoke(app, ["status", "--run-dir", str(run_dir), "--rebuild-manifest"])
    assert rebuilt.exit_code == 0, rebuilt.output
    after = _manifest(run_dir)["prompt_texts"]
    assert {name: entry["file"] for name, entry in after["templates"].items()} == \
        {name: entry["file"] for name, entry in before["templates"].items()}
    assert after["rendered"]["clinician.minimal"]["file"] == before["rendered"]["clinician.minimal"]["file"]
    shown = runner.invoke(app, ["show", "P00000.offline__screener.minimal.prompted.t0", "--run-dir", str(run_dir)],
                          env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and "You are a mental health clinician" in shown.output
