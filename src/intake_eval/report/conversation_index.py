"""The viewer's conversation index, inlined in index.html for a small run and paged into files for a large one.

The index (``build.viewer_index``) has an entry per conversation (``convs``), the bleed flags of those
that bled (``bled``) and an entry per profile (``profiles``): at 5 × 10⁴ conversations that is 6 MB of
page. The entries stream in (conversation id order) and are written a page at a time, so only one
page's entries are ever held. Up to ``INLINE_CONVERSATIONS`` conversations it stays in the page. Beyond, index.html keeps only
the run-wide part and report/index/page-NNNNN.js files hold the rest, ``PAGE_CONVERSATIONS``
conversations a file; each calls ``IE_INDEX({...})``, which the page's own script merges into
``IE_DATA`` before the viewer starts (plain <script> tags: browsers block fetch() from file://). The
page names those files and how many conversations they hold, and says so plainly when one is missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.store import write_text_atomic

INLINE_CONVERSATIONS = 2000
PAGE_CONVERSATIONS = 5000
INDEX_FOLDER = "index"  # report/index/, beside report/conversations/ (the transcript shards)
PAGE_PREFIX = "page-"


def page_name(number: int) -> str:
    return f"{PAGE_PREFIX}{number:05d}"


def page_script(part: dict[str, Any]) -> str:
    text = json.dumps(part, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f"IE_INDEX({text});\n"


@dataclass
class PlacedIndex:
    """The per-conversation part of the viewer index as the page carries it: ``convs``, ``bled`` and
    ``profiles`` whole for a small run (empty when paged), the phenotypes of the profiles listed, the
    conversation the viewer opens on (``start``) and the paging keys (``pages``, ``n_convs``,
    ``n_profiles``, and ``per_page`` when paged)."""

    convs: list[list[Any]]
    bled: dict[str, str]
    profiles: dict[str, list[Any]]
    phenotypes: set[str]
    start: str | None
    paging: dict[str, Any]


def _start_rank(entry: list[Any]) -> tuple[Any, ...] | None:
    """Open on an instructive conversation: judged, with the widest mix of domain states (caught and missed)."""
    codes = entry[5]
    return (len(set(codes)), "3" in codes, entry[0]) if entry[4] == "ok" and codes else None


def place_index(rows: Iterable[tuple[list[Any], str | None]], n_profiles: int,
                profile_entry: Callable[[str], list[Any]], report_dir: Path, n_convs: int) -> PlacedIndex:
    """Place the viewer's conversation entries (``rows``: entry, bleed flags or None, in conversation id order;
    ``n_convs`` of them): whole in the page when small; else in report/index/ page files, written as the rows
    stream by, one page's entries held at a time. ``profile_entry`` gives a profile's entry (phenotype first).
    Pages of an earlier, larger report are removed, so the folder holds exactly this report's index."""
    folder = report_dir / INDEX_FOLDER
    paged = n_convs > INLINE_CONVERSATIONS
    names: list[str] = []
    phenotypes: set[str] = set()
    chunk: list[list[Any]] = []
    bled: dict[str, str] = {}
    first: str | None = None
    best: tuple[Any, ...] | None = None
    for entry, flags in rows:
        first = entry[0] if first is None else first
        rank = _start_rank(entry)
        if rank is not None and (best is None or rank > best):
            best = rank
        chunk.append(entry)
        if flags is not None:
            bled[entry[0]] = flags
        if paged and len(chunk) == PAGE_CONVERSATIONS:
            names.append(_write_page(folder, len(names), chunk, bled, profile_entry, phenotypes))
            chunk, bled = [], {}
    if paged and chunk:
        names.append(_write_page(folder, len(names), chunk, bled, profile_entry, phenotypes))
    if folder.is_dir():
        for stale in folder.glob(f"{PAGE_PREFIX}*.js"):
            if stale.stem not in names:
                stale.unlink(missing_ok=True)
    start = best[2] if best is not None else first
    if not names:
        profiles = {pid: profile_entry(pid) for pid in sorted({c[3] for c in chunk})}
        return PlacedIndex(chunk, bled, profiles, {p[0] for p in profiles.values()}, start,
                           {"pages": [], "n_convs": len(chunk), "n_profiles": len(profiles)})
    return PlacedIndex([], {}, {}, phenotypes, start, {"pages": names, "n_convs": n_convs, "n_profiles": n_profiles,
                                                       "per_page": PAGE_CONVERSATIONS})


def _write_page(folder: Path, number: int, chunk: list[list[Any]], bled: dict[str, str],
                profile_entry: Callable[[str], list[Any]], phenotypes: set[str]) -> str:
    """Write one page file of ``chunk``'s entries, their bleed flags and profiles; note the profiles' phenotypes."""
    profiles: dict[str, list[Any]] = {}
    for entry in chunk:
        if entry[3] not in profiles:
            profiles[entry[3]] = profile_entry(entry[3])
    phenotypes.update(p[0] for p in profiles.values())
    name = page_name(number)
    write_text_atomic(folder / f"{name}.js", page_script({"convs": chunk, "bled": bled, "profiles": profiles}))
    return name
