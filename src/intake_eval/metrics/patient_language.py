"""Population-level measures of how a simulated patient speaks, per patient model and style.

Beside the disclosure rule (recall, leaks), PSI-Bench (arXiv 2604.25840) finds simulated patients answer
too long, too lexically diverse, with too little variation, and resolve their distress too fast. These
measures make each of those visible for one population of replies (one patient model × mode × style):
- words per reply: mean, sd, median and the share inside the style's target range
  (core/patient_styles.py ``words``);
- lexical diversity: MATTR, the moving-average type-token ratio over a 50-word window (Covington &
  McFall 2010) of everything one profile's patient said (replies are too short for a window each),
  averaged over profiles;
- early resolution: the share of replies before the last third of an intake (or any probe reply) that
  thank the clinician or declare the problem resolved ("I feel better already", "that helps a lot");
- repeated phrasing: the share of word 5-grams that occur in the replies of at least 3 different
  profiles (a template-like phrase reused across people), over all distinct 5-grams.
Targets (``TARGETS``) are stated with their reasons; ``check_targets`` names every one missed.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.patient_styles import STYLES
from intake_eval.core.spill import SpilledRows

MATTR_WINDOW = 50
NGRAM = 5
SHARED_BY_PROFILES = 3  # a phrase in this many different profiles' replies counts as repeated
_WORD = re.compile(r"[a-z']+")
_EARLY_RESOLUTION = re.compile(
    r"\b(thank(s| you)|(feel|feeling) (so much |a lot )?better( already| now)?|that (really )?helps( a lot)?|"
    r"(it's|that's|i'm) (all )?(sorted|resolved|fine now)|weight off my (mind|shoulders))\b", re.I)


@dataclass(frozen=True)
class Reply:
    """One patient reply as the population measures see it."""

    profile_id: str
    text: str
    early: bool  # said before the last third of an intake (a probe's reply always is)


@dataclass(frozen=True)
class Target:
    """A population measure's acceptable range and why."""

    measure: str
    low: float | None
    high: float | None
    why: str


TARGETS: tuple[Target, ...] = (
    Target("length_on_target_share", 0.6, None,
           "most replies inside the style's declared words-per-reply range (core/patient_styles.py); PSI-Bench "
           "finds simulated patients answer too long"),
    Target("early_resolution_share", None, 0.1,
           "PSI-Bench finds simulated depression patients resolve their distress too quickly; at most one reply "
           "in ten before the last third of an intake thanks the clinician or declares the problem solved"),
    Target("repeated_phrasing_share", None, 0.2,
           "different people should not share template phrases; at most a fifth of 5-grams reused across "
           "three or more profiles (the profiles' own symptom texts differ by construction)"),
    Target("mattr", None, 0.9,
           "PSI-Bench finds simulated patients more lexically diverse than real ones; MATTR above 0.9 over a "
           "50-word window reads as written prose, not speech"),
)


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def mattr(tokens: list[str], window: int = MATTR_WINDOW) -> float | None:
    """Moving-average type-token ratio; the plain type-token ratio for a text shorter than the window."""
    if not tokens:
        return None
    if len(tokens) <= window:
        return len(set(tokens)) / len(tokens)
    counts: dict[str, int] = defaultdict(int)
    for token in tokens[:window]:
        counts[token] += 1
    total = len(counts)
    for index in range(window, len(tokens)):
        leaving, entering = tokens[index - window], tokens[index]
        counts[leaving] -= 1
        if counts[leaving] == 0:
            del counts[leaving]
        counts[entering] += 1
        total += len(counts)
    return total / ((len(tokens) - window + 1) * window)


def resolves_early(reply: Reply) -> bool:
    return reply.early and bool(_EARLY_RESOLUTION.search(reply.text))


def repeated_phrasing_share(replies: Iterable[Reply]) -> float | None:
    """Share of distinct word 5-grams found in the replies of at least ``SHARED_BY_PROFILES`` profiles."""
    profiles_of: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for reply in replies:
        tokens = words(reply.text)
        for start in range(len(tokens) - NGRAM + 1):
            profiles_of[tuple(tokens[start:start + NGRAM])].add(reply.profile_id)
    if not profiles_of:
        return None
    return sum(len(owners) >= SHARED_BY_PROFILES for owners in profiles_of.values()) / len(profiles_of)


class RunningMattr:
    """``mattr`` of a token stream fed in pieces, holding only the last window: the same integer sums
    in the same order, so the same value as ``mattr`` over the whole stream."""

    def __init__(self, window: int = MATTR_WINDOW) -> None:
        self.window = window
        self.head: list[str] = []  # the first ``window`` tokens (all of a stream not longer than that)
        self.recent: deque[str] = deque()
        self.counts: dict[str, int] = defaultdict(int)
        self.total = 0
        self.length = 0

    def extend(self, tokens: list[str]) -> None:
        filling = max(0, min(len(tokens), self.window - self.length))  # tokens still filling the first window
        for token in tokens[:filling]:
            self.length += 1
            self.head.append(token)
            self.counts[token] += 1
            self.recent.append(token)
            if self.length == self.window:
                self.total = len(self.counts)
        # past the first window (names bound locally: this loop runs once per word the patients said)
        counts, recent, total = self.counts, self.recent, self.total
        for token in tokens[filling:]:
            leaving = recent.popleft()
            left = counts[leaving] - 1
            if left:
                counts[leaving] = left
            else:
                del counts[leaving]
            counts[token] += 1
            recent.append(token)
            total += len(counts)
        self.total = total
        self.length += len(tokens) - filling

    def value(self) -> float | None:
        if not self.length:
            return None
        if self.length <= self.window:
            return len(set(self.head)) / self.length
        return self.total / ((self.length - self.window + 1) * self.window)


