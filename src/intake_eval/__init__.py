"""intake-eval: measure how well LLM clinicians run a mental-health intake interview.

``intake_eval.load_run(path)`` opens a run folder in Python (see intake_eval/api.py); it is
imported on first use so ``import intake_eval`` stays light.
"""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
_API_NAMES = ("load_run", "Run", "RunRecords")


def __getattr__(name: str):
    if name in _API_NAMES:
        import importlib

        return getattr(importlib.import_module("intake_eval.api"), name)
    raise AttributeError(f"module 'intake_eval' has no attribute {name!r}")
