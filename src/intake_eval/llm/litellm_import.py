"""litellm, imported once and configured for offline use (every module that needs it asks here)."""

from __future__ import annotations

import functools
import os


@functools.cache  # once: setting logger levels clears every logger's cache, on each call otherwise
def import_litellm():
    """Import litellm offline-safe: local price map, no .env loading, no banner on stdout."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import logging

    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    # Its warnings (e.g. "event loop changed" when a pool serves a second asyncio.run) are not the
    # user's business; our own errors say what went wrong.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return litellm
