"""Response cache: a rerun or a resumed run makes no repeated paid call.

SQLite in WAL mode (default: the run folder's cache.sqlite), one row per answered request.
The key is the stable_hash of what decides the answer: provider id, api_base, messages,
temperature, max_tokens, response schema, extra provider params and the sample index.
``ChatRequest.context`` is deliberately not part of it (it never reaches a provider).
Each operation is a short synchronous statement under a lock: nothing awaits while the
database is held, so any number of coroutines (and other processes, via WAL) can share it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.store import stable_hash
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec

SCHEMA_VERSION = 1


def cache_key(spec: ModelSpec, request: ChatRequest) -> str:
    retry = {"answer_retry": request.answer_retry} if request.answer_retry else {}  # absent: earlier keys hold
    return stable_hash({
        **retry,
        "v": SCHEMA_VERSION,
        "model": spec.model,
        "api_base": spec.api_base,
        "messages": request.messages,
        "temperature": request.temperature if request.temperature is not None else spec.temperature,
        "max_tokens": request.max_tokens if request.max_tokens is not None else spec.max_tokens,
        "response_schema": request.response_schema,
        "extra_params": spec.extra_params,
        "sample_index": request.sample_index,
    })


class ResponseCache:
    """Opening a cache file that does not exist yet waits on the disk (switching a new database to WAL
    and creating its table sync it, tens of milliseconds), so the database is opened on a thread from
    the moment the cache is made; the first statement waits for it, and a file that cannot be opened
    is said then."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._open_error: Exception | None = None  # raised by the first statement
        self._opening = threading.Thread(target=self._open, name="response-cache-open", daemon=True)
        self._opening.start()

    def _open(self) -> None:
        try:
            db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                "result TEXT NOT NULL, created REAL NOT NULL)"
            )
        except sqlite3.DatabaseError as error:
            self._open_error = IntakeEvalError(f"{self.path}: cannot open the response cache ({error}); "
                                               "delete the file or pass --no-cache")
            return
        except Exception as error:  # anything else, as the caller would have met it opening the file itself
            self._open_error = error
            return
        self._db = db

    def _connection(self) -> sqlite3.Connection:
        self._opening.join()
        if self._open_error is not None:
            raise self._open_error
        assert self._db is not None  # opened without an error
        return self._db

    def get(self, key: str) -> ChatResult | None:
        with self._lock:
            row = self._connection().execute("SELECT result FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        try:
            result = ChatResult.model_validate_json(row[0])
        except ValueError:  # a row from an incompatible version: treat as a miss, overwrite later
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(self, key: str, model: str, result: ChatResult) -> None:
        payload = result.model_dump_json()
        with self._lock:
            self._connection().execute(
                "INSERT OR REPLACE INTO responses (key, model, result, created) VALUES (?, ?, ?, ?)",
                (key, model, payload, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> dict[str, Any]:
        return {"path": str(self.path), "hits": self.hits, "misses": self.misses}

    def close(self) -> None:
        self._opening.join()
        with self._lock:
            if self._db is not None:
                self._db.close()
