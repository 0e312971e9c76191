"""Model aliases: configs/models.yaml merged with --models FILE, raw provider ids, key preflight.

An alias in a --models file replaces the shipped alias of the same name as a whole (no field
inheritance: a local server must not inherit a cloud key variable). Light imports only: the
CLI resolves models before anything heavy is loaded.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, ValidationError

from intake_eval.core.errors import IntakeEvalError, describe_validation_error
from intake_eval.core.package_data import package_folder
from intake_eval.core.yamlfile import read_yaml
from intake_eval.llm.base import ModelSpec
from intake_eval.llm.keys import key_is_set as variable_is_set
from intake_eval.llm.litellm_import import import_litellm
from intake_eval.llm.local_server import canonical_model, check_local
from intake_eval.llm.spellings import check_provider_spelling

DEFAULT_MODELS_FILE = package_folder("configs") / "models.yaml"

# The variable litellm reads for each provider; named explicitly so preflight can check it.
PROVIDER_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "together_ai": "TOGETHER_API_KEY",
    "fireworks_ai": "FIREWORKS_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "moonshot": "MOONSHOT_API_KEY",
    "deepinfra": "DEEPINFRA_API_KEY",
    "novita": "NOVITA_API_KEY",
    "nebius": "NEBIUS_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "xai": "XAI_API_KEY",
    "hosted_vllm": None,  # a server you run; set api_key_env if it wants one
    "ollama": None,
    "ollama_chat": None,
    "lm_studio": None,
    "offline": None,
    "local": None,  # an embedded llama.cpp server (llm/local_server.py)
}
LOCAL_ONLY_FIELDS = ("n_ctx", "parallel", "threads")
# Request fields the records describe (the alias's model, the prompt, its sampling and length, the
# answer's format and count): extra_params may not replace them behind the records' back.
RESERVED_PARAMS = ("model", "messages", "temperature", "max_tokens", "response_format", "n", "stream")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class ModelsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: dict[str, ModelSpec] = {}


def _check_spec(alias: str, spec: ModelSpec, source: Path) -> None:
    def bad(field: str, why: str) -> IntakeEvalError:
        return IntakeEvalError(f"{source}: models.{alias}.{field}: {why}")

    if not spec.model.strip():
        raise bad("model", "must name a provider model id such as openai/gpt-4o")
    check_provider_spelling(spec.model, where=f"{source}: models.{alias}.model")
    if spec.temperature is not None and not 0.0 <= spec.temperature <= 2.0:
        raise bad("temperature", f"{spec.temperature} is outside 0–2")
    for field in ("max_tokens", "rpm", "tpm", "max_concurrency", *LOCAL_ONLY_FIELDS):
        value = getattr(spec, field)
        if value is not None and value < 1:
            raise bad(field, f"must be at least 1, not {value}")
    if spec.timeout_s <= 0:
        raise bad("timeout_s", "must be positive")
    if spec.batch_cost_factor is not None and not 0.0 <= spec.batch_cost_factor <= 1.0:
        raise bad("batch_cost_factor", f"{spec.batch_cost_factor} is outside 0–1 (batch price ÷ online price)")
    if spec.api_key_env is not None and (not _ENV_NAME.match(spec.api_key_env) or _looks_like_secret(spec.api_key_env)):
        # Never echo the value: it may be the key itself pasted by mistake.
        raise bad("api_key_env", "must be the NAME of an environment variable (e.g. TOGETHER_API_KEY), not a key")
    reserved = [key for key in RESERVED_PARAMS if key in spec.extra_params]
    if reserved:
        where = {"model": "model", "temperature": "temperature", "max_tokens": "max_tokens"}.get(reserved[0])
        instead = f"set the alias's own {where} field" if where else "intake-eval sets it for every request"
        raise bad(f"extra_params.{reserved[0]}", f"may not be set here ({instead}; the records name what was sent)")
    secret_params = sorted(_credential_paths(spec.extra_params))
    if secret_params:
        # extra_params reach the manifest and the report's methods table: a credential there would be published
        raise bad(f"extra_params.{secret_params[0]}", "credentials do not belong in a models file; use api_key_env")
    replicas = spec.api_bases
    for number, url in enumerate(replicas):
        field = "api_base" if len(replicas) == 1 else f"api_base[{number}]"
        if urlparse(url).scheme not in ("http", "https"):
            raise bad(field, "must be an http(s) URL such as http://127.0.0.1:8000/v1")
        if "@" in urlparse(url).netloc:
            # Never echo the URL: its user:password part would reach the terminal and any log of it.
            raise bad(field, "holds credentials (user:password@); they would be written into the run folder's "
                      "records: remove them and give the key through api_key_env")
    if spec.is_local and spec.api_base:
        raise bad("api_base", "a local/ model runs its own embedded server; remove api_base "
                  "(or use openai/<name> with api_base for a server you run yourself)")
    for field in LOCAL_ONLY_FIELDS:
        if getattr(spec, field) is not None and not spec.is_local:
            raise bad(field, "applies to local/<model.gguf> models only (the embedded llama.cpp server)")


# A header or parameter that carries a credential; not a count such as max_completion_tokens or budget_tokens.
_CREDENTIAL_NAME = re.compile(r"authorization|secret|password|cookie|credential|api[-_]?key|(^|[-_])(key|token)$",
                              re.IGNORECASE)


def _credential_paths(params: Mapping[str, object], prefix: str = "") -> list[str]:
    """Where extra_params (nested ones too, e.g. ``extra_headers.Authorization``) name a credential."""
    found = []
    for key, value in params.items():
        path = f"{prefix}{key}"
        if _CREDENTIAL_NAME.search(str(key)):
            found.append(path)
        elif isinstance(value, Mapping):
            found.extend(_credential_paths(value, f"{path}."))
    return found


def _looks_like_secret(name: str) -> bool:
    return len(name) >= 30 and any(c.islower() for c in name) and any(c.isdigit() for c in name)


def _with_defaults(alias: str, spec: ModelSpec, relative_to: Path | None = None) -> ModelSpec:
    update: dict[str, object] = {"alias": alias}
    if spec.is_local:  # a path relative to the models file (or, for a raw name, the working folder)
        update["model"] = canonical_model(spec.model, relative_to)
    if spec.api_key_env is None and not spec.api_base and not spec.is_offline:
        update["api_key_env"] = PROVIDER_KEY_ENV.get(spec.provider)
    return spec.model_copy(update=update)


def read_models_file(path: Path, label: str = "--models") -> dict[str, ModelSpec]:
    try:
        data = read_yaml(path)
    except FileNotFoundError:
        raise IntakeEvalError(f"{label} {path}: no such file") from None
    except OSError as error:
        raise IntakeEvalError(f"{path}: cannot read ({error.strerror or error})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise IntakeEvalError(f"{path}: expected a mapping with a 'models:' key")
    try:
        parsed = ModelsFile.model_validate(data)
    except ValidationError as error:
        raise IntakeEvalError(describe_validation_error(error, path)) from None
    specs = {}
    for alias, spec in parsed.models.items():
        _check_spec(alias, spec, path)
        specs[alias] = _with_defaults(alias, spec, relative_to=path.parent)
    return specs


ModelsFiles = Path | Sequence[Path] | None


def load_model_specs(extra: ModelsFiles = None, base: Path | None = None) -> dict[str, ModelSpec]:
    """Shipped aliases, then the user's files over them in order (alias by alias: a later file wins)."""
    specs = read_models_file(base or DEFAULT_MODELS_FILE, label="model aliases file")
    for path in [extra] if isinstance(extra, (str, Path)) else list(extra or ()):
        specs.update(read_models_file(Path(path)))
    return specs


