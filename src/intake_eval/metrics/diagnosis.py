"""Scoring a post-intake case formulation against the profile's ground truth, through the catalog.

Mapping a free-text diagnosis to a catalog domain is deterministic; the first rule that applies wins
and is recorded with its method:

1. ``icd10``: a code in the answer equals a catalog code (several domains share it → the one whose
   names best match the diagnosis name, ties in catalog order).
2. ``name``: the normalized name equals a domain's diagnosis name, synonym, phenotype principal
   diagnosis name, id ("alcohol use") or lay label.
3. ``name_contains``: such a term occurs in the name as whole words ("Major depressive disorder,
   recurrent, moderate"); the longest term wins. Acronyms (MDD, PTSD, SI …) match case-sensitively.
4. ``icd10_prefix``: a code is a prefix of a catalog code or vice versa ("F43.1" → F43.10), at least
   three characters; ambiguity is resolved as in 1.
5. ``fuzzy``: rapidfuzz similarity (max of ratio and token_sort_ratio) ≥ FUZZY_THRESHOLD against a term
   of at least five characters ("Generalised anxiety disorder").
Otherwise the diagnosis is ``unmapped`` (recorded, excluded from precision). An entry that negates
itself ("psychosis ruled out", "no evidence of mania") is ``negated`` and counts as unmapped.

Scores of one conversation (``score_formulation``), all over the profile's domains:
- principal_hit: the principal working diagnosis maps to the phenotype's principal-diagnosis domain
  (its diagnostic core: for a masked phenotype that is a hidden domain, e.g. hypomania).
- comorbidity_recall = |hidden ∩ named| / |hidden|, where named = the domains of every mapped
  diagnosis (principal and differential).
- comorbidity_precision = |named' ∩ hidden| / |named'|, where named' = named minus the presenting
  domain (naming what the patient came in with is neither a right nor a wrong comorbidity); empty
  when named' is empty. Unmapped diagnoses are in neither count (``n_unmapped`` reports them).
- unearned_share = recalled hidden domains never actively surfaced in the interview (no turn where
  the judge marked the domain asked_about and disclosed) ÷ recalled hidden domains; empty when
  nothing was recalled. A diagnosis the conversation did not earn (a guess, or passive disclosure).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from intake_eval.core.formulation import DiagnosisRef, Formulation

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

FUZZY_THRESHOLD = 90.0
MIN_FUZZY_TERM = 5
_CODE = re.compile(r"\b([A-TV-Z][0-9][0-9A-Z])(?:\.?([0-9A-Z]{1,4}))?\b")
_NEGATED = re.compile(r"(\bruled out\b|\bexcluded\b|\bno evidence (of|for)\b|\bnot (present|met|supported)\b|^\s*(no|none)\b)", re.I)
_WORD = re.compile(r"[^a-z0-9]+")


def normalize(text: str) -> str:
    """Lower case, apostrophes dropped, every other non-alphanumeric run a single space."""
    return _WORD.sub(" ", text.lower().replace("'", "").replace("’", "")).strip()


def normalize_code(code: str) -> str:
    """ "f32.1" / "F321" / " F32.1 " → "F32.1" (three characters, a dot, the rest)."""
    match = _CODE.search(code.upper())
    if not match:
        return ""
    head, tail = match.group(1), match.group(2)
    return f"{head}.{tail}" if tail else head


def codes_in(text: str) -> list[str]:
    """Every ICD-10 code written in a field, in order ("F41.0, F40.01" → both)."""
    out = []
    for match in _CODE.finditer(text.upper()):
        code = f"{match.group(1)}.{match.group(2)}" if match.group(2) else match.group(1)
        if code not in out:
            out.append(code)
    return out


@dataclass(frozen=True)
class Term:
    domain: str
    text: str  # normalized
    original: str
    acronym: bool


@dataclass(frozen=True)
class Matcher:
    domain_order: tuple[str, ...]
    terms: tuple[Term, ...]
    exact: dict[str, str]  # normalized term -> domain (first in catalog order)
    codes: dict[str, tuple[str, ...]]  # normalized code -> domains


def _is_acronym(term: str) -> bool:
    letters = [c for c in term if c.isalpha()]
    return len(term) <= 6 and bool(letters) and all(c.isupper() for c in letters)


def build_matcher(catalog: "Catalog") -> Matcher:
    terms: list[Term] = []
    codes: dict[str, list[str]] = {}

    def add(domain: str, text: str) -> None:
        normalized = normalize(text)
        if normalized:
            terms.append(Term(domain, normalized, text.strip(), _is_acronym(text.strip())))

    for domain in catalog.domains.values():
        for diagnosis in domain.diagnoses:
            add(domain.id, diagnosis.name)
            for synonym in diagnosis.synonyms:
                add(domain.id, synonym)
            for code in diagnosis.icd10:
                owners = codes.setdefault(normalize_code(code), [])
                if domain.id not in owners:
                    owners.append(domain.id)
        add(domain.id, domain.id.replace("_", " "))
        add(domain.id, domain.label)
    for phenotype in catalog.phenotypes.values():
        add(phenotype.principal_diagnosis.domain, phenotype.principal_diagnosis.name)
    exact: dict[str, str] = {}
    for term in terms:
        if not term.acronym:
            exact.setdefault(term.text, term.domain)
    return Matcher(tuple(catalog.domains), tuple(terms), exact, {k: tuple(v) for k, v in codes.items() if k})


_MATCHERS: dict[int, tuple["Catalog", Matcher]] = {}


def matcher_for(catalog: "Catalog") -> Matcher:
    """Built once per loaded catalog (catalogs are cached by load_catalog, and not hashable)."""
    held = _MATCHERS.get(id(catalog))
    if held is None or held[0] is not catalog:
        held = _MATCHERS[id(catalog)] = (catalog, build_matcher(catalog))
    return held[1]


@dataclass(frozen=True)
class Mapping:
    """One diagnosis of a formulation and the catalog domain it counts for (None = unmapped)."""

    slot: str  # "principal" or "differential[i]"
    name: str
    icd10: str
    domain: str | None
    method: str  # icd10 | name | name_contains | icd10_prefix | fuzzy | negated | unmapped
    score: float | None = None  # fuzzy similarity (0-100) where one was used
    candidates: tuple[str, ...] = ()  # the domains an ambiguous code pointed to


def _fuzzy(a: str, b: str) -> float:
    from rapidfuzz import fuzz

    return max(fuzz.ratio(a, b), fuzz.token_sort_ratio(a, b))


def _name_score(matcher: Matcher, name: str, domain: str) -> float:
    normalized = normalize(name)
    return max((_fuzzy(normalized, t.text) for t in matcher.terms if t.domain == domain), default=0.0)


def _pick(matcher: Matcher, name: str, candidates: Sequence[str]) -> str:
    """The candidate domain whose names best match ``name``; ties go to catalog order."""
    if len(candidates) == 1:
        return candidates[0]
    by_name = _by_name(matcher, name)
    if by_name is not None and by_name[0] in candidates:
        return by_name[0]
    ranked = sorted(candidates, key=lambda d: (-_name_score(matcher, name, d), matcher.domain_order.index(d)))
    return ranked[0]


def _contained(term: Term, normalized: str, original: str) -> bool:
    if term.acronym:
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(term.original)}(?![A-Za-z0-9])", original) is not None
    return f" {term.text} " in f" {normalized} "


def _by_name(matcher: Matcher, name: str) -> tuple[str, str] | None:
    """(domain, method) from the exact and contained-term rules, or None."""
    normalized = normalize(name)
    if not normalized:
        return None
    if normalized in matcher.exact:
        return matcher.exact[normalized], "name"
    acronym = next((t for t in matcher.terms if t.acronym and t.original == name.strip()), None)
    if acronym is not None:
        return acronym.domain, "name"
    contained = [t for t in matcher.terms if _contained(t, normalized, name)]
    if contained:
        best = max(contained, key=lambda t: (len(t.text), -matcher.domain_order.index(t.domain)))
        return best.domain, "name_contains"
    return None


def map_diagnosis(matcher: Matcher, name: str, icd10: str = "", slot: str = "") -> Mapping:
    """The catalog domain one free-text diagnosis counts for, with the rule that decided it."""
    if _NEGATED.search(name):
        return Mapping(slot, name, icd10, None, "negated")
    codes = codes_in(icd10) + [c for c in codes_in(name) if c not in codes_in(icd10)]
    for code in codes:
        owners = matcher.codes.get(code)
        if owners:
            return Mapping(slot, name, icd10, _pick(matcher, name, owners), "icd10",
                           candidates=owners if len(owners) > 1 else ())
    by_name = _by_name(matcher, name)
    if by_name is not None:
        return Mapping(slot, name, icd10, by_name[0], by_name[1])
    for code in codes:
        if len(code.replace(".", "")) < 3:
            continue
        owners = tuple(dict.fromkeys(d for known, domains in matcher.codes.items()
                                     if known.startswith(code) or code.startswith(known) for d in domains))
        if owners:
            ordered = tuple(d for d in matcher.domain_order if d in owners)
            return Mapping(slot, name, icd10, _pick(matcher, name, ordered), "icd10_prefix",
                           candidates=ordered if len(ordered) > 1 else ())
    normalized = normalize(name)
    if normalized:
        best, best_score = None, 0.0
        for term in matcher.terms:
            if len(term.text) < MIN_FUZZY_TERM or term.acronym:
                continue
            score = _fuzzy(normalized, term.text)
            if score > best_score:
                best, best_score = term, score
        if best is not None and best_score >= FUZZY_THRESHOLD:
            return Mapping(slot, name, icd10, best.domain, "fuzzy", score=round(best_score, 1))
    return Mapping(slot, name, icd10, None, "unmapped")


def map_formulation(matcher: Matcher, formulation: Formulation) -> list[Mapping]:
    refs: list[tuple[str, DiagnosisRef]] = [("principal", formulation.principal_diagnosis)]
    refs += [(f"differential[{i}]", ref) for i, ref in enumerate(formulation.differential)]
    return [map_diagnosis(matcher, ref.name, ref.icd10, slot) for slot, ref in refs]


@dataclass
class DiagnosisScore:
    principal_domain: str  # the truth (phenotype's principal diagnosis)
    principal_mapped: str | None
    principal_hit: bool
    named_domains: list[str]
    recalled: list[str]
    missed: list[str]
    false_positives: list[str]  # named', not hidden
    unearned: list[str]
    unmapped: list[str]  # names
    comorbidity_recall: float | None
    comorbidity_precision: float | None
    unearned_share: float | None
    n_diagnoses: int
    mappings: list[Mapping] = field(default_factory=list)

    def mapping_dicts(self) -> list[dict]:
        return [{k: v for k, v in asdict(m).items() if v not in (None, (), "")} for m in self.mappings]


def score_formulation(mappings: Sequence[Mapping], *, principal_domain: str, presenting: str,
                      hidden: Sequence[str], actively_covered: Iterable[str]) -> DiagnosisScore:
    """The module docstring's definitions, for one conversation's mapped formulation."""
    named = list(dict.fromkeys(m.domain for m in mappings if m.domain is not None))
    hidden_set, active = set(hidden), set(actively_covered)
    recalled = [d for d in hidden if d in named]
    comorbid_named = [d for d in named if d != presenting]
    false_positives = [d for d in comorbid_named if d not in hidden_set]
    unearned = [d for d in recalled if d not in active]
    principal = mappings[0].domain if mappings and mappings[0].slot == "principal" else None
    return DiagnosisScore(
        principal_domain=principal_domain,
        principal_mapped=principal,
        principal_hit=principal == principal_domain,
        named_domains=named,
        recalled=recalled,
        missed=[d for d in hidden if d not in named],
        false_positives=false_positives,
        unearned=unearned,
        unmapped=[m.name for m in mappings if m.domain is None],
        comorbidity_recall=len(recalled) / len(hidden) if hidden else None,
        comorbidity_precision=(len(comorbid_named) - len(false_positives)) / len(comorbid_named) if comorbid_named else None,
        unearned_share=len(unearned) / len(recalled) if recalled else None,
        n_diagnoses=len(mappings),
        mappings=list(mappings),
    )
