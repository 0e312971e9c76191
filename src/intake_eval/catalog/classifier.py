"""Offline domain classifier: which domains a clinician utterance asks about SPECIFICALLY, and its
question type (closed_hypothesis, open, clarifying, treatment_planning, other).

Lexical rules from ``data/classifier_lexicon.yaml``. The utterance is split into sentences; only
sentences that ask (a question, or a request such as "tell me about…") can probe a domain, and
a sentence that recommends something ("try to get more sleep") never does. Within a sentence,
every domain family's patterns are matched and a match lying strictly inside a longer match of
another family is dropped, so the most specific phrase decides ("didnt need sleep" → mania).
Proximity rules (two word groups a few words apart, see ``lexicon_terms``) match loosely, so
their matches never drop another family's match.

A question the lexicon finds no domain in (not an open invitation by its form: see
``fallback_query``) takes the domains of the nearest shipped example question, if one is close
enough (``neighbours``); ``classify`` then shows that example instead of matched phrases.

Used by the offline patient, the offline tracker, the offline clinicians and the offline judge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from intake_eval.catalog.lexicon_terms import (
    compile_groups,
    expand,
    pattern_heads,
    proximity_patterns,
)
from intake_eval.catalog.neighbours import Nearest, shipped_index
from intake_eval.catalog.sentences import normalize, split_clauses, split_sentences
from intake_eval.core.yamlfile import read_yaml

LEXICON_PATH = Path(__file__).resolve().parents[1] / "data" / "classifier_lexicon.yaml"

_WORD_START = re.compile(r"\b\w")


@dataclass(frozen=True)
class Family:
    domains: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    # What the per-key prefilter tries for each pattern: its text (compiled from parse trees, patterns do not
    # keep it), or for a proximity rule only its first side, a much cheaper necessary condition.
    sources: tuple[str, ...]
    heads: tuple[set[str] | None, ...]  # what each pattern's matches can start with (see pattern_heads)
    proximity_from: int  # patterns from this position on come from proximity rules


Pairs = tuple[tuple[int, int], ...]  # (family, pattern) positions


@dataclass(frozen=True)
class Lexicon:
    families: tuple[Family, ...]
    # First three characters a match can start with (at a word start) -> (family, pattern) pairs,
    # ordinary patterns and proximity patterns apart, so a sentence tries only the few patterns it
    # could match; patterns whose start cannot be enumerated are always tried.
    pattern_index: dict[str, tuple[Pairs, Pairs]]
    always_tried: tuple[tuple[int, int], ...]
    advice: RuleSet
    advice_exceptions: RuleSet
    question_start: re.Pattern[str]
    anaphora: re.Pattern[str]
    quote: re.Pattern[str]
    open_follow_up: RuleSet
    request: RuleSet
    clarifying: RuleSet
    other: RuleSet
    # (key, part) -> one alternation of every pattern of that part indexed under the key, compiled on
    # first use: a word start none of them can match at is rejected by a single call.
    prefilters: dict[tuple[str, int], re.Pattern[str]] = field(default_factory=dict, compare=False)

    @property
    def domain_ids(self) -> list[str]:
        return sorted({d for family in self.families for d in family.domains if not d.startswith("_")})


@dataclass
class Classification:
    question_type: str
    domains: list[str]  # sorted domain ids the utterance asks about specifically
    scores: dict[str, float] = field(default_factory=dict)  # domain -> number of matched phrases
    matches: dict[str, list[str]] = field(default_factory=dict)  # domain -> matched phrases
    mentioned: list[str] = field(default_factory=list)  # domains named outside a question (advice, statements)
    nearest: Nearest | None = None  # the example the fallback consulted, when the lexicon found no domain

    def to_dict(self) -> dict:
        found = {key: getattr(self, key) for key in ("question_type", "domains", "scores", "matches", "mentioned")}
        return {**found, "nearest": self.nearest.explain()} if self.nearest else found


def _family(
    domains: tuple[str, ...], patterns: Iterable[str], source: str, proximity: Iterable[tuple[str, str]] = ()
) -> Family:
    """Each pattern is parsed once: the parse tree gives its possible starts for the index and is
    compiled as is (re.compile would parse the text a second time; loading is mostly parsing)."""
    # The stdlib's regex parser and compiler: private modules typeshed does not describe.
    from re import _compiler, _parser  # type: ignore[attr-defined]

    compiled, sources, heads = [], [], []
    own_leads = [(pattern, pattern) for pattern in patterns]
    proximity_from = len(own_leads)
    for pattern, lead in [*own_leads, *proximity]:
        try:
            tree = _parser.parse(pattern)
            heads.append(pattern_heads(list(tree.data), _KEY) if pattern.startswith(("\\b", "^")) else None)
            compiled.append(_compiler.compile(tree))
        except re.error as exc:  # a broken shipped lexicon is a bug worth naming precisely
            raise ValueError(f"{LEXICON_PATH.name}: {source}: bad pattern {pattern!r}: {exc}") from None
        sources.append(lead)
    return Family(domains, tuple(compiled), tuple(sources), tuple(heads), proximity_from)


@dataclass(frozen=True)
class RuleSet:
    """A yes/no rule list, indexed like the families so a sentence tries only plausible rules."""

    patterns: tuple[re.Pattern[str], ...]
    index: dict[str, tuple[int, ...]]
    always: tuple[int, ...]

    def any(self, sentence: str) -> bool:
        if any(self.patterns[number].search(sentence) for number in self.always):
            return True
        return any(
            self.patterns[number].search(sentence)
            for match in _WORD_START.finditer(sentence)
            for number in self.index.get(sentence[match.start():match.start() + _KEY], ())
        )


def _rules(patterns: list[str], source: str) -> RuleSet:
    family = _family((source,), patterns, source)
    index, always = _index_patterns((family,))
    return RuleSet(
        patterns=family.patterns,
        index={key: tuple(position for _, position in pairs) for key, (pairs, _) in index.items()},
        always=tuple(position for _, position in always),
    )


_KEY = 3  # characters of a match's start used to index families


def _index_patterns(families: tuple[Family, ...]) -> tuple[dict[str, tuple[Pairs, Pairs]], Pairs]:
    """key -> (ordinary, proximity) (family, pattern) pairs whose matches can start with that key at a
    word start. Apart, because a proximity rule's lead is often a common word ("feel", "you")."""
    index: dict[str, tuple[set[tuple[int, int]], set[tuple[int, int]]]] = {}
    always: list[tuple[int, int]] = []
    for number, family in enumerate(families):
        for position, heads in enumerate(family.heads):
            if heads is None or any(len(head) < _KEY for head in heads):
                always.append((number, position))
                continue
            for head in heads:
                index.setdefault(head, (set(), set()))[position >= family.proximity_from].add((number, position))
    return {key: (tuple(sorted(plain)), tuple(sorted(near))) for key, (plain, near) in index.items()}, tuple(always)


