"""The stage runner: every command and the study run their stages through it.

One ``StageRunner`` is one invocation on a run folder. It owns, once for every stage:
- the models: aliases resolved (offline names checked, keys preflighted before any work);
- the run lock and the manifest (nothing else writes manifest.json);
- the config guard: a stage's config plus the *resolved* spec of every model it uses and the
  hashes of its prompts; a change is refused naming the difference, ``force`` supersedes;
- the prompt snapshot: the text of every template the stage uses and each role's rendered prompt,
  kept in the run folder by content hash (``prompt_snapshot``);
- the leakage guard (the generator plays no other role);
- the model pool (response cache in the run folder, offline participants built on demand);
- provider problems as they happen: the first of each kind per endpoint on the console (and in the
  stage log), and which structured-output level each endpoint answered (manifest
  ``structured_output``: endpoint → level and the levels it refused);
- Ctrl-C around the event loop, and the finish: status, counts, and usage summed from the records
  on disk (every invocation and kill included); retries go to the append-only stage log.

A stage is a function of its inputs that the runner hands a pool; only the store touches files.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, TypeVar

from rich.markup import escape

from intake_eval.catalog.schema import Catalog
from intake_eval.catalog.snapshot import run_catalog
from intake_eval.core.calls import ledger_figures
from intake_eval.core.errors import ConfigChangedError
from intake_eval.core.manifest import REBUILT, Manifest, diff_configs, now_iso
from intake_eval.core.prompts import prompt_hashes
from intake_eval.core.records import Usage
from intake_eval.core.store import RunPaths, append_record
from intake_eval.core.no_follow import refuse_symlink
from intake_eval.core.run_lock import RunLock
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.usage import (
    retry_totals,
    stage_aliases,
    subtract_retry_stats,
)
from intake_eval.llm.base import ModelSpec, public_api_base
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.registry import (
    ModelsFiles,
    load_model_specs,
    preflight,
    resolve_spec,
)
from intake_eval.runner.leakage import (
    GENERATOR_ROLE,
    assert_generator_is_held_out,
    assert_no_generator_leak,
)
from intake_eval.runner.prompt_snapshot import RenderedPrompt, record_prompt_texts
from intake_eval.simulated import OfflineParticipants, check_offline_name, check_offline_role

T = TypeVar("T")

# Spec fields that change what a model answers: guarded per role (rpm, timeouts and prices do not).
GUARDED_SPEC_FIELDS = ("model", "api_base", "temperature", "max_tokens", "reasoning", "extra_params")


def guarded_spec(spec: ModelSpec) -> dict[str, Any]:
    """What an alias means, for the config guard. The api_base is compared whole — scheme, host, port
    and path (two servers on one machine are told apart by their port) — with credentials redacted.
    An embedded local/ server has no api_base in its spec: it may come back on another port."""
    guarded = {name: getattr(spec, name) for name in GUARDED_SPEC_FIELDS}
    if spec.api_base:
        guarded["api_base"] = public_api_base(spec.api_base)
    return guarded


class StageRunner:
    """``with StageRunner(paths, ...) as runner:`` → ``begin`` a stage, ``run`` its coroutine, ``finish``."""

    def __init__(self, paths: RunPaths, *, kinds: StageKinds, models_file: ModelsFiles = None, use_cache: bool = True,
                 console: Any = None, catalog: Catalog | None = None,
                 models: Iterable[str | None] = ()):
        self.paths = paths
        self.kinds = kinds  # every stage kind: what any stage of the folder kept and cost
        self.use_cache = use_cache
        self.console = console
        self._catalog = catalog
        self.specs = load_model_specs(models_file)
        self.manifest: Manifest | None = None
        self._pool: ModelPool | None = None
        self._lock: RunLock | None = None
        self._stages: list[str] = []
        self._begun: list[tuple[str, dict[str, list[str]]]] = []  # stage → role → aliases, for the call ledger
        self._retries_logged: dict[str, dict[str, Any]] = {}
        self._started = time.monotonic()
        self._resolved: dict[str, ModelSpec] = {}
        self.resolve(models)  # a bad alias or a missing key fails here, before the lock touches the folder

    @property
    def catalog(self) -> Catalog:
        """The catalog given, else the run folder's own copy (``<run>/catalog/``), else the shipped one."""
        if self._catalog is None:
            self._catalog = run_catalog(self.paths.root)
        return self._catalog

    # ------------------------------------------------------------ models

    def resolve(self, names: Iterable[str | None]) -> dict[str, ModelSpec]:
        """Aliases → resolved specs, every missing key named before any work starts."""
        fresh = {}
        for name in dict.fromkeys(name for name in names if name):
            if name not in self._resolved and name not in fresh:
                fresh[name] = resolve_spec(name, self.specs)
                check_offline_name(fresh[name].model)
        preflight(list(fresh.values()))  # every missing key variable named at once
        self._resolved.update(fresh)
        return {name: self._resolved[name] for name in dict.fromkeys(name for name in names if name)}

    @property
    def pool(self) -> ModelPool:
        if self._pool is None:
            self._pool = ModelPool(self.specs, cache_path=self.paths.cache_db, use_cache=self.use_cache,
                                   offline=OfflineParticipants(lambda: self.catalog), on_notice=self._provider_notice,
                                   ledger_path=self.paths.calls)
            if self._pool.ledger is not None:
                for name, roles in self._begun:
                    self._pool.ledger.begun(name, roles)
        return self._pool

    def _provider_notice(self, message: str) -> None:
        """A provider problem worth telling the user now (the pool says each kind once per endpoint)."""
        if self.console is not None:
            self.console.print(f"[yellow]provider[/]: {escape(message)}")
        self.log({"event": "provider_notice", "message": message})

    # ------------------------------------------------------------ lock and manifest

    def __enter__(self) -> "StageRunner":
        self._lock = RunLock(self.paths).acquire()
        try:
            for linked in self.paths.linked_record_files():  # refused before any work, not at the first append
                refuse_symlink(linked, "record file")
            self.manifest = Manifest(self.paths)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._stages:
                self._log_retries(None)
                self.log({"event": "invocation", "stages": self._stages,
                          "seconds": round(time.monotonic() - self._started, 2)})
            if self._pool is not None:
                self._pool.close()
            if self._stages and exc[0] is None:
                self._keep_ledger_figures()
        finally:
            self._release()

    def _keep_ledger_figures(self) -> None:
        """Keep the call ledger's figures beside it once no call of this invocation can add a line, so
        ``status`` reads them instead of every call (the ledger holds a line per request and answer)."""
        facts = self.kinds.folder_facts(self.paths, keep=True)
        ledger_figures(self.paths, facts)
        facts.save()

    def _log_retries(self, stage: str | None) -> None:
        """Append the HTTP attempts and retries made since the last entry (a kill loses at most these)."""
        if self._pool is None:
            return
        delta = {}
        for alias, stats in self._pool.retry_stats().items():
            fresh = subtract_retry_stats(stats, self._retries_logged.get(alias, {}))
            if fresh.get("attempts"):
                delta[alias] = fresh
            self._retries_logged[alias] = stats
        if delta:
            self.log({"event": "retries", "stage": stage, "retries": delta})

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def log(self, entry: dict[str, Any]) -> None:
        """Append one entry to the run's stage log (never rewritten: survives every kill)."""
        append_record(self.paths.stage_log, {"time": now_iso(), "pid": os.getpid(), **entry})

    # ------------------------------------------------------------ stages

    def _open_ledger(self) -> None:
        """Start the call ledger of a folder that has none: its first line says what the records already on
        disk cost (a folder made before the ledger existed), which the billed figure counts as an estimate."""
        if self.paths.calls.exists():
            return
        before, known = self.folder_spend()
        append_record(self.paths.calls, {"event": "opened", "time": now_iso(), "records_cost_usd": before,
                                         "cost_known": known})

    def folder_spend(self) -> tuple[float, bool]:
        """Dollars the records of every stage of the folder cost, and whether every price was known."""
        return self.kinds.run_folder_spend(self.paths, self._manifest().data)

    def begin(self, name: str, config: Mapping[str, Any], *, force: bool = False, outputs: Iterable[Path] = (),
              models: Mapping[str, Mapping[str, ModelSpec]] | None = None, additive: Iterable[str] = (),
              prompts: Iterable[str] = (), rendered: Iterable[RenderedPrompt] = (), seed: int | None = None) -> str:
        """Register (or verify) a stage. ``models`` is role → alias → resolved spec; a role in
        ``additive`` may gain aliases on a resume (clinicians), but an alias it already has may not
        change meaning. ``prompts`` (template names) and ``rendered`` (each role's prompt as the stage
        renders it) are snapshotted into the run folder once the stage is accepted. Returns the
        stage's config hash."""
        manifest = self._manifest()
        self.kinds.kind_of(name, self.paths.manifest)  # a stage no kind reads would cost a silent $0
        prompts = list(prompts)
        self._open_ledger()
        models = {role: dict(aliases) for role, aliases in (models or {}).items()}
        for role, aliases in models.items():
            for spec in aliases.values():
                check_offline_role(role, spec)
        self._guard_leakage(models)
        additive = set(additive)
        full = dict(config)
        full["models"] = {role: {alias: guarded_spec(spec) for alias, spec in sorted(aliases.items())}
                          for role, aliases in sorted(models.items()) if role not in additive}
        if prompts:
            full["prompts"] = prompt_hashes(sorted(set(prompts)))
        outputs = list(outputs)
        force = self._guard_additive(name, models, additive, force, outputs)
        config_hash = manifest.begin_stage(name, full, force=force, outputs=outputs)
        self.pool.open_cache()  # on its thread, while the stage is recorded and its first requests are made
        for role in additive:
            manifest.add_additive_models(name, role, {alias: guarded_spec(spec)
                                                      for alias, spec in models.get(role, {}).items()})
        manifest.record_stage_pid(name, os.getpid())
        for role, aliases in models.items():
            self._record_models(role, aliases)
        if prompts:
            manifest.record_prompts(prompt_hashes(sorted(set(prompts))))
        record_prompt_texts(manifest, name, self.paths, prompts, rendered)
        if seed is not None:
            manifest.record_seed(name, seed)
        manifest.save()
        self._stages.append(name)
        roles = {role: sorted(aliases) for role, aliases in models.items()}
        self._begun.append((name, roles))
        if self._pool is not None and self._pool.ledger is not None:
            self._pool.ledger.begun(name, roles)  # the calls of these roles and aliases are this stage's
        self.log({"event": "begin", "stage": name, "config_hash": config_hash,
                  "version": manifest.version, "source": manifest.source})
        return config_hash

    def _guard_leakage(self, models: Mapping[str, Mapping[str, ModelSpec]]) -> None:
        manifest = self._manifest()
        for role, aliases in models.items():
            if role == GENERATOR_ROLE:
                for alias, spec in aliases.items():
                    assert_generator_is_held_out(manifest, alias, spec.model)
            else:
                assert_no_generator_leak(manifest, role, list(aliases), specs=aliases)

    def _guard_additive(self, name: str, models: Mapping[str, Mapping[str, ModelSpec]], additive: set[str],
                        force: bool, outputs: list[Path]) -> bool:
        """An alias already in the stage must keep its meaning (model, api_base, parameters). An entry
        rebuilt from the records knows only the provider id: the full spec replaces it."""
        manifest = self._manifest()
        changes = []
        for role in sorted(additive):
            known = manifest.additive_models(name, role)
            for alias, spec in sorted(models.get(role, {}).items()):
                old = known.get(alias)
                if old is not None and not old.get(REBUILT) and old != guarded_spec(spec):
                    changes += diff_configs(old, guarded_spec(spec), prefix=f"{role} {alias}: ")
        if changes and not force:
            raise ConfigChangedError(
                f"{self.paths.root}: the {name} stage on disk was made with different models "
                f"({'; '.join(changes)}); use the same models file, another --run-dir, or pass --force to start "
                "this stage over (old files move to superseded/)")
        if changes:  # forced: the changed stage starts over, like any other config change
            self._manifest().supersede(name, outputs)
        return force

    def _record_models(self, role: str, aliases: Mapping[str, ModelSpec]) -> None:
        manifest = self._manifest()
        known = {str(entry.get("alias", "")): entry for entry in manifest.model_entries(role)}
        for alias, spec in aliases.items():
            known[alias] = {**known.get(alias, {}), "alias": alias, **spec.public_dict()}
        manifest.record_models(role, [known[alias] for alias in sorted(known)])

    def run(self, work: Callable[[], Coroutine[Any, Any, T]], display: Any = None) -> tuple[T | None, bool]:
        """Run a stage's coroutine; Ctrl-C keeps what is written. Returns (result, interrupted)."""
        try:
            with display if display is not None else nullcontext():
                return asyncio.run(work()), False
        except KeyboardInterrupt:
            return None, True

    def finish(self, name: str, *, status: str, counts: Mapping[str, Any] | None = None,
               extra: Mapping[str, Any] | None = None) -> dict[str, Usage]:
        """Close a stage: status, counts, and its usage summed from the records on disk. The facts of the
        record files it read are kept beside them (core/record_facts), so ``status`` need not read them."""
        manifest = self._manifest()
        stage = manifest.stage(name)
        facts = self.kinds.folder_facts(self.paths, keep=True)
        usage = self.kinds.stage_facts(self.paths, name, stage, facts).usage
        facts.save()
        self._log_retries(name)
        extra = {**(extra or {}), "retries": retry_totals(self.paths, stage_aliases(stage))}
        if self._pool is not None:
            stopped = self._pool.stopped_endpoints()
            if stopped:
                extra["stopped_endpoints"] = stopped
            manifest.record_structured_output(self._pool.structured_output())
        manifest.finish_stage(name, status=status, counts=dict(counts) if counts is not None else None,
                              usage=usage, extra=extra)
        self.log({"event": "finish", "stage": name, "status": status})
        return usage

    def _manifest(self) -> Manifest:
        if self.manifest is None:
            raise RuntimeError("StageRunner used outside its `with` block")
        return self.manifest
