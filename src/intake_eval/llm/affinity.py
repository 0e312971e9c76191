"""Conversation affinity: which replica serves a request, and the key a router or cache reads.

An alias may list several ``api_base`` replicas of one model. Every call a conversation makes goes to
the same replica, so the replica's prefix cache keeps the conversation's growing prompt; different
conversations spread over the replicas. The replica is chosen by rendezvous (highest-random-weight)
hashing of the conversation's key: stable across processes and resumes, no shared state, and adding
or removing a replica moves only the conversations that hashed to it.

The conversation is named by the caller that runs it (``conversation_scope`` around the
conversation's calls): a context variable, so every request made inside it — the clinician's, the
patient's, the tracker's, a judge's — carries it without threading it through every signature.
Requests outside any conversation (generation, a model check) have no key and rotate over replicas.

The key sent to servers is a digest of the conversation id, not the id itself (short, fixed length,
and no profile name leaves the machine): OpenAI's ``prompt_cache_key`` body field, and the headers
the two cache-aware routers read for session affinity — ``X-Session-ID`` (vllm-router's
consistent_hash policy, the first of the headers it reads: vllm-project/router
docs/load_balancing/README.md) and ``X-SMG-Routing-Key`` (the SGLang model gateway's
consistent_hashing policy and sticky sessions).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

CONVERSATION_KEY: ContextVar[str | None] = ContextVar("intake_eval_conversation_key", default=None)
ROUTER_HEADERS = ("X-Session-ID", "X-SMG-Routing-Key")
KEY_HEX_DIGITS = 32


def routing_key(conversation_id: str) -> str:
    """The key sent for a conversation: a stable digest of its id."""
    return hashlib.blake2b(conversation_id.encode("utf-8"), digest_size=KEY_HEX_DIGITS // 2).hexdigest()


@contextmanager
def conversation_scope(conversation_id: str) -> Iterator[str]:
    """Every request made inside belongs to this conversation (same replica, same routing key)."""
    key = routing_key(conversation_id)
    token = CONVERSATION_KEY.set(key)
    try:
        yield key
    finally:
        CONVERSATION_KEY.reset(token)


def _weight(key: str, replica: str) -> int:
    digest = hashlib.blake2b(f"{key}\x00{replica}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class ReplicaChooser:
    """Picks one of an alias's replicas per request: by rendezvous hashing of the conversation's key,
    or in turn for a request outside any conversation."""

    def __init__(self, replicas: Sequence[str]):
        if not replicas:
            raise ValueError("a replica chooser needs at least one replica")
        self.replicas = tuple(replicas)
        self._turn = itertools.cycle(self.replicas)

    def choose(self, key: str | None) -> str:
        if len(self.replicas) == 1:
            return self.replicas[0]
        if key is None:
            return next(self._turn)
        return max(self.replicas, key=lambda replica: _weight(key, replica))
