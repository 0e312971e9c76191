"""offline/judge: a rule-based judge that labels the *text* of a conversation.

- question_type and asked_about come from the clinician's words (the offline classifier).
- disclosed comes from whether the patient's reply carries a hidden domain's content: each
  sentence of the reply is fuzzy-matched (rapidfuzz partial_ratio) against every domain's symptom
  texts and those rendered phenomenology sentences that carry a symptom (framing such as "it comes
  and goes" names no domain), and is attributed to its best-matching domain when the score clears
  a threshold — so presenting-concern talk is not mistaken for a hidden domain, and a denial
  ("no, not really") discloses nothing.
- patient_faithful is false when the reply discloses a hidden domain that this turn did not ask
  about and that had not come up before (elaborating on something already disclosed is no leak).

It never reads the offline patient's unlock log (ConversationTurn.tracker). It answers with JSON in
exactly the schema a real judge returns, so parsing and validation are one code path.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from intake_eval.catalog.classifier import classify
from intake_eval.core.records import Conversation, Profile
from intake_eval.llm.base import ChatRequest, ChatResult, ModelCallError, ModelSpec

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

MATCH_THRESHOLD = 82.0  # partial_ratio (0-100) a sentence needs to count as a domain's content
MIN_CANDIDATE_CHARS = 12  # shorter phrases match too much by chance
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def _content_words(processed: str) -> set[str]:
    return {word for word in processed.split() if len(word) >= 5}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.strip()) >= MIN_CANDIDATE_CHARS]


class _ProfileMatcher:
    """Per profile: each domain's reference phrases, and which domains a reply carries."""

    def __init__(self, profile: Profile):
        from rapidfuzz import fuzz, process, utils

        self.domains: list[str] = []
        self.phrases: list[str] = []
        for draw in [profile.presenting, *profile.hidden]:
            symptoms = [p for p in (utils.default_process(s) for s in draw.symptoms) if len(p) >= MIN_CANDIDATE_CHARS]
            # A phenomenology sentence is a reference only if it carries one of the domain's
            # symptoms: frequency or framing sentences ("it comes and goes") say nothing about
            # which domain, and matching them would invent disclosures.
            candidates = [utils.default_process(s) for s in _sentences(draw.phenomenology)]
            rendered = []
            if symptoms and candidates:
                scores = process.cdist(symptoms, candidates, scorer=fuzz.partial_ratio, score_cutoff=MATCH_THRESHOLD)
                rendered = [sentence for sentence, best in zip(candidates, scores.max(axis=0)) if best >= MATCH_THRESHOLD]
            for phrase in dict.fromkeys([*symptoms, *rendered]):
                self.domains.append(draw.domain)
                self.phrases.append(phrase)
        # Best (score, phrase index) per reply sentence. A quoted reference sentence needs no fuzzy
        # search (the common case for offline/patient); filler sentences recur across turns.
        self._sentence_best: dict[str, tuple[float, int]] = {
            phrase: (100.0, index) for index, phrase in reversed(list(enumerate(self.phrases)))}
        self._replies: dict[str, dict[str, tuple[float, str]]] = {}
        # Content word (5+ letters) → phrases containing it: a sentence sharing no such word with a
        # phrase cannot reach the threshold in practice, and filler ("no, not really") skips the search.
        self._by_word: dict[str, set[int]] = {}
        for index, phrase in enumerate(self.phrases):
            for word in _content_words(phrase):
                self._by_word.setdefault(word, set()).add(index)

    def carried(self, reply: str) -> dict[str, tuple[float, str]]:
        """Domain → (best score, the reply sentence) for domains the reply carries (memoised)."""
        if reply not in self._replies:
            if len(self._replies) > 2048:
                self._replies.clear()
            self._replies[reply] = self._match(reply)
        return self._replies[reply]

    def _match(self, reply: str) -> dict[str, tuple[float, str]]:
        from rapidfuzz import fuzz, process, utils

        sentences = [s for s in (utils.default_process(s) for s in _sentences(reply)) if s]
        if not sentences or not self.phrases:
            return {}
        for sentence in dict.fromkeys(sentences):
            if sentence in self._sentence_best:
                continue
            indices = sorted(set().union(*(self._by_word.get(w, ()) for w in _content_words(sentence))))
            match = process.extractOne(sentence, [self.phrases[i] for i in indices], scorer=fuzz.partial_ratio,
                                       score_cutoff=MATCH_THRESHOLD) if indices else None
            self._sentence_best[sentence] = (float(match[1]), indices[match[2]]) if match else (0.0, -1)
        best = [self._sentence_best[sentence] for sentence in sentences]
        found: dict[str, tuple[float, str]] = {}
        for sentence, (score, index) in zip(sentences, best):
            # A short sentence can sit inside a long phrase by chance; require comparable length.
            if score < MATCH_THRESHOLD or index < 0 or len(sentence) < 0.5 * min(len(self.phrases[index]), 80):
                continue
            domain = self.domains[index]
            if score > found.get(domain, (0.0, ""))[0]:
                found[domain] = (score, sentence)
        return found