def _prefilter(lexicon: "Lexicon", key: str, part: int) -> re.Pattern[str]:
    compiled = lexicon.prefilters.get((key, part))
    if compiled is None:
        alternatives = (lexicon.families[i].sources[p] for i, p in lexicon.pattern_index[key][part])
        compiled = re.compile("|".join(f"(?:{alternative})" for alternative in alternatives))
        lexicon.prefilters[(key, part)] = compiled
    return compiled


def _find_matches(sentence: str, lexicon: "Lexicon", exhaustive: bool) -> list[tuple[int, int, int, int, str]]:
    """(family, pattern, start, end, phrase) of every non-empty match, exactly the matches finditer
    gives, sorted. Indexed patterns are tried only at the word starts whose first characters they can
    begin with (one anchored try each), skipping starts inside that pattern's previous match."""
    found: list[tuple[int, int, int, int, str]] = []
    scanned = (
        [(i, p) for i, family in enumerate(lexicon.families) for p in range(len(family.patterns))]
        if exhaustive else lexicon.always_tried
    )
    for number, position in scanned:
        for match in lexicon.families[number].patterns[position].finditer(sentence):
            if match.end() > match.start():
                found.append((number, position, match.start(), match.end(), match.group(0)))
    if not exhaustive:
        ends: dict[tuple[int, int], int] = {}
        for word in _WORD_START.finditer(sentence):
            start = word.start()
            key = sentence[start:start + _KEY]
            for part, pairs in enumerate(lexicon.pattern_index.get(key, ())):
                if not pairs or not _prefilter(lexicon, key, part).match(sentence, start):
                    continue
                for pair in pairs:
                    if start < ends.get(pair, 0):
                        continue
                    anchored = lexicon.families[pair[0]].patterns[pair[1]].match(sentence, start)
                    if anchored and anchored.end() > start:
                        ends[pair] = anchored.end()
                        found.append((pair[0], pair[1], start, anchored.end(), anchored.group(0)))
    found.sort()
    return found


