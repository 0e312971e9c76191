"""Hand-built profiles and small ChatModel doubles for conversation tests (no network)."""

from __future__ import annotations

from intake_eval.core.records import Demographics, DomainDraw, Profile
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec

PHENOMENOLOGY = {
    "depression": "I've felt flat and heavy for months, like the colour has drained out of everything.",
    "insomnia": "SECRET-INSOMNIA I lie awake until three most nights staring at the ceiling.",
    "alcohol_use": "SECRET-ALCOHOL I have four or five beers every night to switch off.",
    "suicidality": "SECRET-SUICIDALITY Sometimes I think everyone would be better off without me.",
    "panic": "SECRET-PANIC Out of nowhere my heart pounds and I think I'm dying.",
}


def make_profile(index: int = 1) -> Profile:
    def draw(domain: str, symptoms: list[str]) -> DomainDraw:
        return DomainDraw(domain=domain, label=domain.replace("_", " "), severity="moderate",
                          symptoms=symptoms, phenomenology=PHENOMENOLOGY[domain])

    return Profile(
        profile_id=f"P{index:05d}", index=index, phenotype="depression_complex",
        presenting=draw("depression", ["low mood most days", "loss of interest"]),
        hidden=[
            draw("insomnia", ["trouble falling asleep", "waking too early"]),
            draw("alcohol_use", ["drinking more than intended", "drinking to cope"]),
            draw("suicidality", ["thoughts that life is not worth living"]),
            draw("panic", ["sudden surges of fear with pounding heart"]),
        ],
        demographics=Demographics(age=38, sex="male", occupation="a teacher", relationship="married", name="Daniel"),
        life_context=["recently moved cities"],
    )


class ScriptedModel:
    """A ChatModel double: answers from a list (then repeats the last) and records every request."""

    def __init__(self, alias: str, replies: list[str | ChatResult] | None = None, model: str = "test/model"):
        self.spec = ModelSpec(alias=alias, model=model)
        self.replies = list(replies or ["ok"])
        self.requests: list[ChatRequest] = []

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, BaseException):
            raise reply
        return reply if isinstance(reply, ChatResult) else ChatResult(text=reply, finish_reason="stop")


def write_generated_profiles(profiles_path, n: int, seed: int = 7) -> list[Profile]:
    """Real profiles: the sampling stages plus the offline generator's render, as `generate` makes them."""
    import asyncio

    from intake_eval.catalog.load import load_catalog
    from intake_eval.core.store import append_record
    from intake_eval.generate.render import render_profile
    from intake_eval.generate.sampling import plan_phenotypes, sample_profile
    from intake_eval.llm.registry import resolve_spec
    from intake_eval.simulated import build_offline

    catalog = load_catalog()
    generator = build_offline(resolve_spec("offline/generator", {}), catalog)
    phenotypes = plan_phenotypes(catalog, n, "stratified", seed)

    async def render_all():
        return [await render_profile(sample_profile(catalog, pheno, index, seed), generator, catalog,
                                     generator="offline/generator")
                for index, pheno in enumerate(phenotypes)]

    profiles = asyncio.run(render_all())
    for profile in profiles:
        append_record(profiles_path, profile)
    return profiles
