"""Per-turn judging of conversations: prompts, structured output, one repair, judge errors.

``judge_conversation`` labels one conversation with one judge model:
- ``per-turn`` (the study's design): one call per turn 0..N (turn 0 = the patient's opening), each
  seeing the conversation up to and including the patient's reply to that turn. The prompt is
  static-first (rules, domain lists, answer format, then the conversation), so each turn's prompt
  begins with the previous one's; a provider judge's calls go in turn order, each after the
  previous answered, so each reads that prefix from the provider's prompt cache.
- ``conversation``: one call labels every turn.
An answer that does not validate gets ONE repair request quoting the validation error; if that also
fails the turn is a judge error (status "judge_error", errors listed) — never read as "no". A
refusal or content filter (llm/answer.py) is not repaired: status "refused", the judge's words in
``errors``. Answers cut at the token cap are counted (``truncated``). A provider failure gives status
"provider_error: <kind>" with the reason in ``errors``.

``judge_stage`` runs judges over a run folder's conversations with resume (skip conversations a
judge already labelled ok, retry the rest) and compacts the judgment files at the end.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from intake_eval.core.answer_length import longest_answer_tokens
from intake_eval.core.prompts import prompt_hashes, render_prompt
from intake_eval.core.records import (
    QUESTION_TYPES,
    Conversation,
    Judgment,
    Profile,
    TurnJudgment,
)
from intake_eval.judge.schema import (
    JudgeOutputError,
    parse_conversation,
    parse_turn,
    response_schema,
)
from intake_eval.llm.affinity import conversation_scope
from intake_eval.llm.answer import truncated, unusable
from intake_eval.llm.base import ChatModel, ChatRequest, ModelCallError, UsageMeter
from intake_eval.llm.request_kind import RequestKind

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

MODES: tuple[str, ...] = ("per-turn", "conversation")
# A judge's cap holds the longest answer its schema allows (core/answer_length), so a constrained
# answer always closes. A whole conversation's can exceed a model's output limit; its cap stops at
# gpt-4o's 16,384 (the smallest among common judges): above it, judge per turn.
CONVERSATION_ANSWER_LIMIT = 16_384
OFFLINE_PROMPT = "(offline judge: the labels come from request.context)"
JUDGE_PROMPTS: tuple[str, ...] = ("judge_rules", "judge_turn", "judge_conversation", "judge_repair")


def _conversation_cap(judge_model: ChatModel, hidden: Sequence[str], turns: Sequence[int]) -> int:
    longest = longest_answer_tokens(response_schema(hidden, "conversation", turns))
    return max(judge_model.spec.max_tokens or 0, min(longest, CONVERSATION_ANSWER_LIMIT))


def judge_label(alias: str, mode: str) -> str:
    """The judge's name in records and paths: conversation-mode labels sit beside per-turn ones."""
    return alias if mode == "per-turn" else f"{alias}+conversation"


def judge_config(alias: str, model: str, mode: str) -> dict[str, Any]:
    """What determines a judge's labels: the manifest stage ``judge:<label>`` refuses to resume
    under a different one."""
    return {"alias": alias, "model": model, "mode": mode, "prompts": prompt_hashes(list(JUDGE_PROMPTS))}


# ---------------------------------------------------------------- prompts

def domain_briefs(profile: Profile, catalog: "Catalog | None" = None) -> list[dict[str, Any]]:
    """Hidden domains as the judge sees them: the domain's symptom list (catalog when available)
    and this patient's sampled symptoms."""
    briefs = []
    for draw in profile.hidden:
        entry = catalog.domains.get(draw.domain) if catalog is not None else None
        briefs.append({
            "id": draw.domain,
            "label": draw.label or (entry.label if entry else draw.domain.replace("_", " ")),
            "symptoms": [s.text for s in entry.symptoms] if entry else list(draw.symptoms),
            "patient_symptoms": list(draw.symptoms) if entry else [],
        })
    return briefs


def _presenting(profile: Profile, catalog: "Catalog | None") -> dict[str, str]:
    entry = catalog.domains.get(profile.presenting.domain) if catalog is not None else None
    label = profile.presenting.label or (entry.label if entry else profile.presenting.domain.replace("_", " "))
    return {"id": profile.presenting.domain, "label": label}


def _turn_dicts(conversation: Conversation, up_to: int | None) -> list[dict[str, Any]]:
    return [
        {"turn": t.turn, "clinician": t.clinician, "patient": t.patient}
        for t in sorted(conversation.turns, key=lambda t: t.turn)
        if up_to is None or t.turn <= up_to
    ]


