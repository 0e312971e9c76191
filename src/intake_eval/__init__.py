"""intake-eval: measure how well LLM clinicians run a mental-health intake interview.

``intake_eval.load_run(path)`` opens a run folder in Python (see intake_eval/api.py); it is
imported on first use so ``import intake_eval`` stays light. ``__version__`` is read from the
installed package's metadata (pyproject.toml is its only source).
"""

from intake_eval.core.schema import SCHEMA_VERSION as SCHEMA_VERSION
from intake_eval.core.schema import package_version

_API_NAMES = ("load_run", "Run", "RunRecords")


def __getattr__(name: str):
    if name == "__version__":
        return package_version()
    if name in _API_NAMES:
        import importlib

        return getattr(importlib.import_module("intake_eval.api"), name)
    raise AttributeError(f"module 'intake_eval' has no attribute {name!r}")
