"""Fuzzed bad input (hypothesis, bounded and derandomized): study configs, phenotype YAML, model
alias files and CLI flags. Every case ends with a clear `error: …` line and exit code 2 — no
traceback, no other exception — and writes nothing."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from intake_eval.cli import app

PROJECT = Path(__file__).resolve().parents[2]
# INTAKE_EVAL_FUZZ_EXAMPLES=500 INTAKE_EVAL_FUZZ_RANDOM=1 for a longer, randomized hunt.
FUZZ = settings(max_examples=int(os.environ.get("INTAKE_EVAL_FUZZ_EXAMPLES", "40")), deadline=None,
                derandomize=not os.environ.get("INTAKE_EVAL_FUZZ_RANDOM"), database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

VALID_STUDY: dict[str, Any] = {
    "name": "fuzz", "seed": 1, "profiles": {"n": 2, "mode": "stratified"}, "generator": "offline/generator",
    "patient": {"model": "offline/patient", "mode": "tracked"}, "clinicians": ["offline/screener"],
    "judges": ["offline/judge"], "turns": 2, "concurrency": 2,
}
VALID_MODELS: dict[str, Any] = {"models": {"local": {"model": "openai/served", "api_base": "http://127.0.0.1:9/v1",
                                                      "temperature": 0.5, "max_tokens": 100, "rpm": 60}}}

# Values that are wrong somewhere: wrong types, out of range, unknown names, odd text.
junk = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**12, max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=30),
    st.lists(st.one_of(st.integers(), st.text(max_size=8)), max_size=3),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=6)), max_size=3),
    st.sampled_from(["", " ", "offline/nope", "nope-alias", "../../etc/passwd", "-1", "1e309", "nan", "∞", "\x00"]),
)


def clean_output(result) -> list[str]:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return [line for line in result.output.split("\n") if line.strip()]  # what a terminal shows as lines


def assert_one_line_error(result) -> None:
    lines = clean_output(result)
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output


def mutate(base: dict[str, Any], data: st.DataObject, keys: list[str]) -> dict[str, Any]:
    """Replace, drop or add a few (possibly nested) keys."""
    doc = yaml.safe_load(yaml.safe_dump(base))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(keys)).split(".")
        parent = doc
        for part in path[:-1]:
            if not isinstance(parent.get(part), dict):
                parent[part] = {}
            parent = parent[part]
        action = data.draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "replace":
            parent[path[-1]] = data.draw(junk)
        elif action == "drop":
            parent.pop(path[-1], None)
        else:
            parent[data.draw(st.text(min_size=1, max_size=8))] = data.draw(junk)
    return doc


def as_text(doc: Any, data: st.DataObject) -> str:
    """YAML of the document, sometimes damaged as text (cut short, a stray character, not a mapping)."""
    text = yaml.safe_dump(doc, allow_unicode=True)
    damage = data.draw(st.sampled_from(["none", "none", "cut", "char", "scalar", "binary"]))
    if damage == "cut":
        return text[: data.draw(st.integers(0, max(0, len(text) - 1)))]
    if damage == "char":
        at = data.draw(st.integers(0, len(text)))
        return text[:at] + data.draw(st.sampled_from([":", "[", "{", "\t", "'", "- ", "&a", "*b", "!!python/name:os.system"])) + text[at:]
    if damage == "scalar":
        return data.draw(st.sampled_from(["42", "- a\n- b", "just text", "null", "[]"]))
    if damage == "binary":
        return "\udcff\x00\x01 not yaml"
    return text


# ---------------------------------------------------------------- study configs

STUDY_KEYS = ["name", "seed", "profiles.n", "profiles.mode", "generator", "patient.model", "patient.mode",
              "patient.tracker", "clinicians", "judges", "conditions", "trials", "turns", "judge_mode", "concurrency",
              "budget", "cache", "qc.enabled", "qc.max_leak_rate", "formulation"]


def study_config_is_accepted(path: Path) -> bool:
    """The library's own verdict (any exception = rejected; the CLI must then say so in one line)."""
    from intake_eval.study.pipeline import load_study_config, resolve_roles

    try:
        config = load_study_config(path)
        resolve_roles(config, None)
        return config.profiles.n * len(config.clinicians) * config.trials <= 50 and config.turns <= 20
    except Exception:  # noqa: BLE001 - the verdict only; the CLI call below must handle every such case
        return False


@FUZZ
@given(data=st.data())
def test_fuzzed_study_configs_fail_with_one_line_and_write_nothing(data):
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "study.yaml"
        text = as_text(mutate(VALID_STUDY, data, STUDY_KEYS), data)
        config.write_bytes(text.encode("utf-8", errors="surrogateescape"))
        if study_config_is_accepted(config):
            return  # a valid (or harmless) mutation: running it is other tests' business
        run_dir = Path(tmp) / "run"
        for command in (["study", str(config), "--run-dir", str(run_dir)], ["estimate", str(config)]):
            assert_one_line_error(CliRunner().invoke(app, command))
        assert not run_dir.exists()


# ---------------------------------------------------------------- phenotype YAML

