from __future__ import annotations

import os
from pathlib import Path

import pytest

# Offline safety for every test: litellm must never reach the network or read a .env file.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


@pytest.fixture
def fake_server():
    from tests.helpers.fakeserver import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server


# Files that take minutes start first, so a worker is not left running one alone at the end.
SLOWEST_FIRST = ("test_real_llm.py", "test_chaos_kill.py", "test_fault_lines.py")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        name = item.path.name
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=rank)  # stable: the order within each file is kept
