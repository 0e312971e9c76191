"""Load a catalog folder and check it, collecting every problem before failing.

Each problem is one line naming the file and the field (``phenotypes/x.yaml: hidden_optional[panic].probability:
1.4 is outside [0, 1]``); all of them are raised together as one IntakeEvalError, so a researcher
editing phenotypes sees the whole list at once instead of fixing them one run at a time.
"""

from __future__ import annotations

import difflib
import math
import re
from functools import lru_cache
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from intake_eval.catalog.schema import (
    DEFAULT_CATALOG_DIR,
    SEVERITIES,
    Catalog,
    ContextItem,
    ContextPools,
    DemographicConstraints,
    Diagnosis,
    Domain,
    DomainCatalog,
    Phenotype,
    Prerequisites,
    Severity,
    allowed,
)
from intake_eval.catalog.describes import check_describes
from intake_eval.catalog.identity import catalog_content_hash
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.yamlfile import YamlError, parse_yaml

DOMAINS_FILE = "domains.yaml"
ICD10_PATTERN = re.compile(r"^[A-TV-Z][0-9][0-9AB](\.[0-9A-Z]{1,4})?$")
ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
_MODELS: tuple[type[BaseModel], ...] = (
    Domain, DomainCatalog, Phenotype, Diagnosis, Prerequisites, ContextItem, ContextPools, DemographicConstraints,
)
KNOWN_KEYS = sorted({name for model in _MODELS for name in model.model_fields} | {"id", "text", "domain",
                     "probability", "source", "keep", "drop", "reason", "name", "icd10", "describes"})


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------- reading

def _read_yaml(path: Path, problems: list[str]) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{display_path(path)}: cannot be read ({exc.__class__.__name__})")
        return None
    try:
        data = parse_yaml(text, display_path(path))
    except YamlError as exc:
        problems.append(exc.format_message())
        return None
    if not isinstance(data, dict):
        problems.append(f"{display_path(path)}: (top level): expected a mapping of keys, found {type(data).__name__}")
        return None
    return data


def _location(loc: tuple[Any, ...], raw: Any) -> str:
    """('hidden_optional', 2, 'probability') → 'hidden_optional[panic].probability' using ids where present."""
    text, node = "", raw
    for part in loc:
        if isinstance(part, int):
            label = str(part)
            if isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
                if isinstance(node, dict):
                    label = str(node.get("id") or node.get("domain") or node.get("text") or part)
            else:
                node = None
            text += f"[{label}]"
        else:
            node = node.get(part) if isinstance(node, dict) else None
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def _describe(item: Mapping[str, Any]) -> str:  # one of pydantic's ValidationError.errors()
    kind, loc = item.get("type", ""), item.get("loc", ())
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]) if loc else "", KNOWN_KEYS, n=1)
        return "unknown key" + (f" (did you mean '{close[0]}'?)" if close else "")
    if kind == "missing":
        if loc and loc[-1] in ("source", "weight_source"):
            return "missing citation (source) for this rate"
        return "required field is missing"
    return item.get("msg", "invalid")