@lru_cache(maxsize=1)
def load_lexicon(path: Path = LEXICON_PATH) -> Lexicon:
    data = read_yaml(path)
    groups = compile_groups(data.get("groups") or {})
    near = data.get("near") or {}
    families = tuple(
        _family(
            tuple(key.split("+")),
            [expand(pattern, groups) for pattern in data["families"].get(key, [])],
            key,
            [pattern for rule in near.get(key, []) for pattern in proximity_patterns(rule, groups)],
        )
        for key in [*data["families"], *(key for key in near if key not in data["families"])]
    )
    pattern_index, always_tried = _index_patterns(families)
    return Lexicon(
        families=families,
        pattern_index=pattern_index,
        always_tried=always_tried,
        advice=_rules(data["advice"], "advice"),
        advice_exceptions=_rules(data["advice_exceptions"], "advice_exceptions"),
        question_start=re.compile(data["question_start"]),
        anaphora=re.compile(data["anaphora"]),
        quote=re.compile(data["quote"]),
        open_follow_up=_rules(data["open_follow_up"], "open_follow_up"),
        request=_rules(data["request"], "request"),
        clarifying=_rules(data["clarifying"], "clarifying"),
        other=_rules(data["other"], "other"),
    )


def domain_ids() -> list[str]:
    """Every domain id the lexicon knows (must equal the catalog's)."""
    return load_lexicon().domain_ids



def is_asking(sentence: str, lexicon: Lexicon | None = None) -> bool:
    lexicon = lexicon or load_lexicon()
    return sentence.endswith("?") or bool(lexicon.question_start.search(sentence)) or lexicon.request.any(sentence)


def is_advice(sentence: str, lexicon: Lexicon | None = None) -> bool:
    lexicon = lexicon or load_lexicon()
    return lexicon.advice.any(sentence) and not lexicon.advice_exceptions.any(sentence)


def sentence_domains(sentence: str, lexicon: Lexicon | None = None, *, exhaustive: bool = False) -> dict[str, list[str]]:
    """Domain -> matched phrases in one normalized sentence, most specific match winning.
    ``exhaustive`` tries every pattern instead of the indexed candidates (tests compare both)."""
    lexicon = lexicon or load_lexicon()
    matches = _find_matches(sentence, lexicon, exhaustive)
    found = [(start, end, index, phrase) for index, _, start, end, phrase in matches]
    shadowing = [
        (start, end, index)
        for index, position, start, end, _ in matches
        if position < lexicon.families[index].proximity_from
    ]
    result: dict[str, list[str]] = {}
    for start, end, index, phrase in found:
        shadowed = any(
            other_index != index and o_start <= start and end <= o_end and (o_end - o_start) > (end - start)
            for o_start, o_end, other_index in shadowing
        )
        if shadowed:
            continue
        for domain in lexicon.families[index].domains:
            if domain.startswith("_"):  # a frame: shadows, never reported
                continue
            phrases = result.setdefault(domain, [])
            if phrase not in phrases:
                phrases.append(phrase)
    return result


def mentions(text: str) -> dict[str, list[str]]:
    """Domain features named anywhere in a text (any sentence form) — e.g. what a patient said."""
    lexicon = load_lexicon()
    merged: dict[str, list[str]] = {}
    for sentence in split_sentences(text):
        for domain, phrases in sentence_domains(sentence, lexicon).items():
            merged.setdefault(domain, []).extend(p for p in phrases if p not in merged.get(domain, []))
    return merged