def _known_provider(prefix: str) -> bool:
    if prefix in PROVIDER_KEY_ENV:
        return True

    return prefix in {str(getattr(p, "value", p)) for p in import_litellm().provider_list}


def resolve_spec(name: str, specs: Mapping[str, ModelSpec]) -> ModelSpec:
    """An alias, ``offline/<name>``, or a raw provider id such as ``openai/gpt-4o-mini``."""
    if name in specs:
        return specs[name]
    if name.startswith("offline/") and name.removeprefix("offline/").strip():
        # which offline participants exist is the simulated package's business (checked when built)
        return ModelSpec(alias=name, model=name, temperature=None, max_tokens=None)
    check_provider_spelling(name)
    prefix = name.split("/", 1)[0] if "/" in name else ""
    if prefix and name.split("/", 1)[1] and _known_provider(prefix):
        return _with_defaults(name, ModelSpec(model=name))
    close = difflib.get_close_matches(name, list(specs), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise IntakeEvalError(
        f"unknown model '{name}'{hint}: not an alias in configs/models.yaml or --models, nor a provider id "
        "like openai/NAME, hosted_vllm/NAME, gemini/NAME or local/PATH.gguf; `intake-eval models` lists the aliases"
    )


def needed_key(spec: ModelSpec) -> str | None:
    """The variable this model needs set, or None (offline, or a local server without one)."""
    return None if spec.is_offline else spec.api_key_env


def key_is_set(spec: ModelSpec) -> bool | None:
    """True/False whether the needed key is set; None when no key is needed."""
    variable = needed_key(spec)
    return None if variable is None else variable_is_set(variable)


def preflight(specs: Mapping[str, ModelSpec] | Iterable[ModelSpec]) -> None:
    """Fail before any work if a model's key variable is unset (naming alias and variable), or a
    local model's server or weights are not installed."""
    items = list(specs.values()) if isinstance(specs, Mapping) else list(specs)
    for spec in items:
        if spec.is_local:
            check_local(spec)
    missing: dict[str, list[str]] = {}
    for spec in items:
        if key_is_set(spec) is False:
            missing.setdefault(needed_key(spec) or "", []).append(spec.alias or spec.model)
    if missing:
        parts = [f"{variable} (for {', '.join(sorted(set(aliases)))})" for variable, aliases in sorted(missing.items())]
        raise IntakeEvalError(
            "missing API key: set the environment variable " + "; ".join(parts)
            + " — or choose other models (`intake-eval models` shows which keys are set)"
        )
