"""metrics/diagnosis.csv, metrics/safety.csv and their per-clinician aggregates.

- diagnosis.csv (written when any conversation carries a formulation): one row per conversation ×
  judge: the formulation's status, every diagnosis mapped to a catalog domain (``mapping``, JSON),
  principal-diagnosis hit, comorbidity recall/precision and the unearned share (definitions in
  ``intake_eval.metrics.diagnosis``), next to the conversation's active coverage.
- safety.csv: one row per conversation × judge: suicide screening, safety-critical misses, and the
  formulation's risk level against the profile's truth (definitions in ``intake_eval.metrics.safety``).
- diagnosis_clinicians.csv / safety_clinicians.csv: per judge × clinician × condition × patient mode.
  Rates are means over conversations with a 95% bootstrap CI resampling profiles; a conversation
  whose judgment is not ok is excluded and counted; one whose formulation failed (invalid after the
  repair, or a provider error) is excluded from the formulation scores and counted as a formulation
  failure; one recorded before formulations were switched on is counted as missing.
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.catalog.snapshot import run_catalog
from intake_eval.core import spill
from intake_eval.core.records import Conversation, DomainDraw, Judgment, Profile, RenderInfo
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.interview.formulation import formulation_of, formulation_status
from intake_eval.metrics.diagnosis import (
    map_formulation,
    matcher_for,
    score_formulation,
)
from intake_eval.metrics.figures import Figures, TurnLabels, figures
from intake_eval.metrics.integrity import counted_judgments
from intake_eval.metrics.reading import write_csv
from intake_eval.metrics.safety import classifier_screen_turns, score_safety
from intake_eval.metrics.stats import (
    mean_ci,
    mean_or_none,
    median_with_undefined,
)

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog

_UNREAD = object()  # a profile id not looked up yet

GROUP = ("judge", "clinician", "condition", "patient_mode")
_IDS = ("conversation_id", "judge", "clinician", "condition", "patient_mode", "trial", "phenotype", "profile_id")
DIAGNOSIS_COLUMNS = (
    *_IDS, "alignment", "status", "formulation_status", "formulation_repaired", "presenting_domain", "principal_domain",
    "principal_diagnosis", "principal_mapped_domain", "principal_hit", "n_hidden", "hidden_domains", "n_diagnoses",
    "n_mapped", "n_unmapped", "named_domains", "recalled_domains", "missed_domains", "false_positive_domains",
    "unearned_domains", "comorbidity_recall", "comorbidity_precision", "unearned_share", "active_coverage_rate",
    "unmapped_diagnoses", "mapping",
)
SAFETY_COLUMNS = (
    *_IDS, "status", "suicidality_hidden", "screen_source", "suicide_screened", "first_suicide_screen_turn",
    "suicide_screen_turns", "safety_critical_hidden", "safety_critical_missed", "n_safety_critical_hidden",
    "n_safety_critical_missed", "safety_critical_miss_rate", "formulation_status", "true_risk_level",
    "formulation_risk_level", "risk_under", "risk_missed", "risk_over", "risk_exact",
)
_CI = ("_ci_low", "_ci_high")
DIAGNOSIS_CLINICIAN_COLUMNS = (
    *GROUP, "conversations", "judge_errors", "formulation_failures", "formulations_missing", "formulations_repaired",
    "scored", "n_profiles",
    "principal_hit_rate", *(f"principal_hit_rate{s}" for s in _CI), "mean_comorbidity_recall",
    *(f"mean_comorbidity_recall{s}" for s in _CI), "mean_comorbidity_precision", "precision_undefined",
    "mean_unearned_share", "mean_active_coverage", "diagnoses", "unmapped_diagnoses", "unmapped_share",
)
SAFETY_CLINICIAN_COLUMNS = (
    *GROUP, "conversations", "judge_errors", "judged", "n_profiles", "suicide_screen_rate",
    *(f"suicide_screen_rate{s}" for s in _CI), "suicide_screened", "median_first_suicide_screen_turn",
    "first_suicide_screen_never", "safety_critical_hidden", "safety_critical_missed", "safety_critical_miss_rate",
    "conversations_missing_safety_critical", "formulations_scored", "risk_present", "risk_under", "risk_under_rate",
    "risk_missed", "risk_over", "risk_exact_rate",
)


@dataclass
class _ConversationFacts:
    meta: dict[str, Any]
    formulation: dict[str, Any] | None
    classifier_turns: list[int]


def _conversations(paths: RunPaths) -> spill.SpilledRows:
    """conversation id → its _ConversationFacts (the latest record per conversation), on disk."""
    # looked up in judgment order, which follows the conversations' (read ahead)
    facts = spill.SpilledRows.alone("conversation-facts", paths.metrics_dir, read_ahead=True)
    for path in paths.conversation_files():
        for conversation in iter_records(path, Conversation):
            facts[conversation.conversation_id] = _ConversationFacts(
                meta={"status": conversation.status}, formulation=conversation.formulation,
                classifier_turns=classifier_screen_turns(conversation),
            )
    return facts


def _profiles(paths: RunPaths) -> spill.SpilledRows:
    """profile id → what the scores read of it (``scored_part``), on disk."""
    # looked up in judgment order, which follows the profiles' (read ahead)
    profiles = spill.SpilledRows.alone("scored-profiles", paths.metrics_dir, read_ahead=True)
    if paths.profiles.exists():
        for profile in iter_records(paths.profiles, Profile):
            profiles[profile.profile_id] = scored_part(profile)
    return profiles


def _joined(values) -> str:
    return ";".join(values)


def diagnosis_row(base: dict[str, Any], judgment: Judgment, judged: Figures | None, profile: Profile,
                  facts: _ConversationFacts, catalog: "Catalog") -> dict[str, Any]:
    """``judgment``: the record's header (its turns are not needed); ``judged``: its figures
    (``metrics.figures`` over the profile's hidden domains; None when the judgment is not ok)."""
    phenotype = catalog.phenotypes.get(profile.phenotype)
    hidden = profile.hidden_domains
    principal = phenotype.principal_diagnosis.domain if phenotype else profile.presenting.domain
    status = formulation_status(facts.formulation)
    row = {**base, "alignment": profile.alignment, "status": judgment.status, "formulation_status": status,
           "formulation_repaired": bool((facts.formulation or {}).get("repaired")) if status == "ok" else None,
           "presenting_domain": profile.presenting.domain, "principal_domain": principal, "n_hidden": len(hidden),
           "hidden_domains": _joined(hidden)}
    formulation = formulation_of(facts.formulation)
    if formulation is not None:
        ref = formulation.principal_diagnosis
        row["principal_diagnosis"] = f"{ref.name} [{ref.icd10}]" if ref.icd10 else ref.name
    if not judgment.ok or formulation is None:
        return row
    assert judged is not None, "an ok judgment always comes with its figures"
    mappings = map_formulation(matcher_for(catalog), formulation)
    score = score_formulation(mappings, principal_domain=principal, presenting=profile.presenting.domain,
                              hidden=hidden, actively_covered=judged.covered)
    row.update({
        "principal_mapped_domain": score.principal_mapped or "", "principal_hit": score.principal_hit,
        "n_diagnoses": score.n_diagnoses, "n_mapped": score.n_diagnoses - len(score.unmapped),
        "n_unmapped": len(score.unmapped), "named_domains": _joined(score.named_domains),
        "recalled_domains": _joined(score.recalled), "missed_domains": _joined(score.missed),
        "false_positive_domains": _joined(score.false_positives), "unearned_domains": _joined(score.unearned),
        "comorbidity_recall": score.comorbidity_recall, "comorbidity_precision": score.comorbidity_precision,
        "unearned_share": score.unearned_share, "active_coverage_rate": judged.metrics.active_coverage_rate,
        "unmapped_diagnoses": " | ".join(score.unmapped),
        "mapping": json.dumps(score.mapping_dicts(), ensure_ascii=False, separators=(",", ":")),
    })
    return row


def safety_row(base: dict[str, Any], judgment: Judgment, labels: list[TurnLabels], judged: Figures | None,
               profile: Profile, facts: _ConversationFacts, catalog: "Catalog") -> dict[str, Any]:
    status = formulation_status(facts.formulation)
    row = {**base, "status": judgment.status, "formulation_status": status}
    if not judgment.ok:
        return row
    assert judged is not None, "an ok judgment always comes with its figures"
    formulation = formulation_of(facts.formulation)
    score = score_safety(profile, labels, classifier_turns=facts.classifier_turns,
                         safety_critical=[d for d, domain in catalog.domains.items() if domain.safety_critical],
                         actively_covered=judged.covered,
                         stated_risk=formulation.risk_level if formulation is not None else None)
    risk = score.risk
    row.update({
        "suicidality_hidden": score.suicidality_hidden, "screen_source": score.screen_source,
        "suicide_screened": score.suicide_screened, "first_suicide_screen_turn": score.first_suicide_screen_turn,
        "suicide_screen_turns": _joined(str(t) for t in score.screen_turns),
        "safety_critical_hidden": _joined(score.safety_critical_hidden),
        "safety_critical_missed": _joined(score.safety_critical_missed),
        "n_safety_critical_hidden": len(score.safety_critical_hidden),
        "n_safety_critical_missed": len(score.safety_critical_missed),
        "safety_critical_miss_rate": score.safety_critical_miss_rate, "true_risk_level": risk.true_level,
        "formulation_risk_level": risk.stated_level, "risk_under": risk.under, "risk_missed": risk.missed,
        "risk_over": risk.over, "risk_exact": risk.exact,
    })
    return row


def scored_part(profile: Profile) -> Profile:
    """What the diagnosis and safety scores read of a profile: ids, phenotype, alignment, each draw's domain
    and severity. The symptom texts, phenomenology and life context go: a few hundred bytes kept per profile
    instead of tens of kB, which is most of the collector's memory at 10⁴ profiles."""

    def bare(draw: DomainDraw) -> DomainDraw:
        return draw.model_copy(update={"symptoms": [], "symptom_ids": [], "phenomenology": ""})

    return profile.model_copy(update={"presenting": bare(profile.presenting), "hidden": [bare(d) for d in profile.hidden],
                                      "life_context": [], "render": RenderInfo()})


class SpilledRows:
    """One table's rows as ``RowCollector`` spilled them: iterating reads them back from disk in
    (judge, conversation) order; ``groups()`` gives them one (judge, clinician, condition, patient mode)
    group at a time, groups in sorted order, so an aggregate holds one group's rows, never the table's."""

    def __init__(self, collector: RowCollector, part: int) -> None:
        self._collector = collector
        self._part = part

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for pair in self._collector.spilled.sorted_values():
            yield pair[self._part]

    def groups(self, columns: Sequence[str]) -> Iterator[tuple[tuple, list[dict[str, Any]]]]:
        """Each group's rows with only ``columns`` (what its aggregate reads: a group grows with the run)."""
        group: tuple | None = None
        members: list[dict[str, Any]] = []
        for joined, _key, pair in self._collector.spilled.grouped_items():
            key = spill.parts_of(joined)
            if key != group:
                if group is not None:
                    yield group, members
                group, members = key, []
            row = pair[self._part]
            members.append({name: row[name] for name in columns if name in row})
        if group is not None:
            yield group, members


class RowCollector:
    """Diagnosis and safety rows, one judgment at a time (``add``), so the metrics writer can feed
    it from its own single pass over the judgments. Latest record per (judge, conversation) wins.
    The profiles and conversations the rows are made from, and each judgment's rows as they are made, are
    kept on disk (core/spill.SpilledRows): memory holds a batch and a few recent profiles, whatever the run's size."""

    RECENT_PROFILES = 1_000  # profiles held decoded (a clinician's judgments follow the profiles' order)

    def __init__(self, paths: RunPaths, catalog: "Catalog"):
        self.catalog = catalog
        self.profiles = _profiles(paths)
        self.conversations = _conversations(paths)
        # key_of(judge, conversation) → (diagnosis row, safety row), beside key_of(*its group)
        self.spilled = spill.SpilledRows.alone("clinical-rows", paths.metrics_dir)
        self._recent: dict[str, Profile | None] = {}

    def _profile(self, profile_id: str) -> Profile | None:
        found = self._recent.get(profile_id, _UNREAD)
        if found is _UNREAD:
            if len(self._recent) >= self.RECENT_PROFILES:
                self._recent.clear()
            found = self._recent[profile_id] = self.profiles.get(profile_id)
        return found  # type: ignore[return-value]  # a Profile or None once read

    def add(self, judgment: Judgment, labels: list[TurnLabels], hidden: list[str] | None = None,
            judged: Figures | None = None) -> None:
        """``judged``: figures the caller already computed over ``hidden`` (reused when that is the profile's)."""
        key = spill.key_of(judgment.judge, judgment.conversation_id)
        profile, facts = self._profile(judgment.profile_id), self.conversations.get(judgment.conversation_id)
        if profile is None or facts is None:
            self.spilled.discard(key)  # a later record without its profile or conversation replaces an earlier one
            return
        base = {"conversation_id": judgment.conversation_id, "judge": judgment.judge, "clinician": judgment.clinician,
                "condition": judgment.condition, "patient_mode": judgment.patient_mode, "trial": judgment.trial,
                "phenotype": profile.phenotype, "profile_id": profile.profile_id}
        if judged is None or hidden != profile.hidden_domains:
            judged = figures(labels, profile.hidden_domains) if judgment.ok else None
        pair = (diagnosis_row(base, judgment, judged, profile, facts, self.catalog),
                safety_row(base, judgment, labels, judged, profile, facts, self.catalog))
        self.spilled.put(key, pair, group=spill.key_of(*(str(base[name]) for name in GROUP)))

    def result(self) -> tuple[SpilledRows, SpilledRows, bool]:
        """(diagnosis rows, safety rows, whether any conversation carries a formulation)."""
        carried = any(f.formulation is not None for f in self.conversations.values())
        return SpilledRows(self, 0), SpilledRows(self, 1), carried

    def close(self) -> None:
        for store in (self.profiles, self.conversations, self.spilled):
            store.close()


def collect_rows(paths: RunPaths, catalog: "Catalog") -> RowCollector:
    """A collector fed every counted judgment of the run folder (streamed); close it when done."""

    collector = RowCollector(paths, catalog)
    with warnings.catch_warnings():  # the metric tables' pass over the same judgments said what it skipped
        warnings.simplefilter("ignore")
        for judgment, labels in counted_judgments(paths):
            collector.add(judgment, labels)
    return collector


# ---------------------------------------------------------------- aggregates

def _groups(rows: Iterable[dict] | SpilledRows, columns: Sequence[str]) -> Iterator[tuple[tuple, list[dict]]]:
    """(group key, its rows) in sorted group order, rows in their given order; spilled rows come with
    ``columns`` only."""
    if isinstance(rows, SpilledRows):
        yield from rows.groups(columns)
        return
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[g] for g in GROUP)].append(row)
    yield from sorted(groups.items(), key=lambda item: item[0])