PHENOTYPE_KEYS = ["id", "name", "alignment", "population_weight", "presenting", "hidden_required",
                  "hidden_optional", "conflicts", "demographics.age", "demographics.sex_weights",
                  "demographics.life_context", "principal_diagnosis", "principal_diagnosis.domain", "sources"]


@pytest.fixture(scope="module")
def catalog_copy(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    for path in (PROJECT / "phenotypes").glob("*.yaml"):
        shutil.copy(path, folder / path.name)
    return folder


@FUZZ
@given(data=st.data())
def test_fuzzed_phenotype_yaml_is_reported_not_crashed_on(catalog_copy, data):
    target = catalog_copy / "adult_adhd.yaml"
    original = target.read_bytes()
    try:
        doc = mutate(yaml.safe_load(original), data, PHENOTYPE_KEYS)
        target.write_bytes(as_text(doc, data).encode("utf-8", errors="surrogateescape"))
        before = sorted(p.name for p in catalog_copy.iterdir())
        result = CliRunner().invoke(app, ["phenotypes", "validate", str(catalog_copy)])
        lines = clean_output(result)
        assert result.exit_code in (0, 2), result.output
        if result.exit_code == 2:  # one `error:` line, then one indented line per problem (file: field: why)
            assert lines[0].startswith("error: "), result.output
            assert all(line.startswith("  ") for line in lines[1:]), result.output
        assert sorted(p.name for p in catalog_copy.iterdir()) == before
    finally:
        target.write_bytes(original)


# ---------------------------------------------------------------- model alias files

MODEL_KEYS = ["models", "models.local", "models.local.model", "models.local.api_base", "models.local.temperature",
              "models.local.max_tokens", "models.local.rpm", "models.local.tpm", "models.local.max_concurrency",
              "models.local.timeout_s", "models.local.api_key_env", "models.local.reasoning",
              "models.local.input_cost_per_token", "models.local.extra_params", "models.other"]


@FUZZ
@given(data=st.data())
def test_fuzzed_model_alias_files_fail_with_one_line_and_write_nothing(data):
    from intake_eval.llm.registry import load_model_specs

    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.yaml"
        models.write_bytes(as_text(mutate(VALID_MODELS, data, MODEL_KEYS), data).encode("utf-8", errors="surrogateescape"))
        try:
            load_model_specs(models)
        except Exception:  # noqa: BLE001 - rejected; the CLI must say so in one line
            rejected = True
        else:
            rejected = False
        if not rejected:
            return  # accepted: nothing to check here
        run_dir = Path(tmp) / "run"
        assert_one_line_error(CliRunner().invoke(app, ["models", "--models", str(models)]))
        assert_one_line_error(CliRunner().invoke(app, ["run", "--clinician", "local", "--patient", "offline/patient",
                                                       "--models", str(models), "--run-dir", str(run_dir)]))
        assert not run_dir.exists()


# ---------------------------------------------------------------- CLI flags

bad_count = st.one_of(st.integers(max_value=0).map(str), st.sampled_from(["abc", "1.5", "", "1e3", "--", "0x10", "½"]))
# a flag value typed on one line (a newline inside it would be echoed as a second line)
one_line = st.text(alphabet=st.characters(blacklist_characters="\n"), min_size=1, max_size=12)
bad_name = st.sampled_from(["offline/nope", "no-such-alias", "", " ", "openai/", "/", "offline/"])


@FUZZ
@given(data=st.data())
def test_fuzzed_cli_flags_fail_with_one_line_and_write_nothing(data):
    commands = {
        "generate --n": lambda: ["generate", "--n", data.draw(bad_count), "--stratified"],
        "generate --seed": lambda: ["generate", "--n", "2", "--seed", data.draw(st.sampled_from(["x", "1.5", ""]))],
        "generate --concurrency": lambda: ["generate", "--n", "2", "--concurrency", data.draw(bad_count)],
        "run --turns": lambda: ["run", "--clinician", "offline/screener", "--turns", data.draw(bad_count)],
        "run --concurrency": lambda: ["run", "--clinician", "offline/screener", "--concurrency", data.draw(bad_count)],
        "run --clinician": lambda: ["run", "--clinician", data.draw(bad_name), "--patient", "offline/patient"],
        "run --patient-mode": lambda: ["run", "--clinician", "offline/screener", "--patient-mode",
                                       data.draw(one_line.filter(lambda s: s.strip() not in ("prompted", "tracked")))],
        "run --condition": lambda: ["run", "--clinician", "offline/screener", "--condition",
                                    data.draw(st.sampled_from(["nope", "", "../minimal", "minimal/.."]))],
        "judge --judge": lambda: ["judge", "--judge", data.draw(bad_name)],
        "show": lambda: ["show", data.draw(one_line)],
        "unknown flag": lambda: [data.draw(st.sampled_from(["generate", "run", "judge", "report", "status"])),
                                 "--" + data.draw(st.text(alphabet="abcxyz-", min_size=2, max_size=8))],
    }
    name = data.draw(st.sampled_from(sorted(commands)))
    args = commands[name]()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        result = CliRunner().invoke(app, [*args, "--run-dir", str(run_dir)])
        assert_one_line_error(result)
        assert not run_dir.exists() or not any(run_dir.rglob("*")), (name, args, sorted(run_dir.rglob("*")))
