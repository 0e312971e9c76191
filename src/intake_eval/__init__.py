"""intake-eval: measure how well LLM clinicians run a mental-health intake interview.

``intake_eval.load_run(path)`` opens a run folder in Python (see intake_eval/api.py); it is
imported on first use so ``import intake_eval`` stays light. ``__version__`` is read from the
installed package's metadata (pyproject.toml is its only source).
"""

SCHEMA_VERSION = 1
_API_NAMES = ("load_run", "Run", "RunRecords")


def __getattr__(name: str):
    if name == "__version__":
        from importlib.metadata import version

        return version("intake-eval")
    if name in _API_NAMES:
        import importlib

        return getattr(importlib.import_module("intake_eval.api"), name)
    raise AttributeError(f"module 'intake_eval' has no attribute {name!r}")
