"""Stage 6: a generator model writes each domain's first-person phenomenology; QC checks it.

QC: every sampled symptom must appear in the domain's text verbatim or as a close paraphrase
(rapidfuzz; score 0-100 against ``threshold``). A domain that fails goes back on the retry queue
with the missing symptoms named in the prompt, up to ``max_attempts`` rounds. A profile whose
domains never all pass comes back with ``render.qc_passed = False`` and ``render.failure`` set; the
caller reports it (render_failures.jsonl) instead of keeping it.

The presenting domain's text is what the patient's opening is built from, so QC also reads it with
the offline classifier (catalog.classifier.mentions): a hidden domain detectable in it sends the
domain back for another round, naming the areas to leave out; still there after ``max_attempts``
rounds, the profile fails QC like a missing symptom (reported, never kept).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from intake_eval.catalog.classifier import mentions
from intake_eval.core.prompts import render_prompt
from intake_eval.core.records import DomainDraw, Profile, RenderFailure, RenderInfo
from intake_eval.llm.base import ChatRequest, ModelCallError, UsageMeter
from intake_eval.llm.request_kind import RequestKind

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.generate.sampling import Trace
    from intake_eval.llm.base import ChatModel, ChatResult  # noqa: F401

QC_THRESHOLD = 85.0
MAX_ATTEMPTS = 3
RENDER_TEMPLATE = "render_domain"
# ASCII punctuation (except the apostrophe) and curly quotes/dashes → spaces; str.translate is
# an order of magnitude faster than a regex here, which matters for 60,000 renders.
_TO_SPACE = str.maketrans({ch: " " for ch in '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\u201c\u201d\u2013\u2014\u2026'}
                          | {"\u2019": "'", "\u2018": "'"})
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


# ---------------------------------------------------------------- QC (pure)

def normalise(text: str) -> str:
    return " ".join(text.lower().translate(_TO_SPACE).split())


@lru_cache(maxsize=4096)
def _normalised_symptom(symptom: str) -> str:
    return normalise(symptom)


def symptom_score(symptom: str, text: str, body: str | None = None) -> float:
    """0-100: how well ``text`` carries ``symptom``. Verbatim → 100; a close paraphrase scores high
    either as a near-identical span (partial ratio) or as one sentence holding all its words in
    another order (token set ratio)."""
    wanted = _normalised_symptom(symptom)
    body = normalise(text) if body is None else body
    if not wanted or wanted in body:
        return 100.0
    from rapidfuzz import fuzz  # only paraphrases reach here

    best = fuzz.partial_ratio(wanted, body)
    for sentence in _SENTENCE.split(text):
        if best >= 100:
            break
        best = max(best, fuzz.token_set_ratio(wanted, normalise(sentence)) if sentence.strip() else 0.0)
    return round(float(best), 1)


def qc_domain(draw: DomainDraw, text: str, threshold: float = QC_THRESHOLD) -> tuple[dict[str, float], list[int]]:
    """(score per symptom id, indices of symptoms below the threshold)."""
    scores, missing = {}, []
    body = normalise(text)
    for index, symptom in enumerate(draw.symptoms):
        score = symptom_score(symptom, text, body)
        key = draw.symptom_ids[index] if index < len(draw.symptom_ids) else str(index)
        scores[key] = score
        if score < threshold:
            missing.append(index)
    return scores, missing


def disclosed_hidden(profile: Profile, text: str) -> dict[str, list[str]]:
    """Hidden domains of the profile the classifier detects in a text, with the phrases it matched."""
    hidden = set(profile.hidden_domains)
    return {domain: phrases for domain, phrases in mentions(text).items() if domain in hidden}


def clean_render(text: str) -> str:
    """Strip wrapping quotes and whitespace a model may add around the paragraph."""
    text = text.strip()
    if len(text) >= 2 and text[0] in "\"'\u201c" and text[-1] in "\"'\u201d":
        text = text[1:-1].strip()
    return text


# ---------------------------------------------------------------- one domain, one attempt

def render_messages(profile: Profile, draw: DomainDraw, is_presenting: bool, missing: list[str], catalog: "Catalog",
                    avoid: Sequence[str] = ()):
    domain = catalog.domains.get(draw.domain)
    content = render_prompt(
        RENDER_TEMPLATE,
        profile=profile,
        draw=draw,
        description=domain.description if domain is not None else "",
        is_presenting=is_presenting,
        missing=missing,
        avoid=list(avoid),
    )
    return [{"role": "user", "content": content}]


async def _render_once(model: "ChatModel", profile: Profile, draw: DomainDraw, is_presenting: bool,
                       attempt: int, missing: list[str], catalog: "Catalog",
                       meter: "UsageMeter | None", avoid: Sequence[str] = ()) -> tuple[str, str | None]:
    """(rendered text, None) or ("", why the call failed)."""
    spec = getattr(model, "spec", None)
    # Offline participants read request.context, never the prompt: skip rendering it for them.
    offline = spec is not None and spec.is_offline
    request = ChatRequest(
        messages=[] if offline else render_messages(profile, draw, is_presenting, missing, catalog, avoid),
        sample_index=attempt - 1,
        purpose=RequestKind.GENERATOR,
        context={"role": "generator", "profile": profile, "domain": draw, "is_presenting": is_presenting,
                 "attempt": attempt},
    )
    try:
        result: ChatResult = await model.complete(request)
    except ModelCallError as error:
        if error.kind == "fatal":
            raise  # a bad key or model id: retrying other profiles cannot help
        return "", f"{error.kind}: {error}"  # a failed attempt; the retry queue gets another go
    if meter is not None:
        meter.add(result)
    return clean_render(result.text), None


# ---------------------------------------------------------------- one profile

async def render_profile(profile: Profile, model: "ChatModel", catalog: "Catalog", *,
                         max_attempts: int = MAX_ATTEMPTS, threshold: float = QC_THRESHOLD,
                         generator: str = "", semaphore: asyncio.Semaphore | None = None,
                         meter: "UsageMeter | None" = None, trace: "Trace | None" = None) -> Profile:
    """Render every domain, QC it, retry failed domains (naming what was missing) up to
    ``max_attempts`` rounds. Returns a copy with phenomenology and ``render`` filled in."""
    draws = [profile.presenting.model_copy()] + [draw.model_copy() for draw in profile.hidden]
    pending = list(range(len(draws)))
    missing_texts: dict[int, list[str]] = {i: [] for i in pending}
    disclosed: dict[str, list[str]] = {}  # hidden domain → phrases the classifier found in the presenting text
    scores: dict[str, float] = {}
    rounds = 0
    spec = getattr(model, "spec", None)
    offline = spec is not None and spec.is_offline

    errors: dict[int, str] = {}
    own = UsageMeter()  # this profile's calls, kept in its record

    def why(i: int) -> str:
        if not draws[i].phenomenology:
            return errors.get(i) or "empty render"
        reasons = ["missing " + "; ".join(missing_texts[i])] if missing_texts[i] else []
        if i == 0 and disclosed:
            reasons.append("discloses hidden " + "; ".join(
                f"{domain} ({', '.join(repr(p) for p in phrases)})" for domain, phrases in sorted(disclosed.items())))
        return ", ".join(reasons)

    def avoid(i: int) -> list[str]:
        """The hidden areas the last presenting draft touched on, with the words that gave them away."""
        if i != 0:
            return []
        return [f"{catalog.domains[d].label if d in catalog.domains else d} (your words: "
                f"{', '.join(repr(p) for p in phrases)})" for d, phrases in sorted(disclosed.items())]

    async def attempt_one(i: int, attempt: int) -> tuple[int, tuple[str, str | None]]:
        if semaphore is None:
            return i, await _render_once(model, profile, draws[i], i == 0, attempt, missing_texts[i], catalog, own,
                                         avoid(i))
        async with semaphore:
            return i, await _render_once(model, profile, draws[i], i == 0, attempt, missing_texts[i], catalog, own,
                                         avoid(i))

    while pending and rounds < max_attempts:
        rounds += 1
        if len(pending) == 1 or offline:
            # offline generators answer instantly: tasks would only add overhead
            results = [await attempt_one(i, rounds) for i in pending]
        else:
            results = await asyncio.gather(*(attempt_one(i, rounds) for i in pending))
        still = []
        for i, (text, error) in results:
            draw = draws[i]
            if error:
                errors[i] = error
            domain_scores, missing = qc_domain(draw, text, threshold)
            draw.phenomenology = text
            scores.update({f"{draw.domain}/{key}": value for key, value in domain_scores.items()})
            missing_texts[i] = [draw.symptoms[m] for m in missing]
            if not text:
                still.append(i)
                missing_texts[i] = list(draw.symptoms)
            elif missing:
                still.append(i)
            if i == 0:
                disclosed = disclosed_hidden(profile, text) if text else {}
                if disclosed and i not in still:
                    still.append(i)
            if trace is not None:
                verdict = "passed" if i not in still else f"failed: {why(i)}"
                trace.note(6, f"{draw.domain} (attempt {rounds}): QC {verdict}")
        pending = still

    failure = "; ".join(f"{draws[i].domain}: {why(i)}" for i in pending) if pending else None
    info = RenderInfo(generator=generator, attempts=rounds, qc_passed=not pending, qc_scores=scores, failure=failure,
                      usage=own.to_usage())
    if meter is not None:
        meter.merge(own)
    return profile.model_copy(update={"presenting": draws[0], "hidden": draws[1:], "render": info})


def failure_record(profile: Profile, threshold: float = QC_THRESHOLD) -> RenderFailure:
    """What render_failures.jsonl holds for a profile that never passed QC."""
    missing: dict[str, list[str]] = {}
    for draw in [profile.presenting] + profile.hidden:
        low = [text for text, sid in zip(draw.symptoms, draw.symptom_ids or draw.symptoms)
               if profile.render.qc_scores.get(f"{draw.domain}/{sid}", 0.0) < threshold]
        if low:
            missing[draw.domain] = low
    return RenderFailure(profile_id=profile.profile_id, phenotype=profile.phenotype,
                         generator=profile.render.generator, attempts=profile.render.attempts,
                         missing=missing, failure=profile.render.failure or "", usage=profile.render.usage)
