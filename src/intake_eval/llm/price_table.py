"""litellm's price table, read without importing litellm.

litellm ships its model table as a JSON file inside its package
(``model_prices_and_context_window_backup.json``; with ``LITELLM_LOCAL_MODEL_COST_MAP`` set — as
intake-eval sets it — that file *is* the table litellm prices with). Importing litellm to read it
costs seconds before the first request can leave, so the file is located through the installed
distribution's spec (``importlib.util.find_spec``, which does not run litellm's code), and the few
fields intake-eval prices with are extracted once and cached on disk, keyed by intake-eval's and
litellm's versions (an upgrade of either makes a new extract; nothing is ever downloaded):
``$XDG_CACHE_HOME/intake-eval/`` (default ``~/.cache/intake-eval/``). An unwritable cache folder
only means the extract is made again in the next process.

An entry is *linear* when a call costs input tokens × input price + output tokens × output price
(cache reads and writes at their own prices): no tier above some prompt length, no per-second,
per-character or per-image basis. Only a linear entry is priced from the extract; any other model
is priced by litellm itself (llm/litellm_backend.call_cost imports it then).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from intake_eval.core.user_cache import cache_folder

TABLE_FILE = "model_prices_and_context_window_backup.json"
PRICE_FIELDS = ("input_cost_per_token", "output_cost_per_token", "cache_read_input_token_cost",
                "cache_creation_input_token_cost")
SIZE_FIELDS = ("max_input_tokens", "max_tokens")
# Cost fields that keep a call linear (variants the call does not ask for: batch, priority, flex tiers).
LINEAR_SIDE_FIELDS = ("_batches", "_priority", "_flex", "search_context_cost_per_query", "_above_1hr")
EXTRACT_FORMAT = 1


def _is_cost_field(name: str) -> bool:
    return "cost" in name


def _is_linear(entry: dict[str, Any]) -> bool:
    if not all(isinstance(entry.get(name), (int, float)) for name in PRICE_FIELDS[:2]):
        return False
    for name in entry:
        if not _is_cost_field(name) or name in PRICE_FIELDS:
            continue
        if any(side in name for side in LINEAR_SIDE_FIELDS) and "_above_" not in name.replace("_above_1hr", ""):
            continue
        return False
    return True


def extract(table: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The fields intake-eval uses, for every entry that has any of them."""
    models: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            continue
        kept = {field: entry[field] for field in (*PRICE_FIELDS, *SIZE_FIELDS) if entry.get(field) is not None}
        if not kept:
            continue
        kept["litellm_provider"] = entry.get("litellm_provider")
        kept["linear"] = _is_linear(entry)
        models[name] = kept
    return models


def litellm_table_path() -> Path | None:
    """The JSON table inside the installed litellm package, found without importing it."""
    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / TABLE_FILE
        if path.is_file():
            return path
    return None


def _versions() -> tuple[str, str]:
    def version(distribution: str) -> str:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"
    return version("intake-eval"), version("litellm")


def _cached_extract_path() -> Path:
    ours, theirs = _versions()
    return cache_folder() / f"litellm-prices-{ours}-litellm-{theirs}-v{EXTRACT_FORMAT}.json"


def _write_atomically(path: Path, models: dict[str, dict[str, Any]]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp", encoding="utf-8") as out:
            json.dump(models, out, separators=(",", ":"))
        os.replace(out.name, path)
    except OSError:
        return  # a read-only home: the extract is simply made again next time


@functools.cache
def price_extract() -> dict[str, dict[str, Any]]:
    """The extract: from the cache when one matches the installed versions, else made from litellm's file."""
    cached = _cached_extract_path()
    try:
        loaded = json.loads(cached.read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            return loaded
    except (OSError, ValueError):
        pass
    source = litellm_table_path()
    if source is None:
        return {}
    models = extract(json.loads(source.read_bytes()))
    _write_atomically(cached, models)
    return models


@functools.lru_cache(maxsize=512)
def table_entry(model: str) -> dict[str, Any]:
    """The extract's entry for a provider model id as intake-eval spells it (litellm's spelling):
    the id itself, else the id without its provider prefix when the entry belongs to that provider
    (``openai/gpt-4o`` → ``gpt-4o``). Empty for an unmapped model."""
    models = price_extract()
    if model in models:
        return models[model]
    if "/" in model:
        provider, bare = model.split("/", 1)
        entry = models.get(bare)
        if entry is not None and entry.get("litellm_provider") in (provider, f"text-completion-{provider}"):
            return entry
    return {}
