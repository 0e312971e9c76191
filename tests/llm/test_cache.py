"""The response cache opens its database on a thread: an answer put is read back, a file that is no
database is one error line at the first statement, and closing an unusable cache is quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.llm.cache import ResponseCache, cache_key

SPEC = ModelSpec(alias="doc", model="together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo")


def test_an_answer_put_is_read_back_from_a_new_cache(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "run" / "cache.sqlite")
    key = cache_key(SPEC, ChatRequest(messages=[{"role": "user", "content": "hello"}]))
    assert cache.get(key) is None
    cache.put(key, SPEC.model, ChatResult(text="Could you tell me more?", model=SPEC.model))
    cache.close()
    again = ResponseCache(tmp_path / "run" / "cache.sqlite")
    hit = again.get(key)
    again.close()
    assert hit is not None and hit.text == "Could you tell me more?"


def test_a_file_that_is_no_database_is_one_error_line_at_first_use(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database file, " * 100)
    cache = ResponseCache(path)
    with pytest.raises(IntakeEvalError, match="cannot open the response cache"):
        cache.get("any-key")
    cache.close()
