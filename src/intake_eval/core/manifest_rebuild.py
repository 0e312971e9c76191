"""A manifest.json rebuilt from the records, for a run folder whose manifest is malformed or lost.

The records name what made them (aliases, provider ids, patient mode, conditions, judges), so the
stages, their models and their counts can be recovered (each stage kind recovers its own stages,
core/stage_kinds.py); the configuration hashes cannot. A rebuilt
stage has status ``rebuilt`` and no config hash: the next invocation of each stage registers its
configuration as new and resumes the records on disk (as after a lost manifest), and a rebuilt
model entry (``rebuilt_from_records``) is replaced by the full spec instead of being compared.
The malformed file is kept next to it, never deleted. The index of the prompts the run folder keeps
(``prompt_texts``) is rebuilt from their file names; what a rendered prompt was rendered for is lost.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from intake_eval.core.schema import SCHEMA_VERSION
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.manifest import PROMPT_TEXTS, REBUILT, now_iso, package_versions, parse_manifest
from intake_eval.core.stage_kinds import StageKinds
from intake_eval.core.store import RunPaths, write_text_atomic


SNAPSHOT_FILE = re.compile(r"^(?P<key>.+)\.(?P<hash>[0-9a-f]{16})\.(?:j2|txt)$")
REBUILT_RENDERED_NOTE = "index rebuilt from the file name: what this prompt was rendered for is not recorded"


def _prompt_texts(paths: RunPaths) -> dict[str, dict[str, dict[str, Any]]]:
    """The prompt snapshot's index from its file names; of several versions of one name, the newest."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, folder, pattern in (("templates", paths.prompts_dir, "*.j2"), ("rendered", paths.rendered_prompts_dir, "*.txt")):
        files = sorted(folder.glob(pattern), key=lambda p: (p.stat().st_mtime_ns, p.name)) if folder.is_dir() else []
        for path in files:
            match = SNAPSHOT_FILE.match(path.name)
            if match is None or not path.is_file():
                continue
            key = match["key"]
            entry: dict[str, Any] = {"file": path.relative_to(paths.root).as_posix(), "sha256": match["hash"], REBUILT: True}
            if kind == "rendered":
                role, _, variant = key.partition(".")
                entry.update(role=role, variant=variant, note=REBUILT_RENDERED_NOTE)
            found.setdefault(kind, {})[key] = entry
    return found


def rebuild_manifest_data(paths: RunPaths, kinds: StageKinds) -> dict[str, Any]:
    """A manifest describing what the records on disk hold."""
    stages = kinds.rebuilt_stages(paths)
    data = {"schema_version": SCHEMA_VERSION, "run_name": paths.root.name, "created": now_iso(),
            "versions": package_versions(), "stages": stages, "models": {}, "prompts": {}, "seeds": {},
            REBUILT: {"at": now_iso()}}
    prompt_texts = _prompt_texts(paths)
    if prompt_texts:
        data[PROMPT_TEXTS] = prompt_texts
    return data


def rebuild_manifest(paths: RunPaths, kinds: StageKinds) -> tuple[Path | None, dict[str, Any]]:
    """Replace a malformed (or missing) manifest.json by one rebuilt from the records; the malformed
    file is kept as ``manifest.json.malformed-<time>``. Returns where it was kept and the new data.
    A readable manifest is refused: it holds what records cannot tell (config hashes, history)."""
    kept = None
    if paths.manifest.exists():
        try:
            parse_manifest(paths.manifest, paths.manifest.read_text(encoding="utf-8"))
        except (IntakeEvalError, UnicodeDecodeError):
            kept = paths.manifest.with_name(f"manifest.json.malformed-{time.strftime('%Y%m%d-%H%M%S')}")
        else:
            raise IntakeEvalError(f"{paths.manifest}: manifest is readable; --rebuild-manifest only replaces a "
                                  "malformed or missing one (it would lose the config hashes and history)")
    elif not paths.root.is_dir():
        raise IntakeEvalError(f"--run-dir {paths.root}: no run folder here")
    data = rebuild_manifest_data(paths, kinds)
    if kept is not None:
        paths.manifest.replace(kept)
    data[REBUILT]["malformed_copy"] = kept.name if kept is not None else None
    write_text_atomic(paths.manifest, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    return kept, data
