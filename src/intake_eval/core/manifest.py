"""manifest.json: config, config hashes, versions and source revision, seeds, models per role, per-stage
status, and where the run folder keeps the text of each prompt (``prompt_texts``).

Each stage registers the configuration that determines its records. Resuming a stage under a
different configuration is refused with the keys that differ; ``force`` moves the old stage's
files aside (``superseded/``) and starts the stage over, never mixing records.
"""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from intake_eval.core.errors import (
    ConfigChangedError,
    IntakeEvalError,
    describe_validation_error,
)
from intake_eval.core.records import Usage
from intake_eval.core.schema import SCHEMA_VERSION
from intake_eval.core.source_revision import running_source_revision
from intake_eval.core.store import RunPaths, stable_hash, write_text_atomic
from intake_eval.core.versions import package_versions


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def diff_configs(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable differences: ['turns: 12 → 10', 'patient: gpt-4o → offline/patient']."""
    changes = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "<unset>"), new.get(key, "<unset>")
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            changes.extend(diff_configs(a, b, prefix=f"{name}."))
        elif a != b:
            changes.append(f"{name}: {json.dumps(a, default=str)} → {json.dumps(b, default=str)}")
    return changes


class _StageShape(BaseModel):
    """What readers of a stage entry rely on (other keys pass through untouched)."""

    model_config = ConfigDict(extra="allow")
    status: str = ""
    config: dict[str, Any] = Field(default_factory=dict)
    counts: dict[str, Any] | None = None
    usage: dict[str, Usage] = Field(default_factory=dict)
    retries: dict[str, dict[str, Any]] = Field(default_factory=dict)
    additive_models: dict[str, dict[str, Any]] = Field(default_factory=dict)


class _StudyShape(BaseModel):
    model_config = ConfigDict(extra="allow")
    history: list[dict[str, Any]] = Field(default_factory=list)


class _ManifestShape(BaseModel):
    model_config = ConfigDict(extra="allow")
    stages: dict[str, _StageShape] = Field(default_factory=dict)
    models: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    prompts: dict[str, Any] = Field(default_factory=dict)
    seeds: dict[str, Any] = Field(default_factory=dict)
    study: _StudyShape | None = None


# Where the manifest indexes the run folder's copies of the prompts (runner/prompt_snapshot).
PROMPT_TEXTS = "prompt_texts"

# Marks a manifest, or a model entry in it, rebuilt from the records (``manifest_rebuild``).
REBUILT = "rebuilt_from_records"


def rebuilt_model_entry(model: Any) -> dict[str, Any]:
    """A manifest model entry rebuilt from a record, which names only the provider's model id."""
    return {"model": str(model or ""), REBUILT: True}

MOVE_ASIDE = ("rebuild it from the records with `intake-eval status --rebuild-manifest`, or move it aside to start "
              "a new manifest (records on disk are kept and resumed)")


def parse_manifest(path: Path, text: str) -> dict[str, Any]:
    """manifest.json's text → its data, or one line saying why it cannot be used (unreadable,
    another schema version, or malformed: not an object, a stage that is not an object...)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise IntakeEvalError(f"{path}: manifest is unreadable ({exc.__class__.__name__}); {MOVE_ASIDE}") from None
    if not isinstance(data, dict):
        raise IntakeEvalError(f"{path}: manifest is malformed (a JSON {type(data).__name__}, expected an object); "
                              f"{MOVE_ASIDE}")
    version = data.get("schema_version", 0)
    if version != SCHEMA_VERSION:
        raise IntakeEvalError(
            f"{path}: run folder has schema_version {version}, this intake-eval reads {SCHEMA_VERSION}; "
            "use a new --run-dir (or the matching intake-eval version)")
    try:
        _ManifestShape.model_validate(data)
    except ValidationError as error:
        raise IntakeEvalError(f"manifest is malformed: {describe_validation_error(error, path)}; {MOVE_ASIDE}") from None
    return data


class Manifest:
    """Read-modify-write of manifest.json. Only the process holding the run lock writes it."""

    def __init__(self, paths: RunPaths):
        self.paths = paths
        self.data: dict[str, Any] = self._load()

    def _load(self) -> dict[str, Any]:
        path = self.paths.manifest
        if not path.exists():
            self._warn_if_records_without_manifest()
            return {
                "schema_version": SCHEMA_VERSION,
                "run_name": self.paths.root.name,
                "created": now_iso(),
                "versions": package_versions(),
                "stages": {},
                "models": {},
                "prompts": {},
                "seeds": {},
            }
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise IntakeEvalError(f"{path}: manifest is unreadable ({exc.__class__.__name__}); {MOVE_ASIDE}") from None
        data = parse_manifest(path, text)
        data.setdefault("stages", {})
        return data

    def _warn_if_records_without_manifest(self) -> None:
        """Records but no manifest.json (deleted or lost): a new manifest starts, and the configuration
        that made the records can no longer be checked. Say so instead of resuming silently."""
        paths = self.paths
        # (profiles.jsonl alone is fine: copying a profile set into a fresh run folder is a normal start.)
        found = [*paths.conversation_files(), *paths.judgment_files()]
        if found:
            import warnings

            warnings.warn(
                f"{paths.manifest} is missing but {len(found)} record file(s) are here; starting a new manifest. "
                "Records on disk are resumed as if made with this configuration: if they were not, "
                "use a new --run-dir", stacklevel=3)

    def save(self) -> None:
        self.data["updated"] = now_iso()
        self.data["versions"] = package_versions()
        revision = running_source_revision()
        if revision is None:  # installed from a wheel: no revision is claimed
            self.data.pop("source", None)
        else:
            self.data["source"] = revision
        write_text_atomic(self.paths.manifest, json.dumps(self.data, indent=2, sort_keys=True, default=str) + "\n")

    # ------------------------------------------------------------ stages

    def stage(self, name: str) -> dict[str, Any]:
        return self.data["stages"].setdefault(name, {})

    def begin_stage(self, name: str, config: dict[str, Any], *, force: bool = False,
                    outputs: Sequence[Path] = ()) -> str:
        """Register (or verify) a stage's configuration. Returns its config hash.

        A changed config is refused unless ``force``, which moves ``outputs`` to superseded/.
        """
        config_hash = stable_hash(config)
        stage = self.stage(name)
        old_hash = stage.get("config_hash")
        if old_hash and old_hash != config_hash:
            changes = diff_configs(stage.get("config", {}), config)
            if not force:
                raise ConfigChangedError(
                    f"{self.paths.root}: the {name} stage on disk was made with a different configuration "
                    f"({'; '.join(changes) or 'hash differs'}); rerun with the same settings, use another --run-dir, "
                    "or pass --force to start this stage over (old files move to superseded/)"
                )
            self.supersede(name, outputs)
            stage.clear()
        stage.update(
            {
                "config": config,
                "config_hash": config_hash,
                "status": "running",
                "started": stage.get("started") or now_iso(),
                "last_started": now_iso(),
            }
        )
        self.data["config_hash"] = stable_hash({k: v.get("config_hash") for k, v in sorted(self.data["stages"].items())})
        self.save()
        return config_hash

    def supersede(self, name: str, outputs: Iterable[Path]) -> None:
        target = self.paths.superseded_dir / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        for path in outputs:
            if path.exists():
                target.mkdir(parents=True, exist_ok=True)
                shutil.move(str(path), str(target / path.name))

    def finish_stage(self, name: str, *, status: str = "done", counts: dict[str, int] | None = None,
                     usage: dict[str, Usage] | None = None, extra: dict[str, Any] | None = None) -> None:
        stage = self.stage(name)
        stage["status"] = status
        stage["finished"] = now_iso()
        if counts is not None:
            stage["counts"] = counts
        if usage is not None:
            stage["usage"] = {key: value.model_dump() for key, value in usage.items()}
        if extra:
            stage.update(extra)
        self.save()

    # ------------------------------------------------------------ reading and amending one stage

    def stage_config(self, name: str) -> dict[str, Any]:
        """The configuration a stage registered ({} when the stage is not in the manifest)."""
        stage = self.data["stages"].get(name)
        return dict(stage.get("config") or {}) if isinstance(stage, dict) else {}

    def stage_config_hash(self, name: str) -> str | None:
        stage = self.data["stages"].get(name)
        return stage.get("config_hash") if isinstance(stage, dict) else None

    def config_hashes(self, *, leaving_out: str | None = None) -> dict[str, str | None]:
        """Stage name → config hash of every stage (but ``leaving_out``)."""
        return {name: stage.get("config_hash") for name, stage in self.data["stages"].items()
                if name != leaving_out and isinstance(stage, dict)}

    def stage_status(self, name: str) -> str | None:
        stage = self.data["stages"].get(name)
        return stage.get("status") if isinstance(stage, dict) else None

    def additive_models(self, name: str, role: str) -> dict[str, dict[str, Any]]:
        """Alias → guarded spec of a role whose aliases a stage gains over resumes (its clinicians)."""
        return dict((self.stage(name).get("additive_models") or {}).get(role) or {})

    def add_additive_models(self, name: str, role: str, specs: dict[str, dict[str, Any]]) -> None:
        self.stage(name).setdefault("additive_models", {}).setdefault(role, {}).update(specs)

    def record_stage_pid(self, name: str, pid: int) -> None:
        """The process that last began a stage (a ``running`` stage whose process is gone was interrupted)."""
        self.stage(name)["pid"] = pid

    def amend_stage_config(self, name: str, config: dict[str, Any], *, mark: str) -> None:
        """Replace a stage's config by an addition to it (no records change), recording ``mark: true`` in the
        stage so the amendment is visible."""
        self.stage(name).update({"config": config, "config_hash": stable_hash(config), mark: True})

    # ------------------------------------------------------------ provenance

    def model_entries(self, role: str) -> list[dict[str, Any]]:
        """The manifest's model entries of one role ({'alias', 'model', params...}); [] when none."""
        entries = (self.data.get("models") or {}).get(role)
        return [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []

    def roles(self) -> list[str]:
        """Every role that has model entries, sorted."""
        return sorted(self.data.get("models") or {})

    def record_models(self, role: str, specs: list[dict[str, Any]]) -> None:
        """specs: [{'alias', 'model', 'params'}] — never an api key, only the key variable's name."""
        self.data.setdefault("models", {})[role] = specs

    @property
    def version(self) -> str | None:
        """The intake-eval version that last saved the manifest."""
        return (self.data.get("versions") or {}).get("intake-eval")

    @property
    def source(self) -> dict[str, Any] | None:
        """The source revision (commit, dirty) that last saved the manifest; None when installed from a wheel."""
        return self.data.get("source")

    def record_structured_output(self, states: dict[str, dict[str, Any]]) -> None:
        """Which response_format each endpoint took, kept across invocations: the newest answer wins, and an
        endpoint that has not answered yet (level None) never overwrites what an earlier one learned."""
        known = self.data.setdefault("structured_output", {})
        known.update({endpoint: state for endpoint, state in states.items()
                      if state["level"] is not None or endpoint not in known})

    def record_primary_judge(self, label: str) -> None:
        """The folder's primary judge: the first judge label ever begun keeps the place."""
        self.data.setdefault("judges", {}).setdefault("primary", label)

    def primary_judge(self) -> str | None:
        return (self.data.get("judges") or {}).get("primary")

    def record_prompt_texts(self, name: str, used: dict[str, dict[str, dict[str, Any]]]) -> None:
        """The prompt snapshot's entries a stage uses (kind → key → entry): the stage names the versions it
        uses, the manifest's ``prompt_texts`` the latest of each."""
        self.stage(name)[PROMPT_TEXTS] = used
        known = self.data.setdefault(PROMPT_TEXTS, {})
        for kind, entries in used.items():
            known.setdefault(kind, {}).update(entries)

    # ------------------------------------------------------------ the study section

    def record_study(self, config_file: str, config: dict[str, Any], shard: dict[str, Any] | None) -> None:
        """The study config this folder runs (``study``: config, its hash, the shard), its history kept."""
        study = self.data.setdefault("study", {})
        study.update({"config_file": config_file, "config": config, "study_config_hash": stable_hash(config)})
        if shard is not None:
            study["shard"] = shard
        study.setdefault("history", [])

    def add_study_history(self, entry: dict[str, Any]) -> None:
        """One invocation of the study; ``last_run`` repeats the newest."""
        study = self.data.setdefault("study", {})
        study.setdefault("history", []).append(entry)
        study["last_run"] = entry

    def record_prompts(self, hashes: dict[str, str]) -> None:
        self.data.setdefault("prompts", {}).update(hashes)

    def record_seed(self, name: str, seed: int) -> None:
        self.data.setdefault("seeds", {})[name] = seed
