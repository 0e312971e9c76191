"""Static-first prompts: consecutive calls of one role share a byte-identical prefix (compared on the
serialized messages a loopback server received), and Anthropic-bound requests carry valid
``cache_control`` breakpoints as litellm sends them to the Messages API."""

from __future__ import annotations

import asyncio
import itertools
import json
import re

from intake_eval.core.prompts import PROMPTS_DIR
from intake_eval.interview.conversation import (
    Participants,
    PlannedConversation,
    run_conversation,
)
from intake_eval.judge.judging import judge_conversation
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.pool import ModelPool
from intake_eval.llm.prompt_cache import MAX_BREAKPOINTS, with_breakpoints
from intake_eval.llm.retry import RetryPolicy
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.helpers.judgment_builders import conversation, profile

FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, deadline_s=10)
# Long enough turns that every judge prefix passes Anthropic's minimum cacheable length.
LONG = " ".join(["I keep going over the same worries at night and it wears me out during the day."] * 30)
CONVO = conversation([
    ("How have you been sleeping?", "I lie awake for hours before I finally drift off. " + LONG),
    ("Do you drink to help you sleep?", "A few glasses of wine most nights, more at weekends. " + LONG),
    ("What would help you feel better?", "I don't know, maybe more time off. " + LONG),
])
PROFILE = profile()  # hidden: insomnia, alcohol_use


def _judge_answer(body: dict) -> str:
    text = json.dumps(body.get("messages") or body.get("contents"))
    turn = int(re.search(r"Label turn (\d+) only", text).group(1))
    hidden = ["insomnia", "alcohol_use"]
    return json.dumps({"turn": turn, "reasoning": "r", "question_type": "other", "patient_faithful": True,
                       "domains": [{"domain": d, "reasoning": "r", "asked_about": False, "disclosed": False}
                                   for d in hidden]})


def _judge(server: FakeOpenAIServer, model: str):
    spec = ModelSpec(alias="j", model=model, api_base=server.url, temperature=0.0, max_tokens=1000, timeout_s=5.0)
    with ModelPool({"j": spec}, retry_policy=FAST) as pool:
        return asyncio.run(judge_conversation(CONVO, PROFILE, pool.get("j"), "per-turn"))


def test_consecutive_judge_requests_share_a_byte_identical_prefix():
    with FakeOpenAIServer(lambda body, i: Reply(content=_judge_answer(body))) as server:
        judgment = _judge(server, "openai/fake-judge")
        bodies = list(server.requests)
    assert judgment.status == "ok" and len(bodies) == 4  # turns 0..3, sent in turn order
    serialized = [json.dumps(body["messages"]) for body in bodies]
    rules_start = serialized[0][: serialized[0].index("CONVERSATION SO FAR")]
    assert "HIDDEN DOMAINS" in rules_start and all(s.startswith(rules_start) for s in serialized)
    for k in range(3):
        assert f"Label turn {k} only" in serialized[k]
        tail = serialized[k][serialized[k].index("\\nLabel turn"):]
        shared = serialized[k][: len(serialized[k]) - len(tail)]
        assert serialized[k + 1].startswith(shared)  # everything but the one-line question is reused
        assert len(tail) < 200 and len(shared) > 0.9 * len(serialized[k])


def _conversation(clinician_server: FakeOpenAIServer, patient_server: FakeOpenAIServer,
                  clinician_model: str = "openai/fake-clinician", formulation: bool = False):
    specs = {"clin": ModelSpec(alias="clin", model=clinician_model, api_base=clinician_server.url, timeout_s=5.0),
             "pat": ModelSpec(alias="pat", model="openai/fake-patient", api_base=patient_server.url, timeout_s=5.0)}
    item = PlannedConversation.of(make_profile(), clinician="clin", max_turns=4, formulation=formulation)
    with ModelPool(specs, retry_policy=FAST) as pool:
        participants = Participants(clinician=pool.get("clin"), patient=pool.get("pat"), patient_alias="pat")
        return asyncio.run(run_conversation(item, participants))


def _growing(bodies: list[dict]) -> None:
    """Each request's messages are the previous request's messages plus the new exchange."""
    for before, after in itertools.pairwise(bodies):
        previous = json.dumps(before["messages"])[:-1]  # without the closing bracket
        assert json.dumps(after["messages"]).startswith(previous)
        assert len(after["messages"]) == len(before["messages"]) + 2


def test_consecutive_clinician_and_patient_requests_share_a_byte_identical_prefix():
    clinician_lines = [f"Question {n}: how has your sleep been this week?" for n in range(1, 5)]
    with FakeOpenAIServer(lambda body, i: Reply(content=clinician_lines[min(i, 3)])) as clinician, \
            FakeOpenAIServer(lambda body, i: Reply(content=f"Patient answer {i}.")) as patient:
        convo = _conversation(clinician, patient)
        clinician_bodies, patient_bodies = list(clinician.requests), list(patient.requests)
    assert convo.status == "ok" and len(convo.turns) == 4
    assert len(clinician_bodies) == 4 and len(patient_bodies) == 5  # opening + 4 replies
    _growing(clinician_bodies)
    _growing(patient_bodies)
    # the study's minimal clinician prompt, word for word, first
    minimal = (PROMPTS_DIR / "clinician_minimal.j2").read_text().strip()
    assert all(body["messages"][0] == {"role": "system", "content": minimal} for body in clinician_bodies)


