"""The one reader of API keys.

A key is read from its environment variable at the moment a request is built and handed straight
to the request: it is never stored on an object that is logged, cached or written to a run folder.
Which variable an alias needs is the registry's business (``api_key_env``, filled in from the
provider's default); this module only reads it.
"""

from __future__ import annotations

import os

from intake_eval.llm.base import ModelCallError, ModelSpec

NO_KEY = "not-needed"  # OpenAI-compatible servers expect some Bearer value; local ones ignore it


def key_is_set(variable: str) -> bool:
    """Whether the variable holds a key (blank counts as unset)."""
    return bool(os.environ.get(variable, "").strip())


def read_api_key(spec: ModelSpec, key_env: str | None) -> str:
    """The key in ``key_env`` for this call; ``NO_KEY`` when the route needs none (a server you run).
    An unset variable fails the call as fatal, naming the alias and the variable, never a value."""
    if key_env is None:
        return NO_KEY
    value = os.environ.get(key_env, "").strip()
    if not value:
        raise ModelCallError(
            f"model '{spec.alias or spec.model}' needs the environment variable {key_env}, which is not set",
            kind="fatal")
    return value


def key_to_redact(spec: ModelSpec) -> str | None:
    """The alias's key as set, to be masked wherever a server echoes it into an error text; None when unset."""
    value = os.environ.get(spec.api_key_env, "").strip() if spec.api_key_env else ""
    return value or None


def sdk_api_key(spec: ModelSpec) -> str | None:
    """The key handed to an SDK (litellm): the alias's variable; a placeholder for a server of your
    own, which must never receive the user's provider key by default; None lets the SDK read its
    provider's default variable."""
    if spec.api_key_env:
        return read_api_key(spec, spec.api_key_env)
    return NO_KEY if spec.api_base else None
