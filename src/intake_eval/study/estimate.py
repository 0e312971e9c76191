"""What a study will cost before a cent is spent: calls, tokens, dollars and a wall-time lower bound.

The estimate runs the real pipeline code on a sample of real profiles with *estimating models*
in place of every provider: each request's messages are the ones the study would send (the real
templates, the real growing conversation history), counted with a tokenizer; each answer is a
stand-in of the expected length (ASSUMED_TOKENS). The per-profile figures are scaled to the
study's size. Call counts are exact for a run without failures or repairs; tokens are measured
for prompts and assumed for answers; reasoning models add REASONING_OVERHEAD tokens per call up
to their cap. ``dollars_at_cap`` is the ceiling if every answer used its full token cap.
Provider prompt caching is replayed call by call (cache_estimate.py) and priced at the providers'
cached rates; ``dollars_without_cache`` is the same study with every input token at the full price.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from intake_eval.generate.render import render_profile
from intake_eval.generate.sampling import plan_phenotypes, sample_profile
from intake_eval.interview.conversation import Participants, run_conversation
from intake_eval.interview.plan import RunSettings, plan_conversations
from intake_eval.judge.judging import judge_conversation, judge_label
from intake_eval.llm.base import CallUsage, ChatRequest, ChatResult, ModelSpec
from intake_eval.llm.litellm_backend import cache_prices, call_cost, import_litellm
from intake_eval.study.cache_estimate import PromptCacheModel, cache_assumptions, input_dollars
from intake_eval.study import local_speed
from intake_eval.trust.patient_qc import QCContext, run_probe
from intake_eval.trust.probes import (
    DEFAULT_PROBES,
    choose_profiles,
    load_probe_config,
    plan_probes,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.core.records import Profile
    from intake_eval.study.config import StudyConfig

# Expected visible answer length per purpose (tokens), from the study's transcripts: clinicians
# write a short paragraph, patients two to five sentences.
ASSUMED_TOKENS = {"clinician": 80, "patient": 90, "generator": 140, "tracker": 25, "formulation": 300}
JUDGE_REASONING_WORDS = 18  # per domain and per turn, in the judge's JSON
REASONING_OVERHEAD = 700  # hidden reasoning tokens per call of a reasoning model (capped by max_tokens)
TOKENIZER_MODEL = "gpt-4o"  # one offline tokenizer for every model (o200k); provider counts differ by a few %
# Wall-time lower bound: an optimistic call = time to first token + tokens at a fast decode rate.
FIRST_TOKEN_S = 0.3
DECODE_TOKENS_PER_S = 120.0
MAX_SAMPLED_PROFILES = 18

_FILLER = ("I hear you, and thank you for telling me about it. Could you walk me through what a usual day "
           "looks like for you at the moment, from the morning until the evening, and what has been hardest? ")


def count_tokens(messages: list[dict[str, str]]) -> int:
    """Chat tokens as OpenAI counts them: 3 per message + content + 3 to prime the reply."""
    return sum(3 + _text_tokens(str(m.get("content", ""))) for m in messages) + 3


@lru_cache(maxsize=65536)
def _text_tokens(text: str) -> int:
    litellm = import_litellm()  # offline-safe import (local price map, no .env)
    return int(litellm.token_counter(model=TOKENIZER_MODEL, text=text)) if text else 0


def _filler(tokens: int) -> str:
    words = _FILLER.split()
    out: list[str] = []
    while len(out) * 1.25 < tokens:  # ~1.25 tokens per word of plain English
        out.extend(words)
    return " ".join(out[: max(1, int(tokens / 1.25))])


# ---------------------------------------------------------------- prices

def price_per_token(spec: ModelSpec) -> tuple[float, float] | None:
    """(input, output) dollars per token as the model layer will charge them (the alias's override,
    free for offline participants and local servers, else litellm's local price table); None when
    unknown."""
    if spec.is_offline:
        return 0.0, 0.0

    per_input, known_in = call_cost(spec, 1_000_000, 0)
    per_output, known_out = call_cost(spec, 0, 1_000_000)
    if not (known_in and known_out):
        return None
    return per_input / 1_000_000, per_output / 1_000_000


# ---------------------------------------------------------------- the estimating model

@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0  # visible + reasoning
    reasoning_tokens: int = 0
    cap_tokens: int = 0  # sum of the per-call output caps
    cached_tokens: int = 0  # prompt tokens the provider's cache would serve
    cache_write_tokens: int = 0


class EstimatingModel:
    """A ChatModel that measures each request and answers with a stand-in of the expected length."""

    def __init__(self, spec: ModelSpec, tallies: dict[tuple[str, str, str], Tally], stage: str):
        self.spec = spec
        self.tallies = tallies
        self.stage = stage
        self.prompt_cache = PromptCacheModel(spec, count_tokens, _text_tokens)

    def _answer(self, request: ChatRequest) -> str:
        context = dict(request.context or {})
        purpose = request.purpose or str(context.get("role", ""))
        if purpose == "judge":
            return _judge_answer(context)
        if purpose == "tracker":  # the schema's shape: a verdict per hidden domain id
            asked = ((request.response_schema or {}).get("properties", {}).get("asked_domains", {})
                     .get("required", []))
            return json.dumps({"question_type": "open", "asked_domains": {domain: False for domain in asked}})
        if purpose == "generator":
            domain = context.get("domain")
            symptoms = list(getattr(domain, "symptoms", []) or [])
            text = " ".join(f"Lately, {s[0].lower() + s[1:] if s else s}." for s in symptoms)
            missing = ASSUMED_TOKENS["generator"] - _text_tokens(text)
            return (text + " " + _filler(missing)).strip() if missing > 0 else text
        if context.get("request") == "formulation" or purpose == "formulation":
            # valid JSON, so the estimate does not count a repair request per conversation
            return json.dumps({"chief_complaint": "low mood",
                               "principal_diagnosis": {"name": "Major depressive disorder"},
                               "risk_level": "low", "risk_evidence": _filler(ASSUMED_TOKENS["formulation"] - 30)})
        return _filler(ASSUMED_TOKENS.get(purpose, ASSUMED_TOKENS["patient"]))

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = request.context or {}
        purpose = request.purpose or str(context.get("role", "")) or "other"
        if context.get("request") == "formulation":
            purpose = "formulation"
        text = self._answer(request)
        prompt = count_tokens(list(request.messages))
        visible = _text_tokens(text)
        cap = request.max_tokens if request.max_tokens is not None else (self.spec.max_tokens or visible)
        reasoning = max(0, min(REASONING_OVERHEAD, cap - visible)) if self.spec.reasoning else 0
        tally = self.tallies.setdefault((self.stage, purpose, self.spec.alias or self.spec.model), Tally())
        tally.calls += 1
        tally.prompt_tokens += prompt
        tally.completion_tokens += visible + reasoning
        tally.reasoning_tokens += reasoning
        tally.cap_tokens += max(cap, visible)
        cached, written = self.prompt_cache.account(request, purpose)
        tally.cached_tokens += min(cached, prompt)
        tally.cache_write_tokens += min(written, prompt - min(cached, prompt))
        usage = CallUsage(prompt_tokens=prompt, completion_tokens=visible + reasoning, reasoning_tokens=reasoning,
                          cached_prompt_tokens=min(cached, prompt))
        return ChatResult(text=text, usage=usage, finish_reason="stop", model=self.spec.model)


def _judge_answer(context: dict[str, Any]) -> str:
    profile, conversation = context.get("profile"), context.get("conversation")
    hidden = profile.hidden_domains if profile is not None else []
    words = " ".join(_FILLER.split()[:JUDGE_REASONING_WORDS])

    def turn(number: int) -> dict[str, Any]:  # the shape judge/schema.py asks for
        return {"reasoning": words, "question_type": "open" if number else "other", "patient_faithful": True,
                "domains": {d: {"reasoning": words, "asked_about": False, "disclosed": False} for d in hidden}}

    if context.get("turn") is not None:
        return json.dumps(turn(int(context["turn"])))
    numbers = [0] + [t.turn for t in getattr(conversation, "turns", [])]
    return json.dumps({"turns": {str(n): turn(n) for n in numbers}})


# ---------------------------------------------------------------- the estimate

@dataclass
class EstimateLine:
    stage: str
    role: str
    alias: str
    model: str
    offline: bool
    reasoning: bool
    calls: int
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    completion_cap_tokens: int
    input_cost_per_token: float | None
    output_cost_per_token: float | None
    dollars: float | None  # None = price unknown; provider prompt caching included
    dollars_at_cap: float | None
    rpm: int | None
    tpm: int | None
    cached_prompt_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_cost_per_token: float | None = None  # None: cached input costs the input price
    cache_write_cost_per_token: float | None = None
    dollars_without_cache: float | None = None


@dataclass
class StudyEstimate:
    study: str
    profiles: int
    conversations: int
    sampled_profiles: int
    lines: list[EstimateLine]
    wall_s: dict[str, float]  # stage -> lower bound; "study" = with judging overlapping the run
    assumptions: dict[str, Any] = field(default_factory=dict)

    @property
    def dollars(self) -> float | None:
        known = [line.dollars for line in self.lines if line.dollars is not None]
        return sum(known) if len(known) == len(self.lines) else None

    @property
    def dollars_without_cache(self) -> float | None:
        known = [line.dollars_without_cache for line in self.lines if line.dollars_without_cache is not None]
        return sum(known) if len(known) == len(self.lines) else None

    @property
    def known_dollars(self) -> float:
        return sum(line.dollars or 0.0 for line in self.lines)

    @property
    def unknown_price_models(self) -> list[str]:
        return sorted({line.alias for line in self.lines if line.dollars is None})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["dollars"] = self.dollars
        data["dollars_without_cache"] = self.dollars_without_cache
        data["known_dollars"] = self.known_dollars
        data["unknown_price_models"] = self.unknown_price_models
        return data


STAGES = ("generate", "qc", "run", "judge")


def _sample_indices(n: int, k: int) -> list[int]:
    if n <= k:
        return list(range(n))
    return sorted({int(i * n / k) for i in range(k)})


async def _simulate(config: "StudyConfig", specs: dict[str, ModelSpec], catalog: "Catalog",
                    indices: list[int]) -> tuple[dict[tuple[str, str, str], Tally], int]:
    """Run the real stage code on the sampled profiles with estimating models, one set per stage.
    Returns the tallies and how many profiles the patient QC sample held."""

    tallies: dict[tuple[str, str, str], Tally] = {}
    models = {stage: {alias: EstimatingModel(spec, tallies, stage) for alias, spec in specs.items()}
              for stage in STAGES}
    plan = plan_phenotypes(catalog, config.profiles.n, config.profiles.mode, config.seed)
    profiles = []
    for index in indices:
        drawn = sample_profile(catalog, plan[index], index, config.seed, hidden_count=config.profiles.hidden_count)
        profiles.append(await render_profile(drawn, models["generate"][config.generator], catalog))
    profile_of = {profile.profile_id: profile for profile in profiles}
    qc_profiles = await _simulate_qc(config, models["qc"], catalog, profiles) if config.qc.enabled else 0
    run, judges = models["run"], models["judge"]
    tracker = run[config.patient.tracker] if config.patient.tracker else None
    settings = RunSettings(clinicians=list(config.clinicians), patient=config.patient_models()[0],
                           patients=config.patient_models(), patient_mode=config.patient.mode, turns=config.turns,
                           conditions=list(config.conditions), formulation=config.formulation,
                           patient_styles=list(config.patient_styles))
    openings: dict = {}  # one opening per profile, patient model and style: calls multiply with both
    for item in plan_conversations(profiles, settings):  # the run's own plan: every patient model and style
        patient = item.patient or settings.patient
        participants = Participants(clinician=run[item.clinician], patient=run[patient], tracker=tracker,
                                    patient_alias=patient)
        conversation = await run_conversation(item, participants, openings=openings)
        for judge in config.judges:
            await judge_conversation(conversation, profile_of[conversation.profile_id], judges[judge],
                                     config.judge_mode, judge=judge_label(judge, config.judge_mode), catalog=catalog)
    return tallies, qc_profiles


async def _simulate_qc(config: "StudyConfig", models: dict[str, EstimatingModel], catalog: "Catalog",
                       profiles: list["Profile"]) -> int:
    """The patient QC's probes, once per patient style, on (at most) the sampled profiles, by the primary judge."""
    probes = load_probe_config(DEFAULT_PROBES, catalog)
    chosen = choose_profiles(profiles, config.qc.profiles)
    tracker = models[config.patient.tracker] if config.patient.tracker else None
    for patient, style in ((p, s) for p in config.patient_models() for s in config.patient_styles):
        context = QCContext(patient, config.patient.mode, config.judges[0], models[patient],
                            models[config.judges[0]], tracker, catalog, style=style)
        for profile in chosen:
            for probe in plan_probes(profile, catalog, probes, DEFAULT_PROBES):
                await run_probe(context, profile, probe)
    return len(chosen)


def _call_seconds(line: EstimateLine) -> float:
    if local_speed.is_local(line):
        return local_speed.local_call_seconds(line)
    per_call = line.completion_tokens / line.calls if line.calls else 0.0
    return 0.0 if line.offline else FIRST_TOKEN_S + per_call / DECODE_TOKENS_PER_S


def _rate_bound(lines: list[EstimateLine]) -> float:
    """Seconds the rpm/tpm limits (or a local server's compute) alone force; the slowest alias decides."""
    by_alias: dict[str, list[EstimateLine]] = {}
    for line in lines:
        by_alias.setdefault(line.alias, []).append(line)
    worst = 0.0
    for group in by_alias.values():
        calls = sum(line.calls for line in group)
        tokens = sum(line.prompt_tokens + line.completion_tokens for line in group)
        rpm, tpm = group[0].rpm, group[0].tpm
        if rpm:
            worst = max(worst, calls / rpm * 60.0)
        if tpm:
            worst = max(worst, tokens / tpm * 60.0)
    return max(worst, local_speed.local_server_bound(lines))


def _wall_times(config: "StudyConfig", lines: list[EstimateLine]) -> dict[str, float]:
    conversations = config.conversation_count
    by_stage = {stage: [line for line in lines if line.stage == stage] for stage in STAGES}
    # generate: independent calls spread over the concurrency
    gen = by_stage["generate"]
    gen_s = max(sum(l.calls * _call_seconds(l) for l in gen) / config.concurrency, _rate_bound(gen))
    # run: each conversation is a chain of sequential calls; `concurrency` chains at a time. The
    # slowest clinician's chain decides (its own calls + the patient's and tracker's share).
    run = by_stage["run"]
    per_clinician = max(1.0, conversations / len(config.clinicians))
    clinician_chain: dict[str, float] = {}
    for line in run:
        if line.alias in config.clinicians and line.role in ("clinician", "formulation"):
            seconds = line.calls / per_clinician * _call_seconds(line)
            clinician_chain[line.alias] = clinician_chain.get(line.alias, 0.0) + seconds
    shared = sum(line.calls / max(1, conversations) * _call_seconds(line)
                 for line in run if line.role not in ("clinician", "formulation"))
    chain = max(clinician_chain.values(), default=0.0) + shared
    waves = math.ceil(conversations / config.concurrency)
    run_s = max(waves * chain, _rate_bound(run))
    # judge: a conversation's per-turn calls go in turn order (each reuses the previous one's cached
    # prefix); the study judges `concurrency` × calls-per-conversation conversations at once
    judge = by_stage["judge"]
    chain = (config.turns + 1) if config.judge_mode == "per-turn" else 1
    judge_alone = max(sum(l.calls * _call_seconds(l) for l in judge) / (config.concurrency * chain), _rate_bound(judge))
    tail = chain * max((_call_seconds(l) for l in judge), default=0.0)  # judging the last conversation
    qc = by_stage["qc"]  # before the run; probes are independent
    qc_s = max(sum(l.calls * _call_seconds(l) for l in qc) / config.concurrency, _rate_bound(qc))
    times = {"generate": gen_s, "qc": qc_s, "run": run_s, "judge": judge_alone,
             "study": max(gen_s + qc_s + max(run_s + tail, judge_alone), local_speed.local_server_bound(lines))}
    return {stage: seconds for stage, seconds in times.items() if stage != "qc" or config.qc.enabled}


def estimate_study(config: "StudyConfig", specs: dict[str, ModelSpec], catalog: "Catalog") -> StudyEstimate:
    """Estimate every stage of a study. ``specs`` maps each alias the config names to its spec."""
    indices = _sample_indices(config.profiles.n, MAX_SAMPLED_PROFILES)
    tallies, qc_profiles = asyncio.run(_simulate(config, specs, catalog, indices))
    k = len(indices)
    factors = {"generate": config.profiles.n / k, "run": config.profiles.n / k * config.trials,
               "judge": config.profiles.n / k * config.trials,
               "qc": min(config.qc.profiles, config.profiles.n) / max(1, qc_profiles)}
    lines = []
    for (stage, purpose, alias), tally in sorted(tallies.items(), key=lambda kv: (STAGES.index(kv[0][0]),
                                                                                 kv[0][1], kv[0][2])):
        factor = factors[stage]
        spec = specs[alias]
        prices = price_per_token(spec)
        calls = round(tally.calls * factor)
        prompt, completion = round(tally.prompt_tokens * factor), round(tally.completion_tokens * factor)
        cap = round(tally.cap_tokens * factor)
        cached, written = round(tally.cached_tokens * factor), round(tally.cache_write_tokens * factor)
        read_price, write_price = cache_prices(spec) if prices else (None, None)
        prompt_dollars = input_dollars(prompt, cached, written, prices[0], read_price, write_price) if prices else 0.0
        lines.append(EstimateLine(
            stage=stage, role=purpose, alias=alias, model=spec.model, offline=spec.is_offline,
            reasoning=spec.reasoning, calls=calls, prompt_tokens=prompt, completion_tokens=completion,
            reasoning_tokens=round(tally.reasoning_tokens * factor), completion_cap_tokens=cap,
            input_cost_per_token=prices[0] if prices else None, output_cost_per_token=prices[1] if prices else None,
            dollars=(prompt_dollars + completion * prices[1]) if prices else None,
            dollars_at_cap=(prompt_dollars + cap * prices[1]) if prices else None,
            rpm=spec.rpm, tpm=spec.tpm, cached_prompt_tokens=cached, cache_write_tokens=written,
            cache_read_cost_per_token=read_price, cache_write_cost_per_token=write_price,
            dollars_without_cache=(prompt * prices[0] + completion * prices[1]) if prices else None,
        ))
    return StudyEstimate(
        study=config.name, profiles=config.profiles.n, conversations=config.conversation_count,
        sampled_profiles=k, lines=lines, wall_s=_wall_times(config, lines),
        assumptions={"answer_tokens": ASSUMED_TOKENS, "reasoning_overhead_tokens": REASONING_OVERHEAD,
                     "tokenizer": TOKENIZER_MODEL, "first_token_s": FIRST_TOKEN_S,
                     "decode_tokens_per_s": DECODE_TOKENS_PER_S, "concurrency": config.concurrency,
                     "local_tokens_per_s": {"prompt": local_speed.LOCAL_PREFILL_TOKENS_PER_S,
                                            "generated": local_speed.LOCAL_DECODE_TOKENS_PER_S},
                     "no_failures_or_repairs": True, "cache": "not counted (a fresh run folder)",
                     "prompt_cache": cache_assumptions(specs)},
    )
