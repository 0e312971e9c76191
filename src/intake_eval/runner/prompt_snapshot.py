"""The run folder's memory of what every role was told: prompt texts kept by content hash.

When a stage begins (``StageRunner.begin``), two kinds of text are copied into the run folder:
- every template the stage uses, and every template those include (``{% include %}``), byte for
  byte as read through ``core.prompts.template_path`` (so a template from any prompt folder the
  loader knows, inside the package or not, is covered): ``prompts/<name>.<hash16>.j2``. The hash is
  the template's ``core.prompts.prompt_hash``, the one the stage guard compares.
- the rendered prompt of each role and condition (``RenderedPrompt``), the stage's own rendering of
  what it sends: ``prompts/rendered/<role>.<variant>.<hash16>.txt``. A prompt that differs per
  conversation (the patient's holds the profile) is rendered for one example, named in ``example``.

Files are named by content, written atomically and never rewritten: a resumed stage with the same
prompts writes nothing, an edited template gets a new file beside the old one. Each stage's entry in
``manifest.json`` names the files it used (``stages.<name>.prompt_texts``; a forced stage starts a
new list), and the top-level ``prompt_texts`` maps each template name and rendered label to its
latest file. Readers (``show``, the methods section) take the versions the current stages use.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intake_eval.core.manifest import PROMPT_TEXTS as MANIFEST_KEY
from intake_eval.core.manifest import Manifest
from intake_eval.core.package_data import package_folder
from intake_eval.core.prompts import template_path
from intake_eval.core.store import RunPaths, file_safe, write_text_atomic

HASH_CHARS = 16
TEMPLATE_SUFFIX = ".j2"
SHIPPED = "package"  # a template's origin when it ships inside intake-eval


@dataclass(frozen=True)
class RenderedPrompt:
    """One role's prompt as its stage renders it. ``variant``: the condition, patient mode or nudge
    ("" when the role has one prompt); ``example``: what a per-conversation prompt was rendered for
    ("" when every conversation of the role and variant is sent exactly this text)."""

    role: str
    variant: str
    text: str
    template: str
    example: str = ""
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.role}.{self.variant}" if self.variant else self.role


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:HASH_CHARS]


def referenced_templates(source: str) -> list[str]:
    """Template names a template's text includes or imports (``_patient_style.j2`` → ``_patient_style``)."""
    import jinja2
    from jinja2 import meta

    found = meta.find_referenced_templates(jinja2.Environment().parse(source))
    return sorted({name.removesuffix(TEMPLATE_SUFFIX) for name in found if name})


def _write_once(path: Path, data: bytes) -> bool:
    """Write ``data`` unless the file already holds exactly it. Returns whether anything was written."""
    if path.is_file() and not path.is_symlink() and path.read_bytes() == data:
        return False
    write_text_atomic(path, data.decode("utf-8"))
    return True


def _origin(path: Path) -> str:
    shipped = package_folder("prompts").resolve()
    return SHIPPED if path.resolve().is_relative_to(shipped) else str(path.resolve())


def snapshot_templates(paths: RunPaths, names: Iterable[str]) -> dict[str, dict[str, str]]:
    """Copy the named templates and everything they include; name → manifest entry."""
    entries: dict[str, dict[str, str]] = {}
    queue = sorted(set(names))
    while queue:
        name = queue.pop()
        if name in entries:
            continue
        source_path = template_path(name)
        data = source_path.read_bytes()
        digest = content_hash(data)
        target = paths.prompts_dir / f"{file_safe(name)}.{digest}{TEMPLATE_SUFFIX}"
        _write_once(target, data)
        entries[name] = {"file": target.relative_to(paths.root).as_posix(), "sha256": digest,
                         "origin": _origin(source_path)}
        queue.extend(sorted(set(referenced_templates(data.decode("utf-8"))) - set(entries)))
    return dict(sorted(entries.items()))


def snapshot_rendered(paths: RunPaths, prompts: Iterable[RenderedPrompt]) -> dict[str, dict[str, str]]:
    """Write each rendered prompt; label → manifest entry."""
    entries: dict[str, dict[str, str]] = {}
    for prompt in prompts:
        data = prompt.text.encode("utf-8")
        digest = content_hash(data)
        target = paths.rendered_prompts_dir / f"{file_safe(prompt.label)}.{digest}.txt"
        _write_once(target, data)
        entries[prompt.label] = {"file": target.relative_to(paths.root).as_posix(), "sha256": digest,
                                 "role": prompt.role, "variant": prompt.variant, "template": prompt.template,
                                 "example": prompt.example, "note": prompt.note}
    return entries