def _parse(model: type[BaseModel], data: Any, path: Path, problems: list[str]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for item in exc.errors():
            problems.append(f"{display_path(path)}: {_location(tuple(item.get('loc', ())), data)}: {_describe(item)}")
        return None


# ---------------------------------------------------------------- domain checks

def _check_domains(catalog: DomainCatalog, where: str, problems: list[str]) -> None:
    seen: set[str] = set()
    shared_text: dict[str, tuple[str, str]] = {}  # symptom id -> (text, first domain)
    symptom_owners: dict[str, set[str]] = {}
    for domain in catalog.domains:
        symptom_owners_ids = [s.id for s in domain.symptoms]
        for sid in symptom_owners_ids:
            symptom_owners.setdefault(sid, set()).add(domain.id)
    for domain in catalog.domains:
        at = f"{where}: domains[{domain.id}]"
        if not ID_PATTERN.match(domain.id):
            problems.append(f"{at}.id: '{domain.id}' must be lower_snake_case")
        if domain.id in seen:
            problems.append(f"{at}.id: duplicate domain id '{domain.id}'")
        seen.add(domain.id)
        ids = [s.id for s in domain.symptoms]
        for sid in sorted({s for s in ids if ids.count(s) > 1}):
            problems.append(f"{at}.symptoms[{sid}]: symptom id appears twice in this domain")
        for symptom in domain.symptoms:
            if not symptom.text.strip():
                problems.append(f"{at}.symptoms[{symptom.id}].text: empty symptom text")
            first = shared_text.setdefault(symptom.id, (symptom.text, domain.id))
            if first[0] != symptom.text:
                problems.append(
                    f"{at}.symptoms[{symptom.id}].text: differs from the same symptom id in domain '{first[1]}' "
                    "(a shared id means the same symptom; give it the same text or a new id)"
                )
        _check_prior(domain.severity_prior, f"{at}.severity_prior", problems)
        for band in SEVERITIES:
            counts = domain.symptom_counts.get(band)
            if counts is None:
                problems.append(f"{at}.symptom_counts.{band}: missing severity band")
                continue
            low, high = counts
            if not 1 <= low <= high:
                problems.append(f"{at}.symptom_counts.{band}: range [{low}, {high}] must satisfy 1 <= low <= high")
            if high > len(domain.symptoms):
                problems.append(f"{at}.symptom_counts.{band}: asks for up to {high} symptoms but the domain lists {len(domain.symptoms)}")
        if domain.min_symptoms is not None:
            unique = sum(1 for s in domain.symptoms if len(symptom_owners[s.id]) == 1)
            if domain.min_symptoms > unique:
                problems.append(
                    f"{at}.min_symptoms: {domain.min_symptoms} exceeds the {unique} symptoms no other domain shares "
                    "(cross-domain dedup could leave too few)"
                )
        if not 2 <= len(domain.probe_questions) <= 4:
            problems.append(f"{at}.probe_questions: give 2-4 specific screening questions (found {len(domain.probe_questions)})")
        if not domain.diagnoses:
            problems.append(f"{at}.diagnoses: at least one diagnosis (name, icd10, synonyms) is needed for scoring")
        for diagnosis in domain.diagnoses:
            for code in diagnosis.icd10:
                if not ICD10_PATTERN.match(code):
                    problems.append(f"{at}.diagnoses[{diagnosis.name}].icd10: '{code}' is not an ICD-10 code")
    check_describes(catalog, where, problems)
    for band, item in _context_items(catalog.context):
        if item.min_age is not None and item.max_age is not None and item.min_age > item.max_age:
            problems.append(f"{where}: context.{band}[{item.text}]: min_age {item.min_age} > max_age {item.max_age}")


def _context_items(context: ContextPools):
    for band in ("occupations", "relationships", "life_context"):
        for item in getattr(context, band):
            yield band, item


def _check_prior(prior: dict[Severity, float], at: str, problems: list[str]) -> None:
    for band in SEVERITIES:
        if band not in prior:
            problems.append(f"{at}.{band}: missing severity band")
    for band, value in prior.items():
        if not 0.0 <= value <= 1.0:
            problems.append(f"{at}.{band}: probability {value} is outside [0, 1]")
    total = sum(prior.values())
    if prior and not math.isclose(total, 1.0, abs_tol=0.01):
        problems.append(f"{at}: probabilities sum to {total:.3f}, not 1")


# ---------------------------------------------------------------- phenotype checks

def _eligible_hidden(pheno: Phenotype, presenting: str) -> tuple[set[str], set[str]]:
    """(required, guaranteed): what can always be hidden for this presenting domain.

    guaranteed = the pool minus the presenting domain, minus domains that conflict with it, minus
    every domain some eligible domain can drop. That set is conflict-free, so a profile can always
    hold the smallest hidden count (whether the cited rates can be realised is the sampling design's
    check, `phenotypes validate`).
    """
    pool = set(pheno.hidden_required) | {opt.domain for opt in pheno.hidden_optional}
    clash = {r.drop for r in pheno.conflicts if r.keep == presenting} | {r.keep for r in pheno.conflicts if r.drop == presenting}
    eligible = pool - {presenting} - clash
    droppable = {r.drop for r in pheno.conflicts if r.keep in eligible}
    required = set(pheno.hidden_required) - {presenting}
    return required, eligible - droppable


def _check_context_fits(pheno: Phenotype, at: str, context: ContextPools, problems: list[str]) -> None:
    """Stage 5 must always find an occupation, a relationship and 2 life-context seeds."""

    demo = pheno.demographics
    low, high = demo.age
    sexes = ["female"] if demo.postpartum else [sex for sex, w in demo.sex_weights.items() if w > 0]
    for sex in sexes:
        for age in range(low, high + 1):
            def fits(items: list[ContextItem]) -> int:
                return sum(allowed(item, age, sex, demo.postpartum) for item in items)

            gaps = []
            if not demo.occupations and not fits(context.occupations):
                gaps.append("context.occupations")
            if not fits(context.relationships):
                gaps.append("context.relationships")
            if min(len(demo.life_context), 2) + fits(context.life_context) < 2:
                gaps.append("context.life_context (needs 2)")
            if gaps:
                problems.append(f"{at}: demographics: no {', '.join(gaps)} option fits age {age}, {sex}, "
                                f"postpartum={demo.postpartum}")
                return


def _check_phenotype(pheno: Phenotype, path: Path, domains: dict[str, Domain], problems: list[str],
                     context: ContextPools | None = None) -> None:
    at = display_path(path)
    if pheno.id != path.stem:
        problems.append(f"{at}: id: '{pheno.id}' must match the file name '{path.stem}'")
    known = set(domains)

    def need(domain_id: str, field: str) -> bool:
        if domain_id in known:
            return True
        close = difflib.get_close_matches(domain_id, sorted(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        problems.append(f"{at}: {field}: unknown domain id '{domain_id}'{hint}")
        return False

    if not pheno.presenting:
        problems.append(f"{at}: presenting: the presenting-domain pool is empty")
    for domain_id in pheno.presenting:
        need(domain_id, f"presenting[{domain_id}]")
    for domain_id in pheno.hidden_required:
        need(domain_id, f"hidden_required[{domain_id}]")
    listed = list(pheno.hidden_required) + [opt.domain for opt in pheno.hidden_optional]
    for domain_id in sorted({d for d in listed if listed.count(d) > 1}):
        problems.append(f"{at}: hidden_optional[{domain_id}]: domain listed more than once in the hidden pools")
    for opt in pheno.hidden_optional:
        field = f"hidden_optional[{opt.domain}]"
        need(opt.domain, f"{field}.domain")
        if not 0.0 <= opt.probability <= 1.0:
            problems.append(f"{at}: {field}.probability: {opt.probability} is outside [0, 1]")
        if not opt.source.strip():
            problems.append(f"{at}: {field}.source: missing citation (source) for this rate")
    pool = set(pheno.presenting) | set(listed)
    for index, rule in enumerate(pheno.conflicts):
        field = f"conflicts[{index}]"
        for side in ("keep", "drop"):
            domain_id = getattr(rule, side)
            if need(domain_id, f"{field}.{side}") and domain_id not in pool:
                problems.append(f"{at}: {field}.{side}: '{domain_id}' is not in this phenotype's pools")
        if rule.keep == rule.drop:
            problems.append(f"{at}: {field}: keep and drop are the same domain")
        if rule.keep in pheno.hidden_required and rule.drop in pheno.hidden_required:
            problems.append(f"{at}: {field}: drops required domain '{rule.drop}' whenever required '{rule.keep}' is present (always)")
    if pheno.population_weight <= 0 or not math.isfinite(pheno.population_weight):
        problems.append(f"{at}: population_weight: {pheno.population_weight} must be a positive number")
    if not pheno.weight_source.strip():
        problems.append(f"{at}: weight_source: missing citation (source) for the population weight")
    low, high = pheno.hidden_count
    if not 1 <= low <= high:
        problems.append(f"{at}: hidden_count: range [{low}, {high}] must satisfy 1 <= low <= high")
    if any(p not in known for p in pool) or not pheno.presenting:
        return  # the checks below need a well-formed pool
    for presenting in pheno.presenting:
        required, guaranteed = _eligible_hidden(pheno, presenting)
        clash = [d for d in required if d not in guaranteed]
        for domain_id in sorted(clash):
            problems.append(f"{at}: conflicts: required hidden domain '{domain_id}' can be dropped when the presenting domain is '{presenting}'")
        if len(required) > high:
            problems.append(f"{at}: hidden_required: {len(required)} required domains exceed the maximum of {high} hidden")
        if len(guaranteed) < low:
            problems.append(
                f"{at}: conflicts: with presenting '{presenting}' only {len(guaranteed)} hidden domains are guaranteed "
                f"after conflict rules ({', '.join(sorted(guaranteed)) or 'none'}); at least {low} are needed"
            )
    for opt in pheno.hidden_optional:
        if all(opt.domain not in _possible_hidden(pheno, p) for p in pheno.presenting):
            problems.append(f"{at}: hidden_optional[{opt.domain}]: can never be drawn (it is the presenting domain or always removed by a conflict rule)")
    _check_demographics(pheno, at, domains, pool, problems)
    if context is not None:
        _check_context_fits(pheno, at, context, problems)
    principal = pheno.principal_diagnosis
    if need(principal.domain, "principal_diagnosis.domain") and principal.domain not in pool:
        problems.append(f"{at}: principal_diagnosis.domain: '{principal.domain}' is not in this phenotype's pools")
    for code in principal.icd10:
        if not ICD10_PATTERN.match(code):
            problems.append(f"{at}: principal_diagnosis.icd10: '{code}' is not an ICD-10 code")


def _possible_hidden(pheno: Phenotype, presenting: str) -> set[str]:
    """Hidden domains that can occur at all with this presenting domain."""
    pool = set(pheno.hidden_required) | {opt.domain for opt in pheno.hidden_optional}
    clash = {r.drop for r in pheno.conflicts if r.keep == presenting} | {r.keep for r in pheno.conflicts if r.drop == presenting}
    eligible = pool - {presenting} - clash
    required = set(pheno.hidden_required) - {presenting}
    always_dropped = {r.drop for r in pheno.conflicts if r.keep in required}
    return eligible - always_dropped


def _check_demographics(pheno: Phenotype, at: str, domains: dict[str, Domain], pool: set[str], problems: list[str]) -> None:
    demo = pheno.demographics
    low, high = demo.age
    if not 18 <= low <= high <= 100:
        problems.append(f"{at}: demographics.age: range [{low}, {high}] must be adults, 18 <= low <= high <= 100")
    weights = demo.sex_weights
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        problems.append(f"{at}: demographics.sex_weights: weights must be non-negative with a positive total")
    if demo.postpartum and weights.get("male", 0) > 0:
        problems.append(f"{at}: demographics.sex_weights: a postpartum phenotype must be female only (male weight {weights['male']})")
    w_low, w_high = demo.weeks_postpartum
    if demo.postpartum and not 0 <= w_low <= w_high <= 52:
        problems.append(f"{at}: demographics.weeks_postpartum: range [{w_low}, {w_high}] must lie within 0-52 weeks")
    for domain_id in sorted(pool):
        req = domains[domain_id].prerequisites
        field = f"demographics (domain '{domain_id}' prerequisites)"
        if req.min_age is not None and req.min_age > high:
            problems.append(f"{at}: {field}: '{domain_id}' needs age >= {req.min_age} but demographics.age allows at most {high}")
        if req.max_age is not None and req.max_age < low:
            problems.append(f"{at}: {field}: '{domain_id}' needs age <= {req.max_age} but demographics.age starts at {low}")
        if req.sex is not None and weights.get(req.sex, 0) <= 0:
            problems.append(f"{at}: {field}: '{domain_id}' needs sex {req.sex} but demographics.sex_weights exclude it")
        if req.postpartum is not None and req.postpartum != demo.postpartum:
            problems.append(f"{at}: {field}: '{domain_id}' needs postpartum={req.postpartum} but demographics.postpartum is {demo.postpartum}")


# ---------------------------------------------------------------- entry point

def load_and_validate(directory: Path) -> Catalog:
    """Load domains.yaml (from ``directory``, else the shipped one) and every other *.yaml as a
    phenotype. Raises IntakeEvalError with one line per problem."""
    directory = Path(directory)
    if not directory.is_dir():
        raise IntakeEvalError(f"{display_path(directory)}: catalog folder does not exist")
    problems: list[str] = []
    domains_path = directory / DOMAINS_FILE
    if not domains_path.exists():
        domains_path = DEFAULT_CATALOG_DIR / DOMAINS_FILE
    raw_domains = _read_yaml(domains_path, problems)
    domain_catalog: DomainCatalog | None = None
    if raw_domains is not None:
        domain_catalog = _parse(DomainCatalog, raw_domains, domains_path, problems)
    if domain_catalog is not None:
        _check_domains(domain_catalog, display_path(domains_path), problems)
    phenotype_files = sorted(p for p in directory.glob("*.yaml") if p.name != DOMAINS_FILE)
    if not phenotype_files:
        problems.append(f"{display_path(directory)}: no phenotype files (*.yaml besides {DOMAINS_FILE}) found")
    phenotypes: dict[str, Phenotype] = {}
    domains = domain_catalog.by_id() if domain_catalog is not None else {}
    for path in phenotype_files:
        raw = _read_yaml(path, problems)
        pheno = _parse(Phenotype, raw, path, problems) if raw is not None else None
        if pheno is None:
            continue
        if pheno.id in phenotypes:
            problems.append(f"{display_path(path)}: id: duplicate phenotype id '{pheno.id}'")
        if domain_catalog is not None:
            _check_phenotype(pheno, path, domains, problems, domain_catalog.context)
        phenotypes[pheno.id] = pheno
    if problems:
        count = len(problems)
        raise IntakeEvalError(
            f"the catalog in {display_path(directory)} has {count} problem{'s' if count > 1 else ''}:\n  " + "\n  ".join(problems)
        )
    assert domain_catalog is not None
    ordered = dict(sorted(phenotypes.items()))
    return Catalog(directory=directory, domains=domains, phenotypes=ordered, context=domain_catalog.context,
                   content_hash=catalog_content_hash(domains.values(), domain_catalog.context, ordered.values()))


@lru_cache(maxsize=8)
def load_catalog(directory: Path = DEFAULT_CATALOG_DIR) -> Catalog:
    """Load and validate a catalog folder; raises IntakeEvalError with one line per problem."""
    return load_and_validate(Path(directory))
