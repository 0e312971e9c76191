"""Patient QC as a stage kind: ``qc-patient <patient> <mode> [<style>] <judge>`` writes one probe record
per probe and judge into qc/patient_<patient>_<mode>[_<style>].jsonl (several judges may share the file; the
style only when it is not the default, forthcoming); its usage is the patient's and the judge's."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import rebuilt_model_entry
from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.core.record_facts import FactReader, FolderFacts, UsageReader, group_totals, usage_fact
from intake_eval.core.records import PatientProbe, Record, Usage
from intake_eval.core.stage_kinds import StageFacts
from intake_eval.core.store import RunPaths
from intake_eval.core.usage import add_usage, latest_lines

QC_PREFIX = "qc-patient "
PROBE_FILES = "patient_*.jsonl"
PROBE_FACTS = "patient_probes"  # the kept summaries' name (core/record_facts)


def qc_patient_stage_name(patient: str, mode: str, judge: str, style: str = DEFAULT_STYLE) -> str:
    """The manifest stage of one patient model probed in one mode and style and read by one judge."""
    styled = f" {style}" if style != DEFAULT_STYLE else ""
    return f"{QC_PREFIX}{patient} {mode}{styled} {judge}"


def _owners(stage: Mapping[str, Any]) -> tuple[dict[str, str], str, str]:
    config = stage.get("config") or {}
    owners = {"patient": str(config.get("patient", "patient")), "judge": str(config.get("judge", "judge"))}
    return owners, str(config.get("mode", "prompted")), str(config.get("patient_style", DEFAULT_STYLE))


def _probe_fact(data: Mapping[str, Any]) -> Any:
    usage = data.get("usage")
    return usage_fact([str(data.get("judge"))], data.get("status", "ok") == "ok",
                      usage if isinstance(usage, Mapping) else {})


class PatientQCKind:
    """The probes one judge read of one patient model in one mode."""

    pattern = qc_patient_stage_name("<patient>", "<mode>", "<judge>")

    def owns(self, stage_name: str) -> bool:
        return stage_name.startswith(QC_PREFIX)

    def record_model_of(self, paths: RunPaths, path: Path) -> type[Record] | None:
        return PatientProbe if path.parent == paths.qc_dir and path.match(PROBE_FILES) else None

    def readers(self) -> tuple[FactReader, ...]:
        """Per probe file, grouped by judge: probes, done and usage per role."""
        return (UsageReader(PROBE_FACTS, "key", lambda paths, path: self.record_model_of(paths, path) is PatientProbe,
                            _probe_fact),)

    def stage_facts(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any],
                    facts: FolderFacts) -> StageFacts:
        """The probes of the stage's patient, mode, style and judge: usage per role's alias, probes ok."""
        owners, mode, style = _owners(stage)
        files = [paths.qc_patient(owners["patient"], mode, style)]
        total: dict[str, Usage] = {}
        done = 0
        for group in group_totals(facts.summaries(PROBE_FACTS, files), lambda group: group == [owners["judge"]]).values():
            done += group.done
            for role, used in group.usage.items():
                add_usage(total, owners.get(role, role), used)
        return StageFacts(dict(sorted(total.items())), done)

    def usage(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> dict[str, Usage]:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).usage

    def records_done(self, paths: RunPaths, stage_name: str, stage: Mapping[str, Any]) -> int | None:
        return self.stage_facts(paths, stage_name, stage, FolderFacts(paths, self.readers(), keep=False)).done

    def rebuilt_stages(self, paths: RunPaths) -> dict[str, dict[str, Any]]:
        """One stage per (patient, mode, style, judge) found in the probe files."""
        stages: dict[str, dict[str, Any]] = {}
        files = sorted(paths.qc_dir.glob(PROBE_FILES)) if paths.qc_dir.is_dir() else []
        for data in latest_lines(files, "key").values():
            patient, mode, judge = (str(data.get("patient", "")), str(data.get("patient_mode", "prompted")),
                                    str(data.get("judge", "")))
            style = str(data.get("patient_style") or DEFAULT_STYLE)
            config: dict[str, Any] = {"patient": patient, "mode": mode, "judge": judge}
            if style != DEFAULT_STYLE:  # as the stage writes it: absent for the default
                config["patient_style"] = style
            config["models"] = {"patient": {patient: rebuilt_model_entry(data.get("patient_model"))},
                                "judge": {judge: rebuilt_model_entry(data.get("judge_model"))}}
            stages.setdefault(qc_patient_stage_name(patient, mode, judge, style), {"config": config})
        return stages
