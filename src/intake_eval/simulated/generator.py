"""offline/generator: renders a domain's first-person phenomenology from a phrase bank.

Deterministic (seeded by profile, domain and attempt), instant, no network. It quotes every
sampled symptom, so QC passes; it is the generator for the demo, tests and benchmarks. The
phrasing lives in prompts/offline_generator.j2 (rendered once, parsed as YAML).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from intake_eval.core.prompts import render_prompt
from intake_eval.core.yamlfile import parse_yaml
from intake_eval.llm.base import (
    CallUsage,
    ChatRequest,
    ChatResult,
    ModelCallError,
    ModelSpec,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

TEMPLATE = "offline_generator"
_USAGE = CallUsage()


def load_phrase_bank() -> dict[str, Any]:
    return parse_yaml(render_prompt(TEMPLATE), f"prompts/{TEMPLATE}")


def picks_for(key: str) -> tuple[int, int, int]:
    """Three seeded choices from a stable digest (cheaper than a Random per domain at 60,000 renders)."""
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=12).digest()
    return (int.from_bytes(digest[0:4], "big"), int.from_bytes(digest[4:8], "big"), int.from_bytes(digest[8:12], "big"))


def compose(bank: dict[str, Any], label: str, symptoms: list[str], severity: str, is_presenting: bool,
            picks: tuple[int, int, int]) -> str:
    openers = bank["openers_presenting" if is_presenting else "openers_hidden"]
    frames = bank["symptom_frames"]
    closers = bank["severity_closers"][severity]
    parts = [openers[picks[0] % len(openers)].format(label=label)]
    parts += [frames[(picks[1] + i) % len(frames)].format(symptom=s) for i, s in enumerate(symptoms)]
    parts.append(closers[picks[2] % len(closers)])
    return " ".join(parts)


class OfflineGenerator:
    def __init__(self, spec: ModelSpec, catalog: "Catalog"):
        self.spec = spec
        self.catalog = catalog
        self.bank = load_phrase_bank()

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = request.context or {}
        if context.get("role") != "generator" or "profile" not in context or "domain" not in context:
            raise ModelCallError(
                f"{self.spec.alias or self.spec.model} only renders profiles in the generate stage "
                "(it needs the generator context); it cannot play another role",
                kind="fatal",
            )
        profile, draw = context["profile"], context["domain"]
        picks = picks_for(f"offline-generator:{profile.profile_id}:{draw.domain}:{context.get('attempt', 1)}")
        text = compose(self.bank, draw.label, list(draw.symptoms), draw.severity, bool(context.get("is_presenting")), picks)
        return ChatResult(text=text, usage=_USAGE, latency_s=0.0, finish_reason="stop", model=self.spec.model)