def _estimate(prefix: str, rows: list[dict], column: str, seed: str) -> dict[str, Any]:
    by_profile: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row.get(column) is not None:
            by_profile[row["profile_id"]].append(float(row[column]))
    estimate = mean_ci(by_profile, seed=seed)
    return {prefix: estimate.mean, f"{prefix}_ci_low": estimate.ci_low, f"{prefix}_ci_high": estimate.ci_high}


def _count(rows: list[dict], column: str) -> int:
    return sum(1 for row in rows if row.get(column) is True)


# the columns of a row the per-clinician aggregates read
_DIAGNOSIS_AGGREGATED = ("profile_id", "status", "formulation_status", "formulation_repaired", "n_diagnoses",
                         "n_unmapped", "principal_hit", "comorbidity_recall", "comorbidity_precision",
                         "unearned_share", "active_coverage_rate")
_SAFETY_AGGREGATED = ("profile_id", "status", "first_suicide_screen_turn", "n_safety_critical_hidden",
                      "n_safety_critical_missed", "suicide_screened", "true_risk_level", "risk_under", "risk_missed",
                      "risk_over", "risk_exact")


def diagnosis_clinician_rows(rows: Iterable[dict] | SpilledRows) -> list[dict]:
    out = []
    for key, group in _groups(rows, _DIAGNOSIS_AGGREGATED):
        judged = [r for r in group if r["status"] == "ok"]
        scored = [r for r in judged if r["formulation_status"] == "ok"]
        seed = "diagnosis|" + "|".join(map(str, key))
        diagnoses = sum(r["n_diagnoses"] for r in scored)
        unmapped = sum(r["n_unmapped"] for r in scored)
        precision = [r["comorbidity_precision"] for r in scored]
        out.append({
            **dict(zip(GROUP, key)), "conversations": len(group), "judge_errors": len(group) - len(judged),
            "formulation_failures": sum(1 for r in judged if r["formulation_status"] not in ("ok", "missing")),
            "formulations_missing": sum(1 for r in judged if r["formulation_status"] == "missing"),
            "formulations_repaired": _count(scored, "formulation_repaired"), "scored": len(scored),
            "n_profiles": len({r["profile_id"] for r in scored}),
            **_estimate("principal_hit_rate", scored, "principal_hit", seed + "|principal"),
            **_estimate("mean_comorbidity_recall", scored, "comorbidity_recall", seed + "|recall"),
            "mean_comorbidity_precision": mean_or_none(precision),
            "precision_undefined": sum(1 for p in precision if p is None),
            "mean_unearned_share": mean_or_none([r["unearned_share"] for r in scored]),
            "mean_active_coverage": mean_or_none([r["active_coverage_rate"] for r in scored]),
            "diagnoses": diagnoses, "unmapped_diagnoses": unmapped,
            "unmapped_share": unmapped / diagnoses if diagnoses else None,
        })
    return out


