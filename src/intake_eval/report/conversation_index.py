"""The viewer's conversation index, inlined in index.html for a small run and paged into files for a large one.

The index (``build.viewer_index``) has an entry per conversation (``convs``), the bleed flags of those
that bled (``bled``) and an entry per profile (``profiles``): at 5 × 10⁴ conversations that is 6 MB of
page. Up to ``INLINE_CONVERSATIONS`` conversations it stays in the page. Beyond, index.html keeps only
the run-wide part and report/index/page-NNNNN.js files hold the rest, ``PAGE_CONVERSATIONS``
conversations a file; each calls ``IE_INDEX({...})``, which the page's own script merges into
``IE_DATA`` before the viewer starts (plain <script> tags: browsers block fetch() from file://). The
page names those files and how many conversations they hold, and says so plainly when one is missing.
"""

from __future__ import annotations

import json
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


def place_index(index: dict[str, Any], report_dir: Path) -> dict[str, Any]:
    """The viewer index as the page carries it: whole when small; else without ``convs``, ``bled`` and
    ``profiles``, which go to report/index/ page files (listed as ``pages``, with ``n_convs``, ``n_profiles``
    and ``per_page``). Pages of
    an earlier, larger report are removed, so the folder holds exactly this report's index."""
    folder = report_dir / INDEX_FOLDER
    convs: list[list[Any]] = index["convs"]
    names: list[str] = []
    if len(convs) > INLINE_CONVERSATIONS:
        for number, start in enumerate(range(0, len(convs), PAGE_CONVERSATIONS)):
            chunk = convs[start:start + PAGE_CONVERSATIONS]
            part = {"convs": chunk,
                    "bled": {c[0]: index["bled"][c[0]] for c in chunk if c[0] in index["bled"]},
                    "profiles": {c[3]: index["profiles"][c[3]] for c in chunk if c[3] in index["profiles"]}}
            names.append(page_name(number))
            write_text_atomic(folder / f"{names[-1]}.js", page_script(part))
    if folder.is_dir():
        for stale in folder.glob(f"{PAGE_PREFIX}*.js"):
            if stale.stem not in names:
                stale.unlink(missing_ok=True)
    if not names:
        return {**index, "pages": [], "n_convs": len(convs), "n_profiles": len(index["profiles"])}
    return {**index, "convs": [], "bled": {}, "profiles": {}, "pages": names, "n_convs": len(convs),
            "n_profiles": len(index["profiles"]), "per_page": PAGE_CONVERSATIONS}
