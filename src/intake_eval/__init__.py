"""intake-eval: measure how well LLM clinicians run a mental-health intake interview."""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
