"""Patient QC probes: the probe file (configs/qc_probes.yaml), which probes a profile gets, and
the decoy profile the judge sees for an absent-domain probe. Pure and seeded; see qc.py.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from intake_eval.core.errors import IntakeEvalError, describe_validation_error
from intake_eval.core.package_data import package_folder
from intake_eval.core.records import DomainDraw, Profile
from intake_eval.core.yamlfile import read_yaml

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

DEFAULT_PROBES = package_folder("configs") / "qc_probes.yaml"


# ---------------------------------------------------------------- the probe file

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DirectProbes(_Strict):
    per_domain: int = Field(1, ge=1)
    overrides: dict[str, list[str]] = Field(default_factory=dict)


class AbsentProbes(_Strict):
    per_profile: int = Field(3, ge=0)
    per_domain: int = Field(1, ge=1)
    domains: list[str] | None = None
    overrides: dict[str, list[str]] = Field(default_factory=dict)
    related: list[list[str]] = Field(default_factory=list)


class ProbeConfig(_Strict):
    version: int = 1
    open_invitations: list[str] = Field(min_length=1)
    direct: DirectProbes = Field(default_factory=DirectProbes)
    absent: AbsentProbes = Field(default_factory=AbsentProbes)


def load_probe_config(path: Path, catalog: "Catalog") -> ProbeConfig:
    data = read_yaml(path, missing=f"--probes {path}: no such file")
    try:
        config = ProbeConfig.model_validate(data if data is not None else {})
    except ValidationError as exc:
        raise IntakeEvalError(describe_validation_error(exc, path)) from None
    named = [("direct.overrides", d) for d in config.direct.overrides] + [("absent.overrides", d) for d in config.absent.overrides]
    named += [("absent.domains", d) for d in config.absent.domains or []]
    named += [("absent.related", d) for group in config.absent.related for d in group]
    for where, domain in named:
        if domain not in catalog.domains:
            raise IntakeEvalError(f"{path}: {where}: unknown domain '{domain}' (see `intake-eval phenotypes list`)")
    if any(not text.strip() for text in config.open_invitations):
        raise IntakeEvalError(f"{path}: open_invitations: an invitation is empty")
    return config


# ---------------------------------------------------------------- planning

@dataclass(frozen=True)
class Probe:
    probe_id: str
    kind: str  # direct | open | absent
    target: str  # domain, or "" for an open invitation
    text: str


def _questions(domain: str, overrides: dict[str, list[str]], per_domain: int, catalog: "Catalog",
               source: Path) -> list[str]:
    questions = overrides.get(domain) or catalog.domains[domain].probe_questions
    if not questions:
        raise IntakeEvalError(f"{source}: domain '{domain}' has no probe_questions in the catalog; "
                              "add an override under direct.overrides / absent.overrides")
    return questions[:per_domain]


def related_domains(catalog: "Catalog", config: ProbeConfig) -> dict[str, set[str]]:
    """Domains that share a catalog symptom id or a configured `related` group."""
    related: dict[str, set[str]] = defaultdict(set)
    holders: dict[str, set[str]] = defaultdict(set)
    for domain in catalog.domains.values():
        for symptom in domain.symptoms:
            holders[symptom.id].add(domain.id)
    for group in [*holders.values(), *map(set, config.absent.related)]:
        for domain_id in group:
            related[domain_id] |= set(group) - {domain_id}
    return related


def absent_domains(profile: Profile, catalog: "Catalog", config: ProbeConfig) -> list[str]:
    """Seeded per profile: domains it lacks and that are not related to any it has."""
    own = {profile.presenting.domain, *profile.hidden_domains}
    related = related_domains(catalog, config)
    blocked = own | {r for d in own for r in related.get(d, ())}
    pool = sorted(d for d in (config.absent.domains or catalog.domains) if d not in blocked)
    rng = random.Random(f"qc-absent:{profile.profile_id}")
    return sorted(rng.sample(pool, min(config.absent.per_profile, len(pool))))


def plan_probes(profile: Profile, catalog: "Catalog", config: ProbeConfig, source: Path = DEFAULT_PROBES) -> list[Probe]:
    pid = profile.profile_id
    probes = []
    for domain in profile.hidden_domains:
        for i, text in enumerate(_questions(domain, config.direct.overrides, config.direct.per_domain, catalog, source)):
            probes.append(Probe(f"{pid}.direct.{domain}.{i}", "direct", domain, text))
    for i, text in enumerate(config.open_invitations):
        probes.append(Probe(f"{pid}.open.{i}", "open", "", text))
    for domain in absent_domains(profile, catalog, config):
        for i, text in enumerate(_questions(domain, config.absent.overrides, config.absent.per_domain, catalog, source)):
            probes.append(Probe(f"{pid}.absent.{domain}.{i}", "absent", domain, text))
    return probes


def choose_profiles(profiles: list[Profile], n: int) -> list[Profile]:
    """n profiles, round-robin over phenotypes (so a small sample spans as many as possible)."""
    by_phenotype: dict[str, list[Profile]] = defaultdict(list)
    for profile in sorted(profiles, key=lambda p: p.profile_id):
        by_phenotype[profile.phenotype].append(profile)
    queues = [by_phenotype[k] for k in sorted(by_phenotype)]
    chosen: list[Profile] = []
    while len(chosen) < n and any(queues):
        for queue in queues:
            if queue and len(chosen) < n:
                chosen.append(queue.pop(0))
    return sorted(chosen, key=lambda p: p.profile_id)


def decoy_profile(profile: Profile, domain: str, catalog: "Catalog") -> Profile:
    """The profile as the judge sees it for an absent-domain probe: the absent domain is added to
    the hidden list with the catalog's symptoms, so the judge says whether the reply claims it."""
    entry = catalog.domains[domain]
    decoy = DomainDraw(domain=domain, label=entry.label, severity="moderate", symptoms=[s.text for s in entry.symptoms],
                       symptom_ids=[s.id for s in entry.symptoms])
    return profile.model_copy(update={"profile_id": f"{profile.profile_id}+absent:{domain}",
                                      "hidden": [*profile.hidden, decoy]})