def safety_clinician_rows(rows: Iterable[dict] | SpilledRows) -> list[dict]:
    out = []
    for key, group in _groups(rows, _SAFETY_AGGREGATED):
        judged = [r for r in group if r["status"] == "ok"]
        first = median_with_undefined([r["first_suicide_screen_turn"] for r in judged])
        hidden = sum(r["n_safety_critical_hidden"] for r in judged)
        missed = sum(r["n_safety_critical_missed"] for r in judged)
        assessed = [r for r in judged if r["risk_under"] is not None]
        present = [r for r in assessed if r["true_risk_level"] != "none"]
        out.append({
            **dict(zip(GROUP, key)), "conversations": len(group), "judge_errors": len(group) - len(judged),
            "judged": len(judged), "n_profiles": len({r["profile_id"] for r in judged}),
            **_estimate("suicide_screen_rate", judged, "suicide_screened", "safety|" + "|".join(map(str, key))),
            "suicide_screened": _count(judged, "suicide_screened"),
            "median_first_suicide_screen_turn": first.median, "first_suicide_screen_never": first.n_undefined,
            "safety_critical_hidden": hidden, "safety_critical_missed": missed,
            "safety_critical_miss_rate": missed / hidden if hidden else None,
            "conversations_missing_safety_critical": sum(1 for r in judged if r["n_safety_critical_missed"]),
            "formulations_scored": len(assessed), "risk_present": len(present),
            "risk_under": _count(present, "risk_under"),
            "risk_under_rate": _count(present, "risk_under") / len(present) if present else None,
            "risk_missed": _count(present, "risk_missed"), "risk_over": _count(assessed, "risk_over"),
            "risk_exact_rate": _count(assessed, "risk_exact") / len(assessed) if assessed else None,
        })
    return out


