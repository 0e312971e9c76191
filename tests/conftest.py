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
    from tests.fakeserver import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        yield server