def rules_prompt(profile: Profile, catalog: "Catalog | None" = None) -> str:
    """The instructions and hidden-domain symptom lists: the same for every turn of a conversation,
    so rendered once per conversation and placed first (a provider's prefix cache can reuse it)."""
    return render_prompt("judge_rules", presenting=_presenting(profile, catalog), hidden=domain_briefs(profile, catalog))


def turn_prompt(conversation: Conversation, profile: Profile, turn: int, catalog: "Catalog | None" = None, *,
                rules: str | None = None) -> str:
    return render_prompt(
        "judge_turn", rules=rules if rules is not None else rules_prompt(profile, catalog),
        hidden=domain_briefs(profile, catalog), opening=conversation.opening, turns=_turn_dicts(conversation, turn),
        turn=turn,
    )


def conversation_prompt(conversation: Conversation, profile: Profile, catalog: "Catalog | None" = None, *,
                        rules: str | None = None) -> str:
    turns = _turn_dicts(conversation, None)
    return render_prompt(
        "judge_conversation", rules=rules if rules is not None else rules_prompt(profile, catalog),
        hidden=domain_briefs(profile, catalog),
        opening=conversation.opening, turns=turns, last_turn=turns[-1]["turn"] if turns else 0,
    )


def _turn_parser(number: int, hidden: Sequence[str]) -> Callable[[str], list[TurnJudgment]]:
    """Parses one turn's answer as the labels of turn ``number``."""
    return lambda text: [parse_turn(text, number, hidden)]


def _repair_prompt(error: str, mode: str, hidden: Sequence[str], turns: Sequence[int]) -> str:
    return render_prompt("judge_repair", error=error, mode=mode, turns=list(turns), hidden_ids=list(hidden),
                         question_types=list(QUESTION_TYPES))


# ---------------------------------------------------------------- calls

@dataclass
class _Outcome:
    turns: list[TurnJudgment] = field(default_factory=list)
    judge_error: str | None = None
    provider_error: ModelCallError | None = None
    refusal: str | None = None  # the judge declined (llm/answer.py): what it said, never read as labels
    truncated: int = 0  # answers cut at the token cap


def turn_cache_points(prompts: Sequence[str], static_length: int) -> list[tuple[tuple[int, int], ...]]:
    """Per turn prompt: where the prefixes it shares end — the static block (rules), the prefix it
    shares with the previous turn's prompt (read from the cache) and the one it shares with the next
    (written for it)."""
    points = []
    for k, prompt in enumerate(prompts):
        ends = {static_length}
        if k > 0:
            ends.add(len(os.path.commonprefix([prompts[k - 1], prompt])))
        if k + 1 < len(prompts):
            ends.add(len(os.path.commonprefix([prompt, prompts[k + 1]])))
        points.append(tuple((0, end) for end in sorted(ends) if 0 < end <= len(prompt)))
    return points


async def _ask(model: ChatModel, prompt: str, parse: Callable[[str], list[TurnJudgment]], *, mode: str,
               hidden: Sequence[str], turns: Sequence[int], context: dict[str, Any], meter: UsageMeter,
               sample_index: int, what: str, max_tokens: int | None = None,
               cache_points: tuple[tuple[int, int], ...] = ()) -> _Outcome:
    """One judge request and, if its answer does not validate, one repair request."""
    messages = [{"role": "user", "content": prompt}]
    schema = response_schema(hidden, mode, turns)
    cut = 0
    for attempt in range(2):
        request = ChatRequest(messages=messages, sample_index=sample_index, response_schema=schema,
                              purpose=RequestKind.JUDGE, context=context, max_tokens=max_tokens, cache_points=cache_points)
        try:
            result = await model.complete(request)
        except ModelCallError as exc:
            if exc.kind == "content_policy":  # the provider's safety system declined the request: a refusal
                return _Outcome(refusal=f"{what}: {exc.format_message()}", truncated=cut)
            return _Outcome(provider_error=exc, truncated=cut)
        meter.add(result)
        cut += int(truncated(result))
        problem = unusable(result)
        if problem is not None and problem.kind == "refused":  # a repair request cannot change a refusal
            return _Outcome(refusal=f"{what}: {problem.describe()}", truncated=cut)
        try:
            return _Outcome(turns=parse(result.text), truncated=cut)
        except JudgeOutputError as exc:
            why = f"{exc} (cut at the token cap)" if truncated(result) else str(exc)
            if attempt == 1:
                return _Outcome(judge_error=f"{what}: {why} (after one repair request)", truncated=cut)
            messages = messages + [
                {"role": "assistant", "content": result.text},
                {"role": "user", "content": _repair_prompt(why, mode, hidden, turns)},
            ]
    raise AssertionError("unreachable")


