"""`intake-eval phenotypes list|show ID|validate [DIR]`: the clinical catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="The clinical catalog: 18 comorbidity phenotypes over a catalog of symptom domains (phenotypes/).",
    no_args_is_help=True,
)

CatalogOption = Annotated[
    Path | None,
    typer.Option("--catalog", help="Phenotype folder (default: the shipped phenotypes/).", show_default=False),
]


def _load(catalog_dir: Path | None):
    from intake_eval.catalog.load import load_catalog
    from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR

    return load_catalog(Path(catalog_dir) if catalog_dir is not None else DEFAULT_CATALOG_DIR)


@app.command("list")
def list_phenotypes(catalog_dir: CatalogOption = None) -> None:
    """One line per phenotype: alignment, presenting pool, required and optional hidden domains, weight."""
    from rich.console import Console
    from rich.table import Table

    catalog = _load(catalog_dir)
    total = sum(p.population_weight for p in catalog.phenotypes.values())
    table = Table(title=f"{len(catalog.phenotypes)} phenotypes, {len(catalog.domains)} domains")
    table.add_column("id", no_wrap=True)
    table.add_column("alignment", no_wrap=True)
    table.add_column("presenting")
    table.add_column("hidden required")
    table.add_column("opt.", no_wrap=True, justify="right")
    table.add_column("weight", no_wrap=True, justify="right")
    for pheno in catalog.phenotypes.values():
        table.add_row(pheno.id, pheno.alignment, ", ".join(pheno.presenting), ", ".join(pheno.hidden_required) or "-",
                      str(len(pheno.hidden_optional)), f"{pheno.population_weight / total:.1%}")
    out = Console()
    if not out.is_terminal:  # piped output: do not squeeze the table into 80 columns
        out = Console(width=160)
    out.print(table)


@app.command("show")
def show(phenotype_id: Annotated[str, typer.Argument(metavar="ID", help="Phenotype id (see `phenotypes list`).")],
         catalog_dir: CatalogOption = None) -> None:
    """Everything about one phenotype: pools with co-occurrence rates and their sources, conflicts,
    demographics, principal diagnosis."""
    import difflib

    from rich.console import Console
    from rich.table import Table

    from intake_eval.core.errors import IntakeEvalError

    catalog = _load(catalog_dir)
    if phenotype_id not in catalog.phenotypes:
        close = difflib.get_close_matches(phenotype_id, list(catalog.phenotypes), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise IntakeEvalError(f"unknown phenotype '{phenotype_id}'; {hint}`intake-eval phenotypes list` shows them all")
    pheno = catalog.phenotypes[phenotype_id]
    out = Console()
    principal = pheno.principal_diagnosis
    out.print(f"[bold]{pheno.id}[/] — {pheno.name} [{pheno.alignment}]")
    out.print(pheno.description)
    out.print(f"principal diagnosis: {principal.name} ({', '.join(principal.icd10)}) → domain {principal.domain}")
    out.print(f"presenting (one of): {', '.join(pheno.presenting)}")
    out.print(f"hidden: {pheno.hidden_count[0]}-{pheno.hidden_count[1]}; required: {', '.join(pheno.hidden_required) or 'none'}")
    table = Table(title="optional hidden domains")
    table.add_column("domain", no_wrap=True)
    table.add_column("p", no_wrap=True)
    table.add_column("source", overflow="fold")
    for option in pheno.hidden_optional:
        table.add_row(option.domain, f"{option.probability:g}", option.source)
    out.print(table)
    for rule in pheno.conflicts:
        out.print(f"conflict: keep {rule.keep}, drop {rule.drop} — {rule.reason}")
    demo = pheno.demographics
    sexes = ", ".join(f"{sex} {w:g}" for sex, w in demo.sex_weights.items())
    extra = f"; postpartum {demo.weeks_postpartum[0]}-{demo.weeks_postpartum[1]} weeks" if demo.postpartum else ""
    out.print(f"demographics: age {demo.age[0]}-{demo.age[1]}; sex {sexes}{extra}")
    if demo.life_context:
        out.print("life context seeds: " + "; ".join(demo.life_context))
    out.print(f"population weight: {pheno.population_weight:g} — {pheno.weight_source}")


@app.command("validate")
def validate(directory: Annotated[Path | None, typer.Argument(
        metavar="[DIR]", help="Folder of phenotype YAML files (its own domains.yaml if present, else the shipped "
        "one). Default: the shipped phenotypes/.", show_default=False)] = None) -> None:
    """Check a catalog: unknown domain ids, probabilities outside [0, 1], conflict rules that empty a
    pool or make 4 hidden domains impossible, missing citations, typo'd keys, bad YAML. Prints one
    line per problem (file and field) and exits 2, or confirms the catalog is valid."""
    from intake_eval.catalog.load import display_path, load_and_validate
    from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR

    folder = Path(directory) if directory is not None else DEFAULT_CATALOG_DIR
    catalog = load_and_validate(folder)
    typer.echo(f"ok: {display_path(folder)} — {len(catalog.phenotypes)} phenotypes, {len(catalog.domains)} domains "
               f"(catalog hash {catalog.content_hash})")