class _SpokenByProfile:
    """profile id → its RunningMattr: the most recently fed profiles in memory, the others pickled to disk
    (core/spill.SpilledRows, made on first need), so a run's many profiles are not all held at once."""

    HELD = 2_000  # profiles held in memory before they are moved to disk

    def __init__(self, spill_dir: Path | None = None) -> None:
        self._held: dict[str, RunningMattr] = {}
        self._disk: SpilledRows | None = None
        self._spill_dir = spill_dir

    def running(self, profile_id: str) -> RunningMattr:
        found = self._held.get(profile_id)
        if found is None:
            if len(self._held) >= self.HELD:
                self._spill()
            stored = self._disk.get(profile_id) if self._disk is not None else None
            found = self._held[profile_id] = stored if stored is not None else RunningMattr()
        return found

    def _spill(self) -> None:
        if self._disk is None:
            self._disk = SpilledRows.alone("mattr", self._spill_dir)
        for profile_id, running in self._held.items():
            self._disk[profile_id] = running
        self._held = {}

    def values(self) -> Iterator[RunningMattr]:
        """Every profile's RunningMattr, read back one at a time (in no particular order)."""
        if self._disk is None:
            yield from self._held.values()
            return
        self._spill()
        yield from self._disk.sorted_values()

    def count(self) -> int:
        if self._disk is None:
            return len(self._held)
        self._spill()
        return len(self._disk)

    def close(self) -> None:
        if self._disk is not None:
            self._disk.close()


class PopulationTally:
    """Every population measure of one population of replies, fed one reply at a time: per reply its
    length, per profile a running MATTR, counts of early and resolving replies, and per distinct word
    5-gram the first profiles that said it (up to ``SHARED_BY_PROFILES``), never the replies' text."""

    def __init__(self, style: str, spill_dir: Path | None = None) -> None:
        """``spill_dir``: where profiles beyond those held go (the run's metrics/; else a system temporary folder)."""
        self.style = style
        self.lengths: list[int] = []
        self.spoken = _SpokenByProfile(spill_dir)
        self.early = 0
        self.resolved = 0
        self.owners: dict[str, tuple[str, ...]] = {}  # 5-gram → its first distinct profiles, at most SHARED_BY_PROFILES

    def add(self, reply: Reply) -> None:
        tokens = words(reply.text)
        self.lengths.append(len(tokens))
        self.spoken.running(reply.profile_id).extend(tokens)
        if reply.early:
            self.early += 1
            self.resolved += bool(_EARLY_RESOLUTION.search(reply.text))
        profile, known = reply.profile_id, self.owners
        for gram in map(" ".join, zip(*(tokens[start:] for start in range(NGRAM)))):  # words hold no space: the join is one-to-one
            owners = known.get(gram, ())
            if len(owners) < SHARED_BY_PROFILES and profile not in owners:
                known[gram] = (*owners, profile)

    def close(self) -> None:
        """Remove what was moved to disk (the measures are not asked again)."""
        self.spoken.close()

    def measures(self) -> dict[str, Any]:
        low, high = STYLES[self.style].words
        lengths = self.lengths
        # fmean sums with math.fsum, exactly: the profiles' order does not move the mean
        diversity = [value for running in self.spoken.values() if (value := running.value()) is not None]
        repeated = (sum(len(owners) >= SHARED_BY_PROFILES for owners in self.owners.values()) / len(self.owners)
                    if self.owners else None)
        return {
            "replies": len(lengths),
            "profiles": self.spoken.count(),
            "words_target_low": low,
            "words_target_high": high,
            "words_mean": statistics.fmean(lengths) if lengths else None,
            "words_sd": statistics.stdev(lengths) if len(lengths) > 1 else None,
            "words_median": statistics.median(lengths) if lengths else None,
            "length_on_target_share": (sum(low <= n <= high for n in lengths) / len(lengths)) if lengths else None,
            "mattr": statistics.fmean(diversity) if diversity else None,
            "early_resolution_share": (self.resolved / self.early) if self.early else None,
            "repeated_phrasing_share": repeated,
        }


def population_measures(replies: Iterable[Reply], style: str) -> dict[str, Any]:
    """Every population measure of one population of replies, against ``style``'s length target."""
    tally = PopulationTally(style)
    for reply in replies:
        tally.add(reply)
    return tally.measures()


def check_targets(measures: dict[str, Any], limits: dict[str, tuple[float | None, float | None]] | None = None) -> list[str]:
    """Each measure outside its range, as a phrase ("mattr 0.93 above 0.9"); ``limits`` replaces a target's range."""
    missed = []
    for target in TARGETS:
        low, high = (limits or {}).get(target.measure, (target.low, target.high))
        value = measures.get(target.measure)
        if value is None:
            continue
        if low is not None and value < low:
            missed.append(f"{target.measure} {value:.2f} below {low:g}")
        if high is not None and value > high:
            missed.append(f"{target.measure} {value:.2f} above {high:g}")
    return missed


POPULATION_KEY = ("patient", "patient_model", "patient_mode", "patient_style")
POPULATION_COLUMNS = [*POPULATION_KEY, "source", "replies", "profiles", "words_target_low", "words_target_high",
                      "words_mean", "words_sd", "words_median", "length_on_target_share", "mattr",
                      "early_resolution_share", "repeated_phrasing_share", "targets_missed"]


def population_row(key: dict[str, Any], replies: Iterable[Reply] | PopulationTally, source: str) -> dict[str, Any]:
    """One metrics row: the population's key, where its replies came from, its measures and the targets it misses."""
    measures = (replies.measures() if isinstance(replies, PopulationTally)
                else population_measures(replies, str(key["patient_style"])))
    return {**key, "source": source, **measures, "targets_missed": "; ".join(check_targets(measures))}
