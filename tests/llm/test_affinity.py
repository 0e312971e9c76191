"""Replicas and conversation affinity: an alias listing several api_base replicas, each conversation's
calls on one of them, conversations spread, the routing key sent as router headers and as OpenAI's
prompt_cache_key — against real loopback servers through `intake-eval run` and the backend."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Conversation
from intake_eval.core.store import RunPaths, append_record, iter_records
from intake_eval.llm.affinity import ROUTER_HEADERS, ReplicaChooser, conversation_scope, routing_key
from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend
from intake_eval.llm.registry import read_models_file
from tests.helpers.convo_helpers import make_profile
from tests.helpers.fakeserver import FakeOpenAIServer, Reply
from tests.commands.test_run_loopback import invoke, study_server

PROFILES = 9


def test_a_key_always_picks_the_same_replica_and_keys_spread_over_all():
    replicas = ["http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"]
    chooser = ReplicaChooser(replicas)
    keys = [routing_key(f"P{n:05d}.doc.minimal.prompted.t0") for n in range(600)]
    chosen = {key: chooser.choose(key) for key in keys}
    assert all(ReplicaChooser(replicas).choose(key) == replica for key, replica in chosen.items())
    counts = {replica: list(chosen.values()).count(replica) for replica in replicas}
    assert min(counts.values()) > 150, counts  # 200 each on average
    # Taking a replica away moves only the conversations it served
    fewer = ReplicaChooser(replicas[:2])
    assert all(fewer.choose(key) == replica for key, replica in chosen.items() if replica != replicas[2])


def test_requests_outside_a_conversation_take_the_replicas_in_turn():
    chooser = ReplicaChooser(["http://a/v1", "http://b/v1"])
    assert [chooser.choose(None) for _ in range(4)] == ["http://a/v1", "http://b/v1", "http://a/v1", "http://b/v1"]


def _setup(tmp_path: Path, servers: list[FakeOpenAIServer]) -> tuple[Path, Path]:
    run_dir = tmp_path / "run"
    for index in range(1, PROFILES + 1):
        profile = make_profile(index)
        profile.demographics.name = f"Daniel{index}"
        append_record(RunPaths(run_dir).profiles, profile)
    replicas = json.dumps([server.url for server in servers])
    models = tmp_path / "models.yaml"
    models.write_text("models:\n"
                      f"  doc: {{model: openai/doc, api_base: {replicas}}}\n"
                      f"  pat: {{model: openai/pat, api_base: {replicas}}}\n")
    return run_dir, models


def test_each_conversation_sticks_to_one_replica_and_conversations_spread(tmp_path):
    with ExitStack() as stack:
        servers = [stack.enter_context(study_server()) for _ in range(3)]
        run_dir, models = _setup(tmp_path, servers)
        result = invoke("--clinician", "doc", "--patient", "pat", "--turns", "3", "--models", str(models),
                        "--run-dir", str(run_dir))
        assert result.exit_code == 0, result.output
    records = list(iter_records(RunPaths(run_dir).conversations("doc"), Conversation))
    assert len(records) == PROFILES and all(record.ok for record in records)
    keys = {routing_key(record.conversation_id) for record in records}
    served_by: dict[str, set[int]] = defaultdict(set)
    for number, server in enumerate(servers):
        assert server.requests, "every replica serves some conversations"
        for headers in server.headers:
            sent = {name.lower(): value for name, value in headers.items()}
            values = {sent.get(name.lower()) for name in ROUTER_HEADERS}
            assert len(values) == 1 and values <= keys, values  # both router headers carry the conversation's key
            served_by[values.pop()].add(number)
        assert all("prompt_cache_key" not in body for body in server.requests)  # a server of your own: headers only
    assert set(served_by) == keys
    assert all(len(replicas) == 1 for replicas in served_by.values()), served_by
    # 1 opening + 3 patient replies + 3 clinician turns per conversation, all at the conversation's replica
    assert sum(len(server.requests) for server in servers) == 7 * PROFILES
    manifest = json.loads((run_dir / "manifest.json").read_text())
    shown = [entry for entry in manifest["models"]["clinician"] if entry["alias"] == "doc"][0]
    assert shown["api_base"] == [server.url for server in servers]


def test_openai_gets_the_key_as_prompt_cache_key(monkeypatch):
    with FakeOpenAIServer(lambda body, index: Reply(content="Hello.")) as server:
        monkeypatch.setenv("INTAKE_EVAL_BASE_URL_OPENAI", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        spec = ModelSpec(alias="gpt", model="openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY")
        backend = ProviderBackend(spec)

        async def ask() -> None:
            try:
                with conversation_scope("P00001.gpt.minimal.prompted.t0"):
                    await backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
                await backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
            finally:
                await backend.aclose()

        asyncio.run(ask())
    inside, outside = server.requests
    assert inside["prompt_cache_key"] == routing_key("P00001.gpt.minimal.prompted.t0")
    assert "prompt_cache_key" not in outside
    assert not any(name.lower() in {h.lower() for h in ROUTER_HEADERS} for name in server.headers[0])


def test_a_list_of_replicas_is_checked_url_by_url(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  doc: {model: openai/doc, api_base: [http://a:1/v1, http://b:2/v1]}\n"
                      "  one: {model: openai/doc, api_base: [http://a:1/v1]}\n")
    specs = read_models_file(models)
    assert specs["doc"].api_bases == ("http://a:1/v1", "http://b:2/v1")
    assert specs["one"].api_base == "http://a:1/v1"  # a list of one is the single-string form
    models.write_text("models:\n  doc: {model: openai/doc, api_base: [http://a:1/v1, 'http://u:secretpw@b:2/v1']}\n")
    with pytest.raises(IntakeEvalError, match=r"models\.doc\.api_base\[1\]: holds credentials") as raised:
        read_models_file(models)
    assert "secretpw" not in str(raised.value)
    models.write_text("models:\n  doc: {model: openai/doc, api_base: [http://a:1/v1, http://a:1/v1]}\n")
    with pytest.raises(IntakeEvalError, match="same replica twice"):
        read_models_file(models)


def test_the_litellm_route_keeps_a_conversation_on_one_replica_with_its_headers():
    with ExitStack() as stack:
        servers = [stack.enter_context(FakeOpenAIServer(lambda body, index: Reply(content="Hello."))) for _ in range(2)]
        spec = ModelSpec(alias="doc", model="openai/doc", api_base=tuple(server.url for server in servers))
        backend = ProviderBackend(spec, client="litellm")
        conversations = [f"P{n:05d}.doc.minimal.prompted.t0" for n in range(8)]

        async def ask() -> None:
            try:
                for conversation in conversations:
                    with conversation_scope(conversation):
                        for _ in range(2):
                            await backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
            finally:
                await backend.aclose()

        asyncio.run(ask())
    where: dict[str, set[int]] = defaultdict(set)
    for number, server in enumerate(servers):
        for headers in server.headers:
            sent = {name.lower(): value for name, value in headers.items()}
            where[sent["x-session-id"]].add(number)
            assert sent["x-smg-routing-key"] == sent["x-session-id"]
    assert set(where) == {routing_key(conversation) for conversation in conversations}
    assert all(len(replicas) == 1 for replicas in where.values())
    assert all(server.requests for server in servers)
