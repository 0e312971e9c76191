"""litellm's price table read without importing litellm: the extract prices every linear entry of the
direct providers exactly as litellm does, is cached by version, and a damaged cache is remade."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest

from intake_eval.llm import price_table
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.litellm_backend import cache_prices, call_cost, import_litellm
from intake_eval.llm.providers import PROVIDERS

DIRECT_PROVIDERS = set(PROVIDERS) | {"anthropic"}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    price_table.price_extract.cache_clear()
    price_table.table_entry.cache_clear()
    yield tmp_path / "intake-eval"
    price_table.price_extract.cache_clear()
    price_table.table_entry.cache_clear()


def test_the_extract_is_made_without_importing_litellm_and_cached_by_version(tmp_path):
    code = ("import sys\nfrom intake_eval.llm.price_table import price_extract, table_entry\n"
            "entry = table_entry('together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo')\n"
            "print(entry['linear'], entry['input_cost_per_token'] > 0, 'litellm' in sys.modules)")
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    for _ in range(2):  # made, then read from the cache
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert done.stdout.split() == ["True", "True", "False"], done.stderr
    (cached,) = (tmp_path / "intake-eval").iterdir()
    versions = price_table._versions()
    assert cached.name.startswith(f"litellm-prices-{versions[0]}-litellm-{versions[1]}")


def test_a_damaged_cache_is_made_again(fresh_cache):
    price_table.price_extract()
    (cached,) = fresh_cache.iterdir()
    cached.write_text('{"truncated": ')
    price_table.price_extract.cache_clear()
    assert len(price_table.price_extract()) > 1000
    assert len(price_table.price_extract()) == len(price_table.extract(
        __import__("json").loads(price_table.litellm_table_path().read_bytes())))


def test_every_linear_entry_of_a_direct_provider_is_priced_as_litellm_prices_it(fresh_cache):
    litellm = import_litellm()
    checked = 0
    for name, entry in price_table.price_extract().items():
        provider = entry.get("litellm_provider")
        if provider not in DIRECT_PROVIDERS or not entry["linear"]:
            continue
        model = name if name.startswith(f"{provider}/") else f"{provider}/{name}"
        with contextlib.redirect_stdout(io.StringIO()):  # litellm prints a banner for ids it cannot route
            try:
                expected = litellm.cost_per_token(model=model, prompt_tokens=1234, completion_tokens=567)
                info = litellm.get_model_info(model)
            except Exception:
                continue
        spec = ModelSpec(alias="a", model=model)
        assert call_cost(spec, 1234, 0)[0] + call_cost(spec, 0, 567)[0] == pytest.approx(sum(expected), rel=1e-12)
        assert cache_prices(spec) == (info.get("cache_read_input_token_cost"), info.get("cache_creation_input_token_cost"))
        checked += 1
    assert checked > 300


def test_a_tiered_model_is_left_to_litellm(fresh_cache):
    tiered = [name for name, entry in price_table.price_extract().items()
              if not entry["linear"] and entry.get("litellm_provider") == "gemini" and "input_cost_per_token" in entry]
    assert tiered
    entry = price_table.table_entry(f"gemini/{tiered[0]}" if not tiered[0].startswith("gemini/") else tiered[0])
    assert entry and not entry["linear"]
