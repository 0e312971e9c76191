"""The table of stage kinds this intake-eval runs, assembled from the kinds the stages declare.

It sits above every stage folder (its own import-linter layer, just under ``report``) so it may
import each stage's ``kind.py``; the commands, the study and the report build the table here once per
invocation and hand it down to the stage runner, ``status``, folder spend and manifest rebuild.
Adding a stage kind is its ``kind.py`` plus one entry in ``stage_kinds()``.
"""

from __future__ import annotations

from intake_eval.core.stage_kinds import RecordlessKind, StageKinds
from intake_eval.forks.kind import ForkKind
from intake_eval.generate.kind import GenerateKind
from intake_eval.interview.kind import RunKind
from intake_eval.judge.kind import JudgeKind
from intake_eval.metrics.answer_facts import answer_readers
from intake_eval.trust.patient_qc_kind import PatientQCKind

# The study's report step: it registers which stage configurations the report was built from.
REPORT_STAGE = "report"


def stage_kinds() -> StageKinds:
    """Every stage kind: generate, run, forks, judges, patient QC and the study's report step; with the
    answers ``status`` counts kept beside the kinds' own record facts."""
    return StageKinds([GenerateKind(), RunKind(), ForkKind(), JudgeKind(), PatientQCKind(),
                       RecordlessKind(REPORT_STAGE)], answer_readers())
