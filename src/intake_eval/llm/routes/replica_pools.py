"""The HTTP routes' connections: one pool per ``api_base`` replica of an alias, and the replica each
conversation sticks to (llm/affinity.py's rendezvous choice), closed together."""

from __future__ import annotations

from collections.abc import Sequence

from intake_eval.llm.affinity import ReplicaChooser
from intake_eval.llm.openai_http import OpenAICompatibleClient


class ReplicaPools:
    def __init__(self, bases: Sequence[str], timeout_s: float):
        self.chooser = ReplicaChooser(bases)
        self._clients = {base: OpenAICompatibleClient(base, timeout_s) for base in bases}

    def pick(self, key: str | None) -> tuple[str, OpenAICompatibleClient]:
        """The replica for this routing key (None: the replicas in turn) and its connection pool."""
        base = self.chooser.choose(key)
        return base, self._clients[base]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