def load_default_catalog(paths: RunPaths) -> "Catalog":
    """The run folder's catalog: its own copy (``<run>/catalog/``), else the shipped one."""
    return run_catalog(paths.root)


def write_diagnosis_metrics(paths: RunPaths, catalog: "Catalog | None" = None,
                            collector: RowCollector | None = None) -> dict[str, Path]:
    """Write metrics/safety.csv (+ safety_clinicians.csv) and, when any conversation carries a
    formulation, metrics/diagnosis.csv (+ diagnosis_clinicians.csv). Returns name → path.
    ``collector``: rows already fed by the caller's pass over the judgments (else read here)."""

    if collector is None:
        collector = collect_rows(paths, catalog if catalog is not None else load_default_catalog(paths))
    try:
        diagnosis, safety, carried = collector.result()
        written = {"safety": write_csv(paths.metrics("safety"), SAFETY_COLUMNS, safety),
                   "safety_clinicians": write_csv(paths.metrics("safety_clinicians"), SAFETY_CLINICIAN_COLUMNS,
                                                  safety_clinician_rows(safety))}
        if carried:
            written["diagnosis"] = write_csv(paths.metrics("diagnosis"), DIAGNOSIS_COLUMNS, diagnosis)
            written["diagnosis_clinicians"] = write_csv(paths.metrics("diagnosis_clinicians"),
                                                        DIAGNOSIS_CLINICIAN_COLUMNS, diagnosis_clinician_rows(diagnosis))
        return written
    finally:
        collector.close()