def _cache_blocks(body: dict) -> list[tuple[str, int]]:
    """(where, characters of prompt before and including the block) for every cache_control block,
    in Anthropic's request order: system blocks, then message content blocks."""
    out, seen = [], 0
    system = body.get("system") or []
    parts = [("system", block) for block in (system if isinstance(system, list) else [{"text": system}])]
    for message in body["messages"]:
        content = message["content"]
        parts += [(message["role"], block) for block in (content if isinstance(content, list) else [{"text": content}])]
    for where, block in parts:
        seen += len(block.get("text", ""))
        if "cache_control" in block:
            assert block["cache_control"] == {"type": "ephemeral"}
            out.append((where, seen))
    return out


def _prefix_text(body: dict, upto: int) -> str:
    system = body.get("system") or []
    texts = [b.get("text", "") for b in (system if isinstance(system, list) else [{"text": system}])]
    for message in body["messages"]:
        content = message["content"]
        texts += [b.get("text", "") for b in (content if isinstance(content, list) else [{"text": content}])]
    return "".join(texts)[:upto]


def test_anthropic_judge_requests_carry_valid_breakpoints():
    with FakeOpenAIServer(lambda body, i: Reply(content=_judge_answer(body), usage={
            "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0})) as server:
        judgment = _judge(server, "anthropic/claude-sonnet-4-5")
        bodies, paths = list(server.requests), list(server.paths)
    assert judgment.status == "ok" and all(path.endswith("/messages") for path in paths)
    for k, body in enumerate(bodies):
        blocks = _cache_blocks(body)
        assert len(blocks) <= MAX_BREAKPOINTS and (blocks or k == 0)  # turn 0 is below the minimum
        assert all(chars / 3 >= 1024 for _, chars in blocks)  # each prefix reaches the minimum
        text = "".join(b["text"] for b in body["messages"][0]["content"])
        assert f"Label turn {k} only" in text and text.startswith("You are an expert clinical rater")
        if k > 1:  # this request re-reads the prefix the previous one marked last (its write point)
            previous = bodies[k - 1]
            written = _prefix_text(previous, _cache_blocks(previous)[-1][1])
            assert any(_prefix_text(body, chars) == written for _, chars in blocks)


def test_anthropic_conversation_requests_carry_breakpoints_on_the_growing_history():
    clinician_lines = [f"Question {n}: {LONG}" for n in range(1, 5)]
    with FakeOpenAIServer(lambda body, i: Reply(content=clinician_lines[min(i, 3)])) as clinician, \
            FakeOpenAIServer(lambda body, i: Reply(content=f"Patient answer {i}. {LONG}")) as patient:
        convo = _conversation(clinician, patient, clinician_model="anthropic/claude-sonnet-4-5")
        bodies = list(clinician.requests)
    assert convo.status == "ok" and len(bodies) == 4
    minimal = (PROMPTS_DIR / "clinician_minimal.j2").read_text().strip()
    for k, body in enumerate(bodies):
        system = body["system"] if isinstance(body["system"], str) else "".join(b["text"] for b in body["system"])
        assert system == minimal  # short: below the minimum, so no breakpoint on it
        blocks = _cache_blocks(body)
        assert len(blocks) <= MAX_BREAKPOINTS and all(where != "system" for where, _ in blocks)
        if k >= 1:  # the history is long enough: the whole prompt is marked for the next call
            assert blocks and blocks[-1][1] == len(_prefix_text(body, 10**9))
        if k >= 2:  # and the previous call's whole prompt is marked, so it is read back
            previous = bodies[k - 1]
            assert any(_prefix_text(body, chars) == _prefix_text(previous, 10**9) for _, chars in blocks)


def test_breakpoints_respect_the_limits():
    spec = ModelSpec(model="anthropic/claude-sonnet-4-5")
    long = "x" * 4000
    messages = [{"role": "user", "content": long * 3}]
    points = tuple((0, n) for n in range(3100, 12001, 1000))  # nine candidates
    sent = with_breakpoints(spec, messages, points)
    blocks = sent[0]["content"]
    marked = [b for b in blocks if "cache_control" in b]
    assert len(marked) == MAX_BREAKPOINTS and "".join(b["text"] for b in blocks) == long * 3
    # the first (static) and the latest three are kept
    ends = []
    total = 0
    for block in blocks:
        total += len(block["text"])
        if "cache_control" in block:
            ends.append(total)
    assert ends == [3100, 9100, 10100, 11100]
    # below the minimum: nothing marked; other providers: the messages untouched
    assert with_breakpoints(spec, [{"role": "user", "content": "short"}], ((0, 5),)) == [{"role": "user", "content": "short"}]
    assert with_breakpoints(ModelSpec(model="openai/gpt-4o"), messages, points) is messages
    haiku = ModelSpec(model="anthropic/claude-haiku-4-5")
    assert with_breakpoints(haiku, messages, ((0, 6000),)) == messages  # 2,000 tokens < Haiku 4.5's 4,096