def _undirected_type(asking: list[str], sentences: list[str], lexicon: Lexicon) -> str:
    """Question type of an utterance that asks about no domain and recommends nothing."""
    if not asking:
        return "other"  # statements only: empathy, summary, wrap-up
    if all(lexicon.other.any(sentence) for sentence in asking):
        return "other"
    # "You mentioned your job — what happened there?": the follow-up cue may sit in a statement.
    if any(lexicon.clarifying.any(sentence) for sentence in sentences):
        return "clarifying"
    return "open"


FALLBACK_TYPES = ("open", "clarifying")  # a question about no domain the lexicon knows; not advice or small talk


def fallback_query(text: str) -> str | None:
    """What the nearest-example fallback compares if the lexicon finds no domain in ``text``: its
    asking sentences, or None when it is not that kind of question (advice, statements, small talk)."""
    lexicon = load_lexicon()
    sentences = split_sentences(text)
    if any(is_advice(sentence, lexicon) for sentence in sentences):
        return None
    asking = [sentence for sentence in sentences if is_asking(sentence, lexicon)]
    return " ".join(asking) if _undirected_type(asking, sentences, lexicon) in FALLBACK_TYPES else None


def example_document(text: str) -> str:
    return fallback_query(text) or normalize(text)


def _follows_up(question: str, quoted: bool, lexicon: Lexicon) -> bool:
    """Whether a question asks about the experience the statement before it described: it points
    back at it ("has that happened to you?"), or that statement quoted the patient and the question
    is neither an open feelings question nor a check of a summary ("how does that make you feel?")."""
    if lexicon.anaphora.search(question):
        return True
    return quoted and not lexicon.open_follow_up.any(question) and not lexicon.other.any(question)


def classify(text: str, *, disclosed: Iterable[str] = ()) -> Classification:
    """Classify one clinician utterance.

    ``disclosed``: domains the patient has already talked about (presenting concern included);
    a question confined to them is "clarifying", a question reaching a new domain is
    "closed_hypothesis".
    """
    lexicon = load_lexicon()
    asked: dict[str, list[str]] = {}
    mentioned: set[str] = set()
    asking_sentences: list[str] = []
    advice = False
    described: dict[str, list[str]] = {}  # domains of the statement just before, for "anything like that?"
    quoted = False  # that statement quotes the patient ("You said you barely sleep — ...")
    clauses = split_clauses(text)
    sentences = [sentence for sentence, _ in clauses]
    for sentence, dashed in clauses:
        domains = sentence_domains(sentence, lexicon)
        if is_advice(sentence, lexicon):
            advice = True
            mentioned.update(domains)
            described = {}
        elif is_asking(sentence, lexicon):
            asking_sentences.append(sentence)
            # "Blackouts after drinking — any in the last year?": a dash joins a question to its subject.
            if described and _follows_up(sentence, quoted or dashed, lexicon):
                domains = {**described, **domains}
            for domain, phrases in domains.items():
                asked.setdefault(domain, []).extend(p for p in phrases if p not in asked.get(domain, []))
            described = {}
        else:
            mentioned.update(domains)
            described = domains
            quoted = bool(lexicon.quote.search(sentence))
    nearest = None
    if not asked and not advice and _undirected_type(asking_sentences, sentences, lexicon) in FALLBACK_TYPES:
        nearest = shipped_index(example_document).nearest(" ".join(asking_sentences))
        asked = {domain: [nearest.explain()] for domain in nearest.domains} if nearest else {}
    if asked:
        question_type = "clarifying" if set(asked) <= set(disclosed) else "closed_hypothesis"
    elif advice:
        question_type = "treatment_planning"
    else:
        question_type = _undirected_type(asking_sentences, sentences, lexicon)
    asked_domains = sorted(asked)
    return Classification(
        question_type=question_type,
        domains=asked_domains,
        scores={domain: float(len(asked[domain])) for domain in asked_domains},
        matches={domain: asked[domain] for domain in asked_domains},
        mentioned=sorted(mentioned - set(asked)),
        nearest=nearest,
    )
