"""Stage kinds: what the run folder needs to know about each kind of stage, declared by the stage.

A manifest stage entry is one invocation's bookkeeping; what its records are, and what they cost,
belongs to the stage that wrote them. Each stage folder declares a ``StageKind`` (its ``kind.py``):
how its manifest stage names look, which record files it writes and their record model, how the
usage and the finished records of one of its stages are read from disk, and which stages its records
describe when a lost manifest is rebuilt. ``StageKinds`` is the table of them, assembled once in a
layer that may import every stage (``intake_eval.stage_kinds``) and handed down to the stage runner,
``status``, folder spend and manifest rebuild.

This module knows no stage name. A stage in a manifest that no kind claims is refused with one
line naming the stage and the file: it never reads as a stage that cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.record_facts import FactReader, FolderFacts
from intake_eval.core.records import Record, Usage
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import add_usage


class StageKind(Protocol):
    """One kind of stage, as the stage that runs it declares it."""

    @property
    def pattern(self) -> str:
        """How its manifest stage names look, for messages (``<prefix>:<label>``)."""

    def owns(self, stage_name: str) -> bool:
        """Whether a manifest stage of this name is of this kind."""

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        """The record model of ``path`` when it is one of this kind's record files, else None."""

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        """The usage of one of its stages, per model alias, from its records on disk."""

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        """How many of its records are finished ok on disk (None: the stage keeps no records)."""

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        """Manifest stage entries (name → entry) recovered from its records, for a lost manifest."""


@dataclass
class StageFacts:
    """What ``status`` shows of one stage from its records: usage per model alias and records done ok
    (None: the stage keeps no records)."""

    usage: dict[str, Usage]
    done: int | None


@runtime_checkable
class KeepsFacts(Protocol):
    """A stage kind whose records' facts are kept per file (core/record_facts), so its usage and records
    done are read from the kept summaries. A kind without it is read whole each time (``usage``)."""

    def readers(self) -> tuple[FactReader, ...]:
        """What it keeps of its record files."""

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts) -> StageFacts:
        """One of its stages' usage and records done, from its files' summaries."""


class StageKinds:
    """The table of stage kinds: every question about a manifest stage goes to the kind that owns it.
    ``readers``: fact readers of the records beyond the kinds' own (the answers ``status`` counts)."""

    def __init__(self, kinds: Iterable[StageKind], readers: Iterable[FactReader] = ()):
        self.kinds: tuple[StageKind, ...] = tuple(kinds)
        self.extra_readers: tuple[FactReader, ...] = tuple(readers)

    def with_kind(self, kind: StageKind) -> StageKinds:
        """This table and one more kind (a plugin's stage, or a test's)."""
        return StageKinds([*self.kinds, kind], self.extra_readers)

    def readers(self) -> tuple[FactReader, ...]:
        """Every fact reader of the folder's records: each kind's, then the extra ones."""
        own = [reader for kind in self.kinds if isinstance(kind, KeepsFacts) for reader in kind.readers()]
        return (*own, *self.extra_readers)

    def folder_facts(self, paths: RunPaths, *, keep: bool) -> FolderFacts:
        """The folder's record facts as every reader of this table keeps them (``keep``: written back)."""
        return FolderFacts(paths, self.readers(), keep=keep)

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts | None = None) -> StageFacts:
        """Usage per alias and records done of one manifest stage: from kept summaries where its kind keeps
        them (``facts``, else the folder's as kept), else read from its records."""
        kind = self.kind_of(stage_name, paths.manifest)
        if isinstance(kind, KeepsFacts):
            return kind.stage_facts(paths, stage_name, stage, facts or self.folder_facts(paths, keep=False))
        return StageFacts(kind.usage(paths, stage_name, stage), kind.records_done(paths, stage_name, stage))

    def kind_of(self, stage_name: str, where: Path) -> StageKind:
        """The kind that owns a stage; a stage none owns (or several) is refused naming it and ``where``."""
        owners = [kind for kind in self.kinds if kind.owns(stage_name)]
        if len(owners) == 1:
            return owners[0]
        if not owners:
            known = ", ".join(kind.pattern for kind in self.kinds)
            raise IntakeEvalError(f"{where}: stage {stage_name!r} is of no kind this intake-eval knows ({known}); "
                                  "its records and cost cannot be read (a newer intake-eval, or a hand edit?)")
        claimed = ", ".join(kind.pattern for kind in owners)
        raise IntakeEvalError(f"{where}: stage {stage_name!r} is claimed by several stage kinds ({claimed})")

    def stages(self, paths: RunPaths, manifest: Mapping[str, Any]) -> Iterator[tuple[str, StageKind, Mapping[str, Any]]]:
        """(name, kind, entry) of every stage entry of a manifest's data; a malformed entry (not an
        object) is left to the manifest's own validation."""
        stages = manifest.get("stages") or {}
        for name, stage in (stages.items() if isinstance(stages, Mapping) else ()):
            if isinstance(stage, Mapping):
                yield name, self.kind_of(name, paths.manifest), stage

    def records_cost_by_alias(self, paths: RunPaths, manifest: Mapping[str, Any]) -> dict[str, Usage]:
        """Per model alias over every stage: what the kept records cost (the records' cost figure)."""
        total: dict[str, Usage] = {}
        for name, kind, stage in self.stages(paths, manifest):
            for alias, usage in kind.usage(paths, name, stage).items():
                add_usage(total, alias, usage)
        return dict(sorted(total.items()))

    def run_folder_spend(self, paths: RunPaths, manifest: Mapping[str, Any],
                         facts: FolderFacts | None = None) -> tuple[float, bool]:
        """Dollars the records of every stage cost, and whether every price was known."""
        dollars, known = 0.0, True
        facts = facts or self.folder_facts(paths, keep=False)
        for name, _kind, stage in self.stages(paths, manifest):
            for usage in self.stage_facts(paths, name, stage, facts).usage.values():
                dollars += usage.cost_usd
                known = known and usage.cost_known
        return round(dollars, 8), known

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        """Every stage the records on disk describe, with status ``rebuilt`` and its records done."""
        stages: dict[str, dict[str, Any]] = {}
        for kind in self.kinds:
            for name, stage in kind.rebuilt_stages(paths).items():
                done = kind.records_done(paths, name, stage)
                stage.update(status="rebuilt", counts={"done": done} if done is not None else {})
                stages[name] = stage
        return stages

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        """The record model of a run-folder file, from the kind that writes it (None: no kind's records)."""
        for kind in self.kinds:
            model = kind.record_model_of(paths, path)
            if model is not None:
                return model
        return None


class RecordlessKind:
    """A stage of one fixed name that calls no model and keeps no records (a bookkeeping step): it
    costs nothing by construction, has no records done and nothing to rebuild."""

    def __init__(self, stage_name: str):
        self.stage_name = stage_name

    @property
    def pattern(self) -> str:
        return self.stage_name

    def owns(self, stage_name: str) -> bool:
        return stage_name == self.stage_name

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return None

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        return {}

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return None

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        return {}
