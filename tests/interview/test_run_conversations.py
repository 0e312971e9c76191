"""runner.run_conversations on real run-folder files, with ChatModel doubles behind a tiny pool."""

from __future__ import annotations

import asyncio

from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.interview.budget import Budget
from intake_eval.interview.plan import RunSettings, plan_conversations
from intake_eval.interview.stage import compact_conversations, run_conversations
from intake_eval.llm.base import (
    CallUsage,
    ChatRequest,
    ChatResult,
    ModelCallError,
    ModelSpec,
)
from tests.helpers.convo_helpers import make_profile


class EchoModel:
    """Answers every call; optionally fails the clinician of chosen profiles; charges per call."""

    def __init__(self, alias: str, fail_profiles: set[str] = frozenset(), cost: float = 0.0):
        self.spec = ModelSpec(alias=alias, model=f"test/{alias}")
        self.fail_profiles = set(fail_profiles)
        self.cost = cost
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResult:
        self.calls += 1
        await asyncio.sleep(0)
        context = request.context or {}
        if context.get("role") == "clinician":
            if context["conversation_id"].split(".")[0] in self.fail_profiles:
                raise ModelCallError("HTTP 503 after 5 attempts", kind="exhausted")
            return ChatResult(text=f"{self.spec.alias} asks question {context['turn']}?",
                              usage=CallUsage(prompt_tokens=10, completion_tokens=5, cost_usd=self.cost))
        return ChatResult(text=f"reply {context.get('turn')}", usage=CallUsage(cost_usd=self.cost))


class Pool:
    def __init__(self, **models):
        self.models = models

    def get(self, name: str):
        return self.models[name]


def settings(**kwargs) -> RunSettings:
    return RunSettings(clinicians=["doc-a", "doc-b"], patient="pat", turns=3, **kwargs)


def ids(path) -> list[str]:
    return [c.conversation_id for c in iter_records(path, Conversation)]


def test_plan_is_profile_major_with_distinct_trial_ids_and_one_opening_payer():
    profiles = [make_profile(2), make_profile(1)]
    plan = plan_conversations(profiles, settings(trials=2, conditions=["minimal", "screening"]))
    assert len(plan) == 2 * 2 * 2 * 2
    assert plan[0].conversation_id == "P00001.doc-a.minimal.prompted.t0"
    assert plan[1].conversation_id == "P00001.doc-a.screening.prompted.t0"
    assert len({item.conversation_id for item in plan}) == len(plan)
    payers = [item.conversation_id for item in plan if item.records_opening_usage]
    assert payers == [f"P0000{p}.doc-a.minimal.prompted.t{t}" for p in (1, 2) for t in (0, 1)]
    assert len(plan_conversations(profiles, settings(limit=1))) == 2


def test_failures_are_recorded_then_retried_and_resume_skips_finished(tmp_path):
    paths = RunPaths(tmp_path / "run")
    plan = plan_conversations([make_profile(i) for i in range(1, 5)], settings())
    flaky = EchoModel("doc-b", fail_profiles={"P00002"})
    pool = Pool(**{"doc-a": EchoModel("doc-a"), "doc-b": flaky, "pat": EchoModel("pat")})
    seen = []

    totals = asyncio.run(run_conversations(plan, pool, paths=paths, patient="pat", concurrency=3,
                                           on_done=lambda c: seen.append(c.conversation_id)))
    assert (totals.ok, totals.failed, totals.skipped) == (7, 1, 0)
    assert totals.failures == {"model_error": 1}
    assert sorted(seen) == sorted(item.conversation_id for item in plan)
    failed = [c for c in iter_records(paths.conversations("doc-b"), Conversation) if not c.ok]
    assert [c.conversation_id for c in failed] == ["P00002.doc-b.minimal.prompted.t0"]
    assert failed[0].opening and failed[0].turns == [] and "HTTP 503" in failed[0].error

    # The next run: only the failed one runs again (async on_done this time), and it now succeeds.
    flaky.fail_profiles.clear()
    again = []

    async def collect(conversation):
        again.append(conversation.conversation_id)

    totals = asyncio.run(run_conversations(plan, pool, paths=paths, patient="pat", on_done=collect))
    assert (totals.ok, totals.failed, totals.skipped) == (1, 0, 7)
    assert again == ["P00002.doc-b.minimal.prompted.t0"]
    compact_conversations(paths, ["doc-a", "doc-b"])
    assert ids(paths.conversations("doc-b")) == [f"P0000{i}.doc-b.minimal.prompted.t0" for i in range(1, 5)]
    assert all(c.ok and len(c.turns) == 3 for c in iter_records(paths.conversations("doc-b"), Conversation))


def test_budget_stops_launching_new_conversations(tmp_path):
    paths = RunPaths(tmp_path / "run")
    plan = plan_conversations([make_profile(i) for i in range(1, 11)], settings())
    pool = Pool(**{"doc-a": EchoModel("doc-a", cost=0.01), "doc-b": EchoModel("doc-b", cost=0.01),
                   "pat": EchoModel("pat", cost=0.01)})
    # One conversation = 1 opening + 3 clinician + 3 patient calls ≈ $0.07 (the opening is shared).
    budget = Budget(limit=0.25)
    totals = asyncio.run(run_conversations(plan, pool, paths=paths, patient="pat", concurrency=2, budget=budget))
    assert totals.budget_reached
    assert 3 <= totals.ok < len(plan) and totals.failed == 0
    # each conversation reserves the measured mean before it starts: the spend stays within one conversation
    assert 0.25 - 0.08 <= totals.dollars <= 0.25 + 0.08
    written = ids(paths.conversations("doc-a")) + ids(paths.conversations("doc-b"))
    assert len(written) == totals.ok