class OfflineJudge:
    def __init__(self, spec: ModelSpec, catalog: "Catalog | None" = None):
        self.spec = spec
        self.catalog = catalog
        self._matchers: OrderedDict[tuple, _ProfileMatcher] = OrderedDict()
        self._questions: OrderedDict[tuple[str, frozenset[str]], tuple[str, frozenset[str]]] = OrderedDict()

    # Small LRU caches (per profile, and per reply inside each matcher): per-turn mode asks about
    # every turn of a conversation, each needing the disclosures of all earlier replies. Keyed by
    # content, never by conversation id: a rerun conversation has new text.
    def _matcher(self, profile: Profile) -> _ProfileMatcher:
        key = _profile_key(profile)
        if key not in self._matchers:
            self._matchers[key] = _ProfileMatcher(profile)
            if len(self._matchers) > 256:
                self._matchers.popitem(last=False)
        return self._matchers[key]

    def _classify(self, words: str, disclosed: set[str]) -> tuple[str, frozenset[str]]:
        """(question_type, asked domains), memoised: offline clinicians repeat their questions.

        The classifier's answer depends on ``disclosed`` only through the asked domains (a question
        confined to disclosed ones is clarifying), so the key keeps just that intersection."""

        def cached(known: frozenset[str]) -> tuple[str, frozenset[str]]:
            key = (words, known)
            if key not in self._questions:
                classification = classify(words, disclosed=sorted(known))
                self._questions[key] = (classification.question_type, frozenset(classification.domains))
                if len(self._questions) > 8192:
                    self._questions.popitem(last=False)
            return self._questions[key]

        question_type, asked = cached(frozenset())
        relevant = frozenset(asked & disclosed)
        return cached(relevant) if relevant else (question_type, asked)

    def _label_turn(self, profile: Profile, conversation: Conversation, number: int) -> dict[str, Any]:
        matcher = self._matcher(profile)
        turns = {t.turn: t for t in conversation.turns}
        # What came up before this turn: the opening (unless this is it) and earlier replies.
        earlier = ([conversation.opening] if number > 0 else []) + [turns[t].patient for t in sorted(turns) if t < number]
        disclosed_before = {profile.presenting.domain}
        for reply in earlier:
            disclosed_before |= set(matcher.carried(reply))
        asked: frozenset[str]
        if number == 0:
            question_type, asked = "other", frozenset()
        else:
            question_type, asked = self._classify(turns[number].clinician, disclosed_before)
        reply = conversation.opening if number == 0 else turns[number].patient
        carried = matcher.carried(reply)
        domains, leaked = [], []
        for domain in profile.hidden_domains:
            is_asked, is_disclosed = domain in asked, domain in carried
            if is_disclosed and not is_asked and domain not in disclosed_before:
                leaked.append(domain)
            domains.append({
                "domain": domain,
                "reasoning": _domain_reason(domain, is_asked, carried.get(domain), number),
                "asked_about": is_asked,
                "disclosed": is_disclosed,
            })
        reasoning = f"classifier: {question_type}" + (f"; asked about {sorted(asked)}" if asked else "")
        if leaked:
            reasoning += f"; reply volunteers {leaked} without a specific question"
        return {"turn": number, "reasoning": reasoning, "question_type": question_type,
                "patient_faithful": not leaked, "domains": domains}

    async def complete(self, request: ChatRequest) -> ChatResult:
        context = request.context or {}
        if context.get("role") != "judge":
            raise ModelCallError("offline/judge needs a judge request context (role 'judge')", kind="fatal")
        profile: Profile = context["profile"]
        conversation: Conversation = context["conversation"]
        turn = context.get("turn")
        if turn is None:
            numbers = [0] + sorted(t.turn for t in conversation.turns)
            answer: dict[str, Any] = {"turns": [self._label_turn(profile, conversation, n) for n in numbers]}
        else:
            answer = self._label_turn(profile, conversation, int(turn))
        return ChatResult(text=json.dumps(answer, ensure_ascii=False), model=self.spec.model, finish_reason="stop")


def _profile_key(profile: Profile) -> tuple:
    """What the matcher depends on: the domains and their texts (a regenerated profile differs)."""
    return tuple((d.domain, tuple(d.symptoms), d.phenomenology) for d in [profile.presenting, *profile.hidden])


def _domain_reason(domain: str, asked: bool, match: tuple[float, str] | None, number: int) -> str:
    asked_part = ("opening statement: nothing asked" if number == 0 else
                  "the clinician asked about a specific feature of it" if asked else "no specific question about it")
    disclosed_part = (f"reply carries its content ('{match[1][:80]}', score {match[0]:.0f})" if match
                      else "reply does not carry its content")
    return f"{domain}: {asked_part}; {disclosed_part}."
