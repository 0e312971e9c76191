"""The leakage guard: the model that generated a run's profiles may not play any other role in it.

The generate stage records its generator in manifest.json (models.generator); later stages call
``assert_no_generator_leak`` before they start, and generate refuses a generator the manifest
already lists as patient, clinician, tracker or judge. Offline participants are exempt: they are
rule-based and share no weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from intake_eval.core.errors import IntakeEvalError

if TYPE_CHECKING:
    from intake_eval.core.manifest import Manifest
    from intake_eval.llm.base import ModelSpec

GENERATOR_ROLE = "generator"


def _identities(entries: Any) -> set[str]:
    """Aliases and provider ids of the models recorded for one role (offline ones excluded)."""
    names: set[str] = set()
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        for key in ("alias", "model"):
            value = entry.get(key)
            if isinstance(value, str) and value and not value.startswith("offline/"):
                names.add(value)
    return names


def generator_identities(manifest: "Manifest") -> set[str]:
    return _identities(manifest.model_entries(GENERATOR_ROLE))


def assert_no_generator_leak(manifest: "Manifest", role: str, aliases: Iterable[str | None],
                             specs: Mapping[str, "ModelSpec"] | None = None) -> None:
    """Refuse to let the run's generator serve as ``role`` (by alias or by provider model id)."""
    generator = generator_identities(manifest)
    if not generator:
        return
    for alias in aliases:
        if not alias:
            continue
        names = {alias}
        if specs is not None and alias in specs:
            names.add(specs[alias].model)
        if names & generator:
            raise IntakeEvalError(
                f"{role} '{alias}' generated the profiles in {manifest.paths.root} (generator: "
                f"{', '.join(sorted(generator))}); the generator may not also be the {role} (leakage guard). "
                "Choose another model, or generate the profiles with a different --generator in a new --run-dir"
            )


def assert_generator_is_held_out(manifest: "Manifest", alias: str, model: str) -> None:
    """generate's side of the guard: the generator may not be a model already used in another role."""
    if alias.startswith("offline/") and model.startswith("offline/"):
        return
    for role in manifest.roles():
        if role == GENERATOR_ROLE:
            continue
        if {alias, model} & _identities(manifest.model_entries(role)):
            raise IntakeEvalError(
                f"--generator {alias}: this run already uses {model} as {role} (manifest.json); the generator "
                "must be held out from every other role (leakage guard). Choose another --generator or --run-dir"
            )
