"""Patient behaviour styles: how a simulated patient speaks, declared once.

A style changes *how* the patient talks — length, hedging, tangents, how sure it is of dates — and
never the disclosure rule: a specific question about a hidden domain is always answered with a
disclosure of that domain, and an open invitation never reveals one. Each style states exactly what
counts as its disclosure (``disclosure``), the words per reply it aims at (``words``, the patient QC's
length target) and the prompt fragment appended to the patient's system prompt
(``prompts/_patient_style_<name>.j2``). ``forthcoming`` is today's patient: it has no fragment, so
its prompts, hashes, conversation ids and records are exactly those of runs made before styles.

Styles are a study axis crossed with clinicians and conditions (a full factorial: every profile is
interviewed by every clinician under every condition once per style), so a clinician's coverage
with guarded patients is a paired comparison on the same profiles.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from intake_eval.core.errors import IntakeEvalError

DEFAULT_STYLE = "forthcoming"
FRAGMENT_PREFIX = "_patient_style_"


@dataclass(frozen=True)
class PatientStyle:
    name: str
    summary: str  # how the patient speaks
    disclosure: str  # what counts as a disclosure when a hidden domain is asked about specifically
    words: tuple[int, int]  # target words per reply to a clinician question (inclusive)
    words_source: str  # where the target comes from

    @property
    def fragment(self) -> str | None:
        """The prompt template appended to the patient's system prompt (none for the default)."""
        return None if self.name == DEFAULT_STYLE else f"{FRAGMENT_PREFIX}{self.name}"


STYLES: dict[str, PatientStyle] = {style.name: style for style in (
    PatientStyle(
        "forthcoming",
        "Cooperative and open: answers what was asked in two to five plain sentences.",
        "Names the asked-about experience and describes it in its own words (several sentences).",
        (3, 90),
        "the shared speaking style's 'two to five sentences' at up to ~18 words a sentence; a plain denial "
        "('No, not really.') is a full answer, hence the low floor"),
    PatientStyle(
        "guarded",
        "Minimising and reluctant: short answers, plays problems down ('it's not a big deal'), "
        "volunteers nothing and says little to open invitations.",
        "Admits the asked-about experience in at least one concrete sentence about it, possibly after a "
        "hedge and with its severity played down; a bare 'not really' or 'I'm fine' is not a disclosure "
        "and is not allowed when the experience is present.",
        (1, 35),
        "one or two short sentences plus a hedge; guarded patients in the JHU adaptive-intake study answer "
        "briefly and minimise"),
    PatientStyle(
        "terse",
        "Cooperative but economical: one short sentence per answer, no elaboration unless asked again.",
        "One sentence that names or describes the asked-about experience.",
        (1, 20),
        "one sentence of everyday speech"),
    PatientStyle(
        "verbose-tangential",
        "Talkative: long answers that wander into everyday life and background before and after the point.",
        "Describes the asked-about experience somewhere in the answer, among the tangents; tangents never "
        "describe another hidden experience.",
        (8, 200),
        "several sentences with tangents; PSI-Bench reports simulated patients already run long, so this "
        "style is the deliberate upper end"),
    PatientStyle(
        "vague-recall",
        "Unsure of details: cannot place when things started or how often they happen, hedges dates and "
        "numbers ('I think', 'maybe'), but knows what it has been going through.",
        "Describes the asked-about experience as fully as a forthcoming patient; only onset, frequency and "
        "duration are hedged or unknown.",
        (3, 90),
        "the forthcoming length (PatientSim's recall axis changes detail, not length)"),
)}


def style(name: str) -> PatientStyle:
    return STYLES[name]


def check_styles(values: Iterable[str], label: str = "--patient-style") -> list[str]:
    """The styles asked for, in order, each once; an unknown or repeated one is one error line."""
    chosen: list[str] = []
    for value in values:
        if value not in STYLES:
            raise IntakeEvalError(f"{label} {value}: unknown patient style; choose from {', '.join(STYLES)}")
        if value in chosen:
            raise IntakeEvalError(f"{label} {value}: given twice")
        chosen.append(value)
    return chosen or [DEFAULT_STYLE]


def style_prompt_names(styles: Iterable[str]) -> list[str]:
    """The fragment templates the given styles need (hashed by the config guard, snapshotted)."""
    return [fragment for name in styles if (fragment := STYLES[name].fragment) is not None]
