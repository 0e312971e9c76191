"""Provider ids spelled the inspect_ai way, answered with the litellm spelling this tool reads.

Researchers arriving from inspect_ai write ``together/…`` or ``google/gemini-…``; litellm (and so
this tool) spells those providers ``together_ai/…`` and ``gemini/…``. Such an id is refused with
the id to write instead, never guessed at. ``vllm/…`` is the dangerous one: litellm accepts it but
means a vLLM engine *inside this process*, while an inspect user means a vLLM server; it is refused
with the ``hosted_vllm/…`` + ``api_base`` recipe.
"""

from __future__ import annotations

from intake_eval.core.errors import IntakeEvalError

# inspect_ai provider prefix → litellm provider prefix (same service, another spelling).
INSPECT_TO_LITELLM = {
    "together": "together_ai",
    "google": "gemini",
    "grok": "xai",
    "fireworks": "fireworks_ai",
    "vertex": "vertex_ai",
    "azureai": "azure_ai",
}
# litellm's prefix for a vLLM engine inside the calling process; a user of this tool means a server.
IN_PROCESS_VLLM = "vllm"
# inspect_ai prefixes for a server or an in-process engine litellm has no provider for: what to write.
INSPECT_RECIPES = {
    "sglang": "for an SGLang server write model: openai/{rest} with api_base: http://HOST:30000/v1",
    "openai-api": "for an OpenAI-compatible service write model: openai/<model> with its api_base and api_key_env",
    "hf": "inspect_ai's hf/ runs transformers in-process; serve the model (model: hosted_vllm/{rest} with "
          "api_base) or use local/<file.gguf>",
    "llama-cpp-python": "use local/<file.gguf> (an embedded llama.cpp server) or model: openai/<name> with the "
                        "api_base of your server",
}


def check_provider_spelling(model_id: str, where: str = "") -> None:
    """Raise one line naming the litellm spelling when ``model_id`` uses an inspect_ai prefix, or
    the server recipe when it names an in-process engine. ``where`` prefixes the message (a file
    and field) when the id comes from a models file."""
    prefix, _, rest = model_id.partition("/")
    if not rest:
        return
    lead = f"{where}: " if where else ""
    if prefix == IN_PROCESS_VLLM:
        raise IntakeEvalError(
            f"{lead}'{model_id}' would mean a vLLM engine inside this process; for a vLLM server write "
            f"model: hosted_vllm/{rest} with api_base: http://HOST:8000/v1 in a --models file")
    if prefix in INSPECT_RECIPES:
        raise IntakeEvalError(f"{lead}'{model_id}' is an inspect_ai id; {INSPECT_RECIPES[prefix].format(rest=rest)} "
                              "in a --models file")
    if prefix in INSPECT_TO_LITELLM:
        raise IntakeEvalError(
            f"{lead}'{model_id}' is the inspect_ai spelling; litellm spells it '{INSPECT_TO_LITELLM[prefix]}/{rest}'")
