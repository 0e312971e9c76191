"""Offline participants (alias prefix ``offline/``): deterministic, instant, no network.

They are simulated participants used for the demo, tests and baselines, behind the same
``ChatModel.complete`` call shape as real providers. Every backend is constructed as
``Backend(spec, catalog)``. The mapping is explicit (no classes loaded from dotted strings);
imports happen on first use so the CLI stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from intake_eval.catalog import Catalog
    from intake_eval.models.base import ChatModel, ModelSpec


def _generator(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.models.offline.generator import OfflineGenerator

    return OfflineGenerator(spec, catalog)


def _patient(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.models.offline.patient import OfflinePatient

    return OfflinePatient(spec, catalog)


def _screener(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.models.offline.screener import OfflineScreener

    return OfflineScreener(spec, catalog)


def _anchored(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.models.offline.anchored import OfflineAnchored

    return OfflineAnchored(spec, catalog)


def _judge(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.models.offline.judge import OfflineJudge

    return OfflineJudge(spec, catalog)


OFFLINE_BACKENDS: dict[str, Callable[["ModelSpec", "Catalog"], "ChatModel"]] = {
    "generator": _generator,
    "patient": _patient,
    "screener": _screener,
    "anchored": _anchored,
    "judge": _judge,
}

OFFLINE_ROLES: dict[str, str] = {
    "generator": "generator (template renderer for the generate stage)",
    "patient": "patient (state-tracked; discloses a hidden domain only when asked about it)",
    "screener": "clinician (reviews domains systematically: the ceiling baseline)",
    "anchored": "clinician (stays on the presenting concern, pivots to advice: the floor baseline)",
    "judge": "judge (rule-based per-turn labels from the text)",
}


def build_offline(spec: "ModelSpec", catalog: "Catalog") -> "ChatModel":
    from intake_eval.errors import IntakeEvalError

    name = spec.model.removeprefix("offline/")
    if name not in OFFLINE_BACKENDS:
        raise IntakeEvalError(
            f"unknown offline model '{spec.model}'; choose one of: "
            + ", ".join(f"offline/{key}" for key in OFFLINE_BACKENDS)
        )
    return OFFLINE_BACKENDS[name](spec, catalog)
