"""`intake-eval init DIR`: editable starting points for a study of your own, outside any checkout.

Writes a study config that names its own prompts folder and catalog, a models file, a new clinician
condition, a catalog (the shipped domains, one shipped phenotype and a renamed copy of another to
edit) and a .env.example. Nothing already in DIR is overwritten: a file that exists is refused
before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# The shipped phenotype copied under a new id, for the user to edit into their own.
TEMPLATE_PHENOTYPE = "insomnia_depression"
MY_PHENOTYPE = "my_phenotype"
KEPT_PHENOTYPE = "anxious_depression"


def init(
    folder: Annotated[Path, typer.Argument(help="Folder to write into (created if missing).", show_default=False)],
) -> None:
    """Write editable starting points into FOLDER: study.yaml (prompts_dir:, catalog:, a two-phenotype
    subset), models.yaml (a vLLM server and a cloud alias), prompts/clinician_mine.j2 (a condition),
    phenotypes/ (domains.yaml, a shipped phenotype and my_phenotype.yaml to edit), .env.example.

    Then: cd FOLDER && intake-eval study study.yaml --models models.yaml (offline as written).
    Existing files are never overwritten.
    """
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.store import write_text_atomic

    files = _starting_points()
    existing = [name for name in files if (folder / name).exists()]
    if existing:
        raise IntakeEvalError(f"{folder}: already has {', '.join(existing)}; choose a new or empty folder "
                              "(nothing was written)")
    if folder.exists() and not folder.is_dir():
        raise IntakeEvalError(f"{folder}: is not a folder")
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    typer.echo("\n".join(str(folder / name) for name in files))
    typer.echo(f"next: cd {folder} && intake-eval study study.yaml --models models.yaml", err=True)


def _starting_points() -> dict[str, str]:
    """Relative path → text of every file init writes."""
    import re

    from intake_eval.core.package_data import package_folder

    starter, catalog = package_folder("starter"), package_folder("phenotypes")
    shipped = (catalog / f"{TEMPLATE_PHENOTYPE}.yaml").read_text(encoding="utf-8")
    mine = re.sub(r"^id: .*$", f"id: {MY_PHENOTYPE}", shipped, count=1, flags=re.MULTILINE)
    mine = re.sub(r"^name: (.*)$", r"name: My phenotype (from \1)", mine, count=1, flags=re.MULTILINE)
    return {
        "study.yaml": (starter / "study.yaml").read_text(encoding="utf-8"),
        "models.yaml": (starter / "models.yaml").read_text(encoding="utf-8"),
        ".env.example": (starter / "env.example").read_text(encoding="utf-8"),
        "prompts/clinician_mine.j2": (starter / "clinician_mine.j2").read_text(encoding="utf-8"),
        "phenotypes/domains.yaml": (catalog / "domains.yaml").read_text(encoding="utf-8"),
        f"phenotypes/{KEPT_PHENOTYPE}.yaml": (catalog / f"{KEPT_PHENOTYPE}.yaml").read_text(encoding="utf-8"),
        f"phenotypes/{MY_PHENOTYPE}.yaml": f"# A copy of the shipped {TEMPLATE_PHENOTYPE} under a new id: edit it into "
                                            "your own (`intake-eval phenotypes validate phenotypes` checks it).\n" + mine,
    }
