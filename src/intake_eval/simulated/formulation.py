"""Case formulations of the offline clinicians, built only from what the patient said.

The presenting concern is the catalog domain whose symptom texts best match the patient's
opening (rapidfuzz); a further domain counts as disclosed when the clinician's own question asked
about it (the classifier) and the reply is not a denial and carries that domain's content (a
symptom text matched fuzzily, or a single-domain question answered affirmatively).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from intake_eval.catalog.classifier import classify, mentions
from intake_eval.core.formulation import MAX_DIFFERENTIAL, DiagnosisRef, Formulation
from intake_eval.simulated.phrasing import sentences

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog, Domain

SYMPTOM_MATCH = 85.0  # partial_ratio (0-100) for a reply sentence to carry a symptom text
_DENIAL = re.compile(r"^\W*(no|nope|not really|never|i (dont|don't|do not|havent|haven't|have not)|nothing)\b", re.I)
_INTENT = re.compile(r"\b(plan|planned|prepar\w*|acting on|act on|method|pills|gun|rope|attempt\w*|how i would)\b", re.I)
# A disclosed domain that changes the principal diagnosis whatever the presenting concern was.
# The order follows the usual diagnostic hierarchy: psychotic and bipolar disorders first, then
# disorders that account for the mood or anxiety picture around them.
PRINCIPAL_PRECEDENCE = ("psychosis", "mania", "hypomania", "ptsd", "restrictive_eating", "emotional_dysregulation",
                        "opioid_misuse", "adhd")
# Complaints that are often the visible edge of a mood disorder: a disclosed depression explains them.
SYMPTOM_LEVEL_PRESENTATIONS = frozenset({"insomnia", "somatic_symptoms", "chronic_pain", "cognitive_decline",
                                         "irritability", "nightmares"})
SAFETY_ORDER = {"none": 0, "low": 1, "moderate": 2, "high": 3}


@dataclass
class Findings:
    presenting: str | None
    disclosed: list[str] = field(default_factory=list)  # in order of first disclosure
    evidence: dict[str, list[str]] = field(default_factory=dict)
    asked: set[str] = field(default_factory=set)


def _symptom_hits(domain: "Domain", text: str) -> list[str]:
    """Sentences of ``text`` that carry one of the domain's symptom texts."""
    from rapidfuzz import fuzz, utils

    hits = []
    for sentence in sentences(text):
        processed = utils.default_process(sentence)
        if any(fuzz.partial_ratio(utils.default_process(s.text), processed) >= SYMPTOM_MATCH
               for s in domain.symptoms if len(s.text) >= 12):
            hits.append(sentence)
    return hits


def presenting_domain(opening: str, catalog: "Catalog") -> str | None:
    """The catalog domain the opening talks about most (symptom matches, then named features)."""
    from rapidfuzz import fuzz, process, utils

    owners, texts = [], []
    for domain in catalog.domains.values():
        for symptom in domain.symptoms:
            if len(symptom.text) >= 12:
                owners.append(domain.id)
                texts.append(utils.default_process(symptom.text))
    said = [utils.default_process(sentence) for sentence in sentences(opening)]
    # Verbatim quotes first (cheap, and what offline patients do); fuzzy matching for paraphrase.
    whole = " ".join(said)
    matched: dict[str, int] = {}
    for owner, text in zip(owners, texts):
        matched[owner] = matched.get(owner, 0) + int(text in whole)
    if not any(matched.values()) and said and texts:
        matched = {}
        scores = process.cdist(texts, said, scorer=fuzz.partial_ratio)
        for owner, row in zip(owners, scores):
            matched[owner] = matched.get(owner, 0) + int(row.max() >= SYMPTOM_MATCH)
    named = mentions(opening)
    best, best_score = None, (0, 0)
    for domain_id in catalog.domains:
        score = (matched.get(domain_id, 0), len(named.get(domain_id, ())))
        if score > best_score:
            best, best_score = domain_id, score
    return best