def record_prompt_texts(manifest: Manifest, stage: str, paths: RunPaths,
                        names: Iterable[str], rendered: Iterable[RenderedPrompt]) -> None:
    """Snapshot a stage's templates and rendered prompts; the stage's entry names the versions it
    uses, the manifest's ``prompt_texts`` the latest of each (the caller saves the manifest)."""
    names, rendered = list(names), list(rendered)
    if not names and not rendered:
        return
    manifest.record_prompt_texts(stage, {"templates": snapshot_templates(paths, names),
                                         "rendered": snapshot_rendered(paths, rendered)})


# ---------------------------------------------------------------- reading a run folder's snapshot

@dataclass(frozen=True)
class SnapshotText:
    """One snapshotted text as read back; ``problem`` says why it cannot be trusted (missing, edited)."""

    key: str
    entry: Mapping[str, Any]
    text: str | None
    problem: str = ""


def _read(paths: RunPaths, key: str, entry: Mapping[str, Any]) -> SnapshotText:
    relative = str(entry.get("file", ""))
    path = paths.root / relative
    if not relative or not path.is_file():
        return SnapshotText(key, entry, None, f"{relative or key}: the snapshot file is missing")
    data = path.read_bytes()
    if content_hash(data) != entry.get("sha256"):
        return SnapshotText(key, entry, data.decode("utf-8", errors="replace"),
                            f"{relative}: its text no longer matches its hash (edited after the run)")
    return SnapshotText(key, entry, data.decode("utf-8"))


def _valid(section: Any) -> list[tuple[str, Mapping[str, Any]]]:
    items = section.items() if isinstance(section, Mapping) else []
    return [(str(key), entry) for key, entry in items if isinstance(entry, Mapping) and entry.get("file")]


def _entries(manifest_data: Mapping[str, Any], kind: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(key, entry) of every version the run folder's current stages use, sorted by key (a stage
    forced since keeps none of its old versions); a manifest whose stages name none: its index."""
    found: dict[tuple[str, str], Mapping[str, Any]] = {}
    for stage in (manifest_data.get("stages") or {}).values():
        used = stage.get(MANIFEST_KEY) if isinstance(stage, Mapping) else None
        for key, entry in _valid(used.get(kind) if isinstance(used, Mapping) else None):
            found.setdefault((key, str(entry["file"])), entry)
    if not found:
        for key, entry in _valid((manifest_data.get(MANIFEST_KEY) or {}).get(kind)):
            found[(key, str(entry["file"]))] = entry
    return [(key, found[(key, file)]) for key, file in sorted(found)]


def snapshot_templates_read(paths: RunPaths, manifest_data: Mapping[str, Any]) -> list[SnapshotText]:
    """Every template the run's current stages used (each version in use), sorted by name."""
    return [_read(paths, key, entry) for key, entry in _entries(manifest_data, "templates")]


def snapshot_rendered_read(paths: RunPaths, manifest_data: Mapping[str, Any]) -> list[SnapshotText]:
    """Every rendered prompt the run's current stages recorded, sorted by label."""
    return [_read(paths, key, entry) for key, entry in _entries(manifest_data, "rendered")]


def rendered_prompt(paths: RunPaths, manifest_data: Mapping[str, Any], label: str) -> SnapshotText | None:
    entry = next((entry for key, entry in _entries(manifest_data, "rendered") if key == label), None)
    return None if entry is None else _read(paths, label, entry)


def stage_template_sources(paths: RunPaths, manifest_data: Mapping[str, Any], stage: str) -> dict[str, str] | None:
    """Template name → the text ``stage`` used (readable ones), to render again exactly as it did;
    None when the stage kept no templates (a run folder made before they were kept)."""
    entry = (manifest_data.get("stages") or {}).get(stage)
    used = entry.get(MANIFEST_KEY) if isinstance(entry, Mapping) else None
    section = used.get("templates") if isinstance(used, Mapping) else None
    items = [_read(paths, key, value) for key, value in _valid(section)]
    if not items:
        return None
    return {item.key: item.text for item in items if item.text is not None and not item.problem}
