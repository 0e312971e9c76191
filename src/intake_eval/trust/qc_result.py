"""One patient QC's outcome: its rates with Wilson intervals, failed probes and how the patient spoke."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intake_eval.core.patient_styles import DEFAULT_STYLE
from intake_eval.metrics.stats import wilson_interval

METRICS: dict[str, str] = {"direct": "disclosure_recall", "open": "leak_rate", "absent": "invention_rate"}


@dataclass(frozen=True)
class Rate:
    successes: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.n if self.n else None

    @property
    def ci(self) -> tuple[float | None, float | None]:
        return wilson_interval(self.successes, self.n)


@dataclass
class QCResult:
    patient: str
    patient_model: str
    mode: str
    judge: str
    profiles: int
    rates: dict[str, Rate]  # metric name → counts
    errors: dict[str, int]  # kind → probes that failed (patient or judge error), excluded from rates
    records_path: Path | None = None
    metrics_path: Path | None = None
    style: str = DEFAULT_STYLE
    population: dict[str, Any] = field(default_factory=dict)  # metrics/patient_language.py over the probe replies

    @property
    def disclosure_recall(self) -> float | None:
        return self.rates["disclosure_recall"].rate

    @property
    def leak_rate(self) -> float | None:
        return self.rates["leak_rate"].rate

    @property
    def invention_rate(self) -> float | None:
        return self.rates["invention_rate"].rate

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for kind, metric in METRICS.items():
            rate = self.rates[metric]
            low, high = rate.ci
            rows.append({"patient": self.patient, "patient_model": self.patient_model, "patient_mode": self.mode,
                         "judge": self.judge, "metric": metric, "successes": rate.successes, "n": rate.n,
                         "rate": rate.rate, "ci_low": low, "ci_high": high, "profiles": self.profiles,
                         "errors": self.errors.get(kind, 0), "patient_style": self.style})
        return rows
