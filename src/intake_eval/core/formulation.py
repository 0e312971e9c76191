"""The post-intake case formulation a clinician returns when asked (context["request"] ==
"formulation"): chief complaint, problem list, principal diagnosis, up to five differentials and
a risk level with its evidence. Offline clinicians build it from the transcript; the diagnosis
stage validates model answers against the same model (``parse_formulation``)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from intake_eval.core.placeholders import is_placeholder, placeholder_problem

RiskLevel = Literal["none", "low", "moderate", "high"]
MAX_DIFFERENTIAL = 5


class DiagnosisRef(BaseModel):
    # defer_build (here and in Formulation): built when a formulation is first read, not at import
    model_config = ConfigDict(extra="ignore", defer_build=True)
    name: str = Field(min_length=1)
    icd10: str = ""  # one ICD-10 code, e.g. "F32.1"; empty when the clinician gave none


class Formulation(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    chief_complaint: str
    problems: list[str] = Field(default_factory=list)
    principal_diagnosis: DiagnosisRef
    differential: list[DiagnosisRef] = Field(default_factory=list, max_length=MAX_DIFFERENTIAL)
    risk_level: RiskLevel
    risk_evidence: str = ""


def _icd10_problem(field: str, code: str) -> str | None:
    # Empty is allowed (the instruction says "" when the clinician cannot code); a code has digits.
    if code.strip() and (is_placeholder(code) or not any(ch.isdigit() for ch in code)):
        return f"{field} is not an ICD-10 code ({code.strip()[:20]!r}); give one such as F41.1, or \"\""
    return None


def placeholder_problems(formulation: Formulation) -> list[str]:
    """Fields left as the instruction's example ("...", "<…>") or empty where an answer is required."""
    found = [placeholder_problem("chief_complaint", formulation.chief_complaint, allow_empty=False),
             placeholder_problem("risk_evidence", formulation.risk_evidence)]
    found += [placeholder_problem(f"problems.{index}", problem, allow_empty=False)
              for index, problem in enumerate(formulation.problems)]
    diagnoses = [("principal_diagnosis", formulation.principal_diagnosis)]
    diagnoses += [(f"differential.{index}", item) for index, item in enumerate(formulation.differential)]
    for where, diagnosis in diagnoses:
        found.append(placeholder_problem(f"{where}.name", diagnosis.name, allow_empty=False))
        found.append(_icd10_problem(f"{where}.icd10", diagnosis.icd10))
    return [problem for problem in found if problem]


def parse_formulation(text: str) -> Formulation:
    """Parse a model's answer: the JSON object in it (code fences tolerated). Raises ValueError
    with one line naming the problem (placeholders copied from the example included)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("formulation: no JSON object in the answer")
    try:
        formulation = Formulation.model_validate(json.loads(text[start:end + 1], strict=False))
    except json.JSONDecodeError as exc:
        raise ValueError(f"formulation: invalid JSON ({exc.msg} at char {exc.pos})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        raise ValueError(f"formulation: {where}: {first.get('msg', 'invalid')}") from None
    problems = placeholder_problems(formulation)
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ValueError("formulation: " + "; ".join(problems[:3]) + more)
    return formulation
