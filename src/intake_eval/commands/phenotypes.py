"""`intake-eval phenotypes list|show ID|rates [ID]|validate [DIR]`: the clinical catalog."""

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
    from intake_eval.generate.design import phenotype_rates

    design = {row.domain: row.design for row in phenotype_rates(pheno, "seed")}
    table = Table(title="optional hidden domains (cited rate; design: the probability generate draws with, "
                        "see `phenotypes rates`)")
    table.add_column("domain", no_wrap=True)
    table.add_column("cited", no_wrap=True)
    table.add_column("design", no_wrap=True)
    table.add_column("source", overflow="fold")
    for option in pheno.hidden_optional:
        shown = f"{design[option.domain]:.3f}" if option.domain in design else "-"
        table.add_row(option.domain, f"{option.probability:g}", shown, option.source)
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


@app.command("rates")
def rates(phenotype_id: Annotated[str | None, typer.Argument(
              metavar="[ID]", help="One phenotype (default: all).", show_default=False)] = None,
          as_json: Annotated[bool, typer.Option("--json", help="A JSON list of objects, one per phenotype × "
                                                "optional domain.")] = False,
          hidden_count: Annotated[str, typer.Option(
              "--hidden-count", metavar="seed|literature",
              help="The design to show (as `generate --hidden-count`).")] = "seed",
          catalog_dir: CatalogOption = None) -> None:
    """Per phenotype and optional hidden domain: the cited co-occurrence rate and its source, the
    design inclusion probability generate draws with, and the lift (design ÷ cited).

    The design is built per phenotype and presenting domain (one lift each, shown above each
    table); a row's design is its inclusion probability among profiles where the domain is not the
    presenting one (the presenting domain is drawn uniformly from the phenotype's pool). seed: 4-5
    hidden domains, inclusion ∝ cited rate, capped at 1. literature: each domain at its cited rate;
    the number of hidden domains varies (its distribution is printed)."""
    import json

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.generate.design import (
        HIDDEN_COUNTS,
        count_distribution,
        design_for,
        design_statement,
        phenotype_rates,
    )

    if hidden_count not in HIDDEN_COUNTS:
        raise IntakeEvalError(f"--hidden-count must be {' or '.join(HIDDEN_COUNTS)} (got '{hidden_count}')")
    catalog = _load(catalog_dir)
    if phenotype_id is not None:
        _known(catalog, phenotype_id)
    chosen = [catalog.phenotypes[phenotype_id]] if phenotype_id else list(catalog.phenotypes.values())
    if as_json:
        rows = [{"phenotype": r.phenotype, "domain": r.domain, "source": r.source, "cited": r.cited,
                 "design": round(r.design, 6), "lift": round(r.lift, 6) if r.lift is not None else None,
                 "hidden_count": hidden_count,
                 "by_presenting": {p: {"design": round(v, 6), "lift": round(v / r.cited, 6) if r.cited else None}
                                   for p, v in r.by_presenting.items()}}
                for pheno in chosen for r in phenotype_rates(pheno, hidden_count)]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    out = Console()
    out.print(design_statement(hidden_count), highlight=False)
    out.print()
    for pheno in chosen:
        lifts = ", ".join(f"{design_for(pheno, p, hidden_count).lift:.2f} with {p}" for p in pheno.presenting)
        title = f"{pheno.id} ({hidden_count})"
        if hidden_count == "seed":
            title += f": lift {lifts}"
        else:
            shares = ", ".join(f"{k}: {v:.1%}" for k, v in count_distribution(pheno, hidden_count).items() if v >= 0.0005)
            title += f": hidden domains {shares}"
        table = Table(title=title, title_justify="left")
        table.add_column("domain", no_wrap=True)
        table.add_column("cited", justify="right", no_wrap=True)
        table.add_column("design", justify="right", no_wrap=True)
        table.add_column("lift", justify="right", no_wrap=True)
        table.add_column("source", overflow="fold")
        for row in phenotype_rates(pheno, hidden_count):
            lift = f"{row.lift:.2f}" if row.lift is not None else "-"
            table.add_row(row.domain, f"{row.cited:.2f}", f"{row.design:.3f}", lift, row.source)
        out.print(table)


def _known(catalog, phenotype_id: str) -> None:
    import difflib

    from intake_eval.core.errors import IntakeEvalError

    if phenotype_id not in catalog.phenotypes:
        close = difflib.get_close_matches(phenotype_id, list(catalog.phenotypes), n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise IntakeEvalError(f"unknown phenotype '{phenotype_id}'; {hint}`intake-eval phenotypes list` shows them all")


@app.command("validate")
def validate(directory: Annotated[Path | None, typer.Argument(
        metavar="[DIR]", help="Folder of phenotype YAML files (its own domains.yaml if present, else the shipped "
        "one). Default: the shipped phenotypes/.", show_default=False)] = None) -> None:
    """Check a catalog: unknown domain ids, probabilities outside [0, 1], conflict rules that empty a
    pool or make 4 hidden domains impossible, missing citations, typo'd keys, bad YAML, symptoms'
    `describes` declarations, cited rates no sampling design can realise, and domains that the
    meaning-level dedup could leave with too few symptoms. Prints one line per problem (file and
    field) and exits 2, or confirms the catalog is valid."""
    from intake_eval.catalog.load import display_path, load_and_validate
    from intake_eval.catalog.schema import DEFAULT_CATALOG_DIR

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.generate.dedup import check_symptom_supply
    from intake_eval.generate.design import check_designs

    folder = Path(directory) if directory is not None else DEFAULT_CATALOG_DIR
    catalog = load_and_validate(folder)
    problems = check_designs(catalog) + check_symptom_supply(catalog)
    if problems:
        count = len(problems)
        raise IntakeEvalError(f"the catalog in {display_path(folder)} has {count} problem{'s' if count > 1 else ''}:\n  "
                              + "\n  ".join(problems))
    typer.echo(f"ok: {display_path(folder)} — {len(catalog.phenotypes)} phenotypes, {len(catalog.domains)} domains "
               f"(catalog hash {catalog.content_hash})")
