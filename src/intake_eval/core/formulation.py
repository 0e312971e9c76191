"""The post-intake case formulation a clinician returns when asked (context["request"] ==
"formulation"): chief complaint, problem list, principal diagnosis, up to five differentials and
a risk level with its evidence. Offline clinicians build it from the transcript; the diagnosis
stage validates model answers against the same model (``parse_formulation``)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

RiskLevel = Literal["none", "low", "moderate", "high"]
MAX_DIFFERENTIAL = 5


class DiagnosisRef(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)
    icd10: str = ""  # one ICD-10 code, e.g. "F32.1"; empty when the clinician gave none


class Formulation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    chief_complaint: str
    problems: list[str] = Field(default_factory=list)
    principal_diagnosis: DiagnosisRef
    differential: list[DiagnosisRef] = Field(default_factory=list, max_length=MAX_DIFFERENTIAL)
    risk_level: RiskLevel
    risk_evidence: str = ""


def formulation_json_schema() -> dict:
    """For ChatRequest.response_schema (structured output where the provider supports it)."""
    return Formulation.model_json_schema()


def parse_formulation(text: str) -> Formulation:
    """Parse a model's answer: the JSON object in it (code fences tolerated). Raises ValueError
    with one line naming the problem."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("formulation: no JSON object in the answer")
    try:
        return Formulation.model_validate(json.loads(text[start:end + 1]))
    except json.JSONDecodeError as exc:
        raise ValueError(f"formulation: invalid JSON ({exc.msg} at char {exc.pos})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "(top level)"
        raise ValueError(f"formulation: {where}: {first.get('msg', 'invalid')}") from None
