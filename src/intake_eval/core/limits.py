"""Upper bounds on sizes a user chooses, declared once so a flag and the study config that set the
same thing agree: beyond these a value is a typo or an attack, and is refused before any memory or
time is spent on it."""

from __future__ import annotations

DEFAULT_TURNS = 12  # the study's turn budget: every stage, record and estimate that needs one reads it here

MAX_PROFILES = 1_000_000  # profiles in one run folder (`generate --n`, `qc-patient --n`, study `profiles.n`)
MAX_ANNOTATION_ITEMS = 1_000_000  # items (or conversations per arm) in one annotation pack (`annotate export --n`)
MAX_CONCURRENCY = 4096  # tasks in flight at once
MAX_TURNS = 100  # clinician turns per conversation (`run --turns`, study `turns`)
MAX_TRIALS = 100  # trials per (profile, clinician, condition)
MAX_YAML_NODES = 1_000_000  # values one YAML file a user gives may unfold into through its aliases