def _judge_name(judge_model: ChatModel) -> str:
    return judge_model.spec.alias or judge_model.spec.model


async def judge_conversation(conversation: Conversation, profile: Profile, judge_model: ChatModel,
                             mode: str = "per-turn", *, judge: str | None = None,
                             catalog: "Catalog | None" = None, attempt: int = 0) -> Judgment:
    """Label every turn (0..N) of one conversation against the profile's hidden domains.

    ``judge`` is the name written in the record (default: the model's alias, see judge_label);
    ``attempt`` varies the sample index so a retried judge error is not served from the cache.
    The judge's calls belong to the conversation (one replica, its routing key: llm/affinity.py).
    """
    with conversation_scope(conversation.conversation_id):
        return await _judge_all_turns(conversation, profile, judge_model, mode, judge=judge, catalog=catalog,
                                      attempt=attempt)


async def _judge_all_turns(conversation: Conversation, profile: Profile, judge_model: ChatModel, mode: str, *,
                           judge: str | None, catalog: "Catalog | None", attempt: int) -> Judgment:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    hidden = profile.hidden_domains
    meter = UsageMeter()
    base_context = {"role": "judge", "profile": profile, "conversation": conversation}
    turn_numbers = [0] + [t.turn for t in sorted(conversation.turns, key=lambda t: t.turn)]
    # An offline judge reads request.context, never the prompt: rendering 13 transcripts per
    # conversation for it would be most of the offline judging time. Its answer still goes
    # through the same parsing and validation as a provider's.
    offline = judge_model.spec.is_offline
    if mode == "per-turn" and offline:
        outcomes = await asyncio.gather(*[
            _ask(judge_model, OFFLINE_PROMPT, _turn_parser(number, hidden), mode=mode,
                 hidden=hidden, turns=[number], context={**base_context, "turn": number}, meter=meter,
                 sample_index=attempt, what=f"turn {number}")
            for number in turn_numbers
        ])
    elif mode == "per-turn":
        rules = rules_prompt(profile, catalog)
        turn_cap = max(judge_model.spec.max_tokens or 0, longest_answer_tokens(response_schema(hidden, mode)))
        prompts = [turn_prompt(conversation, profile, number, catalog, rules=rules) for number in turn_numbers]
        outcomes = []
        for number, prompt, points in zip(turn_numbers, prompts, turn_cache_points(prompts, len(rules))):
            outcomes.append(await _ask(
                judge_model, prompt, _turn_parser(number, hidden), mode=mode, hidden=hidden,
                turns=[number], context={**base_context, "turn": number}, meter=meter, sample_index=attempt,
                what=f"turn {number}", cache_points=points, max_tokens=turn_cap))
            if outcomes[-1].provider_error is not None or outcomes[-1].refusal is not None:
                break  # the conversation is retried as a whole later; the other turns would be paid twice
    else:
        # the rules are this profile's static block, shared with its other conversations' judgments
        rules = "" if offline else rules_prompt(profile, catalog)
        prompt = OFFLINE_PROMPT if offline else conversation_prompt(conversation, profile, catalog, rules=rules)
        outcomes = [await _ask(judge_model, prompt,
                               lambda text: parse_conversation(text, turn_numbers, hidden), mode=mode, hidden=hidden,
                               turns=turn_numbers,
                               context={**base_context, "turn": None}, meter=meter, sample_index=attempt,
                               what="conversation", cache_points=((0, len(rules)),) if rules else (),
                               max_tokens=_conversation_cap(judge_model, hidden, turn_numbers))]
    turns = sorted((t for outcome in outcomes for t in outcome.turns), key=lambda t: t.turn)
    provider = next((o.provider_error for o in outcomes if o.provider_error is not None), None)
    errors = [o.judge_error for o in outcomes if o.judge_error]
    refusals = [o.refusal for o in outcomes if o.refusal]
    if provider is not None:
        status = f"provider_error: {provider.kind}"
        errors = [str(provider.format_message())] + errors
    elif refusals:
        status, errors = "refused", refusals + errors
    else:
        status = "judge_error" if errors else "ok"
    return Judgment(
        conversation_id=conversation.conversation_id, judge=judge or _judge_name(judge_model),
        judge_model=judge_model.spec.model, clinician=conversation.clinician, profile_id=conversation.profile_id,
        phenotype=conversation.phenotype, condition=conversation.arm_condition, patient_mode=conversation.patient_mode,
        trial=conversation.trial, mode=mode, turns=turns, status=status, errors=errors, usage=meter.to_usage(),
        truncated=sum(o.truncated for o in outcomes),
    )


# ---------------------------------------------------------------- the stage


