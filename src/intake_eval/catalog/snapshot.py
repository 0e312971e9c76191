"""The catalog a run folder's profiles were drawn from, kept in the run folder (``<run>/catalog/``):
``domains.yaml`` plus one ``<phenotype id>.yaml`` each, written when profiles are generated.

Every later stage on that folder (run, judge, patient QC, metrics, report) reads this copy, so a
study made with the user's own catalog or a phenotype subset is judged and reported with it, from
any working folder, after the original folder moved or changed. The copy loads to the same content
hash as the catalog it was written from, which is what the generate stage's config guard compares.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from intake_eval.catalog.load import DOMAINS_FILE, load_catalog
from intake_eval.catalog.schema import Catalog, DomainCatalog
from intake_eval.core.store import write_text_atomic

SNAPSHOT_FOLDER = "catalog"


def snapshot_folder(run_root: Path) -> Path:
    return Path(run_root) / SNAPSHOT_FOLDER


def write_catalog_snapshot(catalog: Catalog, run_root: Path) -> Path:
    """Write ``<run>/catalog/`` for ``catalog`` (replacing a copy of other contents)."""
    import yaml

    folder = snapshot_folder(run_root)
    if folder.is_dir():
        try:
            if load_catalog(folder).content_hash == catalog.content_hash:
                return folder
        except Exception:  # an unreadable copy is replaced below
            pass
        shutil.rmtree(folder)
    folder.mkdir(parents=True)

    def dump(data: dict) -> str:
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)

    domains = DomainCatalog(domains=list(catalog.domains.values()), context=catalog.context)
    write_text_atomic(folder / DOMAINS_FILE, dump(domains.model_dump(mode="json")))
    for pid, phenotype in catalog.phenotypes.items():
        write_text_atomic(folder / f"{pid}.yaml", dump(phenotype.model_dump(mode="json")))
    load_catalog.cache_clear()  # the folder's earlier contents may be cached
    return folder


def run_catalog(run_root: Path) -> Catalog:
    """The catalog of this run folder: its snapshot when there is one, else the shipped catalog."""
    folder = snapshot_folder(run_root)
    return load_catalog(folder) if (folder / DOMAINS_FILE).is_file() else load_catalog()
