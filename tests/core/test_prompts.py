"""Compiled templates kept in the user's cache folder: the text rendered is the same with the cache or
without it, an edited template is compiled again, and a cache folder that cannot be made or written
changes nothing but speed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from intake_eval.core import prompts

PROFILE_FREE = "clinician_minimal"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    prompts._environment.cache_clear()
    yield tmp_path / "cache"
    prompts._environment.cache_clear()


def _compiled_files(cache_home: Path) -> list[Path]:
    return sorted(cache_home.glob("intake-eval/templates-jinja2-*/*.cache"))


def test_a_template_renders_the_same_from_its_cached_bytecode(cache_home: Path) -> None:
    fresh = prompts.render_prompt(PROFILE_FREE)
    assert _compiled_files(cache_home), "the compiled template was not kept"
    prompts._environment.cache_clear()  # a new process: the template comes from the cache
    assert prompts.render_prompt(PROFILE_FREE) == fresh


def test_an_edited_template_is_compiled_again(cache_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    template = folder / f"{PROFILE_FREE}.j2"
    template.write_text("first text\n")
    with prompts.use_prompts(folder):
        assert prompts.render_prompt(PROFILE_FREE) == "first text"
        prompts._environment.cache_clear()
        template.write_text("second text\n")
        assert prompts.render_prompt(PROFILE_FREE) == "second text"


def test_an_unusable_cache_folder_only_costs_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    prompts._environment.cache_clear()
    try:
        assert prompts.render_prompt(PROFILE_FREE)
    finally:
        prompts._environment.cache_clear()
