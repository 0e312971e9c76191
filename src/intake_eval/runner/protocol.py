"""The stage protocol: what every stage of a run folder is, and the one way to run one.

A stage is an object built from validated settings (one pydantic model per stage, shared by its
command's flags and the study config; see ``runner.settings``). Under a ``StageRunner`` (lock,
manifest, guards, model pool) it goes through three steps, always in this order:

- ``plan(runner)``: register the stage with the runner (config guard, leakage guard, prompt
  snapshot) and decide the work still to do — what is already ok on disk is not planned again.
  The plan is the stage's own object (its items, its live totals, its budget).
- ``run(runner, plan)``: do the planned work; records are written as each one finishes. Returns
  whether Ctrl-C stopped it (what was written stays).
- ``finish(runner, plan, interrupted=...)``: compact the record files, close the stage in the
  manifest with counts read from disk, and return the stage's outcome (what its command prints).

``execute_stage`` runs the three steps and raises ``StageInterrupted`` (a ``KeyboardInterrupt``
carrying the outcome) after finishing an interrupted stage, so a command can still say what was
saved and the study stops there. ``run_in_folder`` is the same inside a fresh ``StageRunner``, as a
command runs its stage; the study holds one runner for all of its stages.

A stage that hands its finished records to another as they are written (the run stage to the judge
stage in a study) takes a ``FinishedHandler``: the handler's workers run alongside the stage's own
in one event loop, and a failure in either stops both.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Generic, Protocol, TypeVar

from intake_eval.catalog.schema import Catalog
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths
from intake_eval.llm.registry import ModelsFiles
from intake_eval.runner.stage import StageRunner

PlanT = TypeVar("PlanT")
OutcomeT = TypeVar("OutcomeT")
OutcomeT_co = TypeVar("OutcomeT_co", covariant=True)
RecordT_contra = TypeVar("RecordT_contra", contravariant=True)


class Stage(Protocol[PlanT, OutcomeT_co]):
    """One stage of a run folder: plan → run → finish under a ``StageRunner``."""

    def models(self) -> list[str | None]:
        """Every alias the stage calls: resolved (and their keys checked) before the folder is locked."""
        ...

    def plan(self, runner: StageRunner) -> PlanT:
        """Register the stage with the runner and decide the work still to do."""
        ...

    def run(self, runner: StageRunner, plan: PlanT) -> bool:
        """Do the planned work, writing each record as it finishes; True when Ctrl-C stopped it."""
        ...

    def finish(self, runner: StageRunner, plan: PlanT, *, interrupted: bool) -> OutcomeT_co:
        """Compact the records, close the stage with counts from disk, and say what it did."""
        ...


class StageInterrupted(KeyboardInterrupt, Generic[OutcomeT_co]):
    """Ctrl-C stopped a stage; it was finished (what was written is kept) and ``outcome`` says how far it got."""

    def __init__(self, outcome: OutcomeT_co):
        super().__init__()
        self.outcome = outcome


class FinishedHandler(Protocol[RecordT_contra]):
    """Takes a stage's records as they are written and works on them alongside it (in one event loop)."""

    def take(self, record: RecordT_contra) -> None:
        """One record is on disk (called from the stage's own workers; never blocks)."""
        ...

    def serve(self) -> Awaitable[None]:
        """The handler's workers; they return once ``close`` is called and everything taken is done."""
        ...

    def close(self) -> None:
        """The stage writes nothing more."""
        ...


def execute_stage(runner: StageRunner, stage: Stage[PlanT, OutcomeT]) -> OutcomeT:
    """plan → run → finish; an interrupted stage is finished, then ``StageInterrupted`` is raised."""
    plan = stage.plan(runner)
    interrupted = stage.run(runner, plan)
    outcome = stage.finish(runner, plan, interrupted=interrupted)
    if interrupted:
        raise StageInterrupted(outcome)
    return outcome


def run_in_folder(paths: RunPaths, stage: Stage[Any, OutcomeT], *, kinds: StageKinds, models_file: ModelsFiles = None,
                  use_cache: bool = True, console: Any = None, catalog: Catalog | None = None) -> OutcomeT:
    """One stage as its command runs it: its own ``StageRunner`` on ``paths`` (lock, guards, pool), knowing
    every stage kind of the folder (``kinds``)."""
    with StageRunner(paths, kinds=kinds, models_file=models_file, use_cache=use_cache, console=console,
                     catalog=catalog, models=stage.models()) as runner:
        return execute_stage(runner, stage)

