"""Offline participants (alias prefix ``offline/``): deterministic, instant, no network.

They are simulated participants used for the demo, tests and baselines, behind the same
``ChatModel.complete`` call shape as real providers. Every backend is constructed as
``Backend(spec, catalog)``; the mapping is explicit (no classes loaded from dotted strings).
``OfflineParticipants(catalog)`` is what a model pool is handed to build them.
"""

from __future__ import annotations

from collections.abc import Callable

from intake_eval.catalog.load import load_catalog
from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR, Catalog
from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import ChatModel, ModelSpec
from intake_eval.simulated.anchored import OfflineAnchored
from intake_eval.simulated.drifting import OfflineDrifting
from intake_eval.simulated.generator import OfflineGenerator
from intake_eval.simulated.judge import OfflineJudge
from intake_eval.simulated.patient import OfflinePatient
from intake_eval.simulated.screener import OfflineScreener

OFFLINE_BACKENDS: dict[str, Callable[[ModelSpec, Catalog], ChatModel]] = {
    "generator": OfflineGenerator,
    "patient": OfflinePatient,
    "screener": OfflineScreener,
    "anchored": OfflineAnchored,
    "drifting": OfflineDrifting,
    "judge": OfflineJudge,
}

OFFLINE_ROLES: dict[str, str] = {
    "generator": "generator (template renderer for the generate stage)",
    "patient": "patient (state-tracked; discloses a hidden domain only when asked about it)",
    "screener": "clinician (reviews domains systematically: the ceiling baseline)",
    "anchored": "clinician (stays on the presenting concern, pivots to advice: the floor baseline)",
    "drifting": "clinician (asks a seeded subset of areas, drifts into follow-ups, pivots to advice at a seeded turn)",
    "judge": "judge (rule-based per-turn labels from the text)",
}


def check_offline_name(name: str) -> None:
    """Refuse an ``offline/<name>`` that is no simulated participant, naming the ones there are."""
    if name.startswith("offline/") and name.removeprefix("offline/") not in OFFLINE_BACKENDS:
        raise IntakeEvalError(f"unknown offline model '{name}'; choose one of: "
                              + ", ".join(f"offline/{key}" for key in OFFLINE_BACKENDS))


def check_offline_role(role: str, spec: ModelSpec) -> None:
    """Refuse an offline participant in a role it cannot play: only offline/patient answers as a patient
    (a simulated clinician would interview itself and the run would still say "ok")."""
    name = spec.model.removeprefix("offline/")
    if role == "patient" and spec.is_offline and name != "patient" and name in OFFLINE_ROLES:
        alias = spec.alias or spec.model
        shown = alias if alias == spec.model else f"{alias} ({spec.model})"
        raise IntakeEvalError(f"patient '{shown}' is the offline {OFFLINE_ROLES[name].split(' (')[0]}; "
                              "it cannot play the patient: use offline/patient or a model alias")


def build_offline(spec: ModelSpec, catalog: Catalog) -> ChatModel:
    check_offline_name(spec.model)
    return OFFLINE_BACKENDS[spec.model.removeprefix("offline/")](spec, catalog)


class OfflineParticipants:
    """The pool's builder for ``offline/…`` models. ``catalog`` is a catalog or a function giving
    one (called on first use, so a run without offline models never loads it); None → the shipped."""

    def __init__(self, catalog: Catalog | Callable[[], Catalog] | None = None):
        self._catalog = catalog

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(DEFAULT_CATALOG_DIR)
        elif callable(self._catalog):
            self._catalog = self._catalog()
        return self._catalog

    def __call__(self, spec: ModelSpec) -> ChatModel:
        return build_offline(spec, self.catalog)