def findings(opening: str, pairs: list[tuple[str, str]], catalog: "Catalog") -> Findings:
    presenting = presenting_domain(opening, catalog)
    result = Findings(presenting=presenting)
    if presenting:
        result.evidence[presenting] = _symptom_hits(catalog.domains[presenting], opening) or [opening]
    for question, reply in pairs:
        asked = [d for d in classify(question).domains if d in catalog.domains]
        result.asked.update(asked)
        if not reply or not asked:
            continue
        carried = {d: _symptom_hits(catalog.domains[d], reply) for d in asked}
        denial = bool(_DENIAL.search(reply))
        for domain in asked:
            hits = carried[domain] or ([reply] if len(asked) == 1 and not denial else [])
            if not hits:
                continue
            if domain != presenting and domain not in result.disclosed:
                result.disclosed.append(domain)
            result.evidence.setdefault(domain, []).extend(h for h in hits if h not in result.evidence.get(domain, []))
    return result


def _diagnosis(domain: "Domain") -> DiagnosisRef:
    if not domain.diagnoses:
        return DiagnosisRef(name=domain.label, icd10="")
    first = domain.diagnoses[0]
    return DiagnosisRef(name=first.name, icd10=first.icd10[0] if first.icd10 else "")


def _risk(found: Findings) -> tuple[str, str]:
    level, evidence = "low", "Risk was not assessed in this interview."
    if "suicidality" in found.asked and "suicidality" not in found.disclosed and "self_harm" not in found.disclosed:
        level, evidence = "none", "Denied thoughts of suicide or self-harm when asked."
    for domain, floor in (("intrusive_harm_thoughts", "low"), ("psychosis", "low"), ("mania", "low"),
                          ("self_harm", "moderate"), ("suicidality", "moderate")):
        if domain in found.disclosed or domain == found.presenting:
            said = " ".join(found.evidence.get(domain, []))
            new = "high" if domain == "suicidality" and _INTENT.search(said) else floor
            if SAFETY_ORDER[new] >= SAFETY_ORDER[level] or level == "none":
                level, evidence = new, said[:400]
    return level, evidence


def build_formulation(found: Findings, catalog: "Catalog", *, include_disclosed: bool) -> Formulation:
    """The anchored clinician formulates the presenting concern only (include_disclosed=False)."""
    if found.presenting is None:
        return Formulation(
            chief_complaint="Unclear from the interview",
            problems=[],
            principal_diagnosis=DiagnosisRef(name="Diagnosis deferred", icd10="R69"),
            risk_level="low",
            risk_evidence="Risk was not assessed in this interview.",
        )
    domains = [found.presenting] + (found.disclosed if include_disclosed else [])
    principal = next((d for d in PRINCIPAL_PRECEDENCE if d in domains), None)
    if principal is None:
        explains = found.presenting in SYMPTOM_LEVEL_PRESENTATIONS and "depression" in domains
        principal = "depression" if explains else found.presenting
    differential = [_diagnosis(catalog.domains[d]) for d in domains if d != principal]
    if not include_disclosed:  # alternatives within the presenting concern itself
        differential = [DiagnosisRef(name=x.name, icd10=x.icd10[0] if x.icd10 else "")
                        for x in catalog.domains[principal].diagnoses[1:]]
    kept = found if include_disclosed else Findings(presenting=found.presenting, evidence=found.evidence)
    level, evidence = _risk(kept)
    return Formulation(
        chief_complaint=catalog.domains[found.presenting].label,
        problems=[catalog.domains[d].label for d in domains],
        principal_diagnosis=_diagnosis(catalog.domains[principal]),
        differential=differential[:MAX_DIFFERENTIAL],
        risk_level=level,
        risk_evidence=evidence,
    )


def formulation_text(opening: str, pairs: list[tuple[str, str]], catalog: "Catalog", *, include_disclosed: bool) -> str:
    found = findings(opening, pairs, catalog)
    return json.dumps(build_formulation(found, catalog, include_disclosed=include_disclosed).model_dump(), ensure_ascii=False)
