"""Options every command shares, and the console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.fs import blocking_file


def checked_run_dir(value: Path | None) -> Path | None:
    """--run-dir must be a folder (or not exist yet): a file there is refused before any work."""
    if value is None:
        return value
    blocker = value if value.exists() and not value.is_dir() else blocking_file(value)
    if blocker is not None:
        where = "" if blocker == value else f" ({blocker} is a file)"
        raise IntakeEvalError(f"--run-dir {value}: is not a folder{where}; choose a folder (it is created if missing)")
    return value


RunDirOption = Annotated[
    Path,
    typer.Option("--run-dir", help="Run folder to read and write (created if missing).", show_default=True,
                 callback=checked_run_dir),
]
ModelsOption = Annotated[
    list[Path] | None,
    typer.Option("--models", show_default=False, metavar="<path>",
                 help="Extra model aliases (YAML) merged over configs/models.yaml. Repeatable: files merge in the "
                      "order given, a later file's alias replacing an earlier one's."),
]
ForceOption = Annotated[
    bool,
    typer.Option("--force", help="Start this stage over if its configuration changed (old files move to superseded/)."),
]
NoCacheOption = Annotated[bool, typer.Option("--no-cache", help="Bypass the response cache (still writes to it).")]


def use_prompts_option(ctx: typer.Context, value: Path | None) -> Path | None:
    """--prompts DIR: the user's templates win over the shipped ones until the command ends."""
    if value is not None:
        from intake_eval.core.prompts import use_prompts

        ctx.with_resource(use_prompts(value))
    return value


PromptsOption = Annotated[
    Path | None,
    typer.Option("--prompts", metavar="DIR", show_default=False, callback=use_prompts_option,
                 help="Your prompt templates: a template in DIR (e.g. clinician_<condition>.j2) replaces the shipped "
                      "one of the same name; every other template comes from the package. `intake-eval init` "
                      "writes editable copies."),
]
CatalogOption = Annotated[
    Path | None,
    typer.Option("--catalog", metavar="DIR", show_default=False,
                 help="Phenotype folder to sample from (domains.yaml + one YAML per phenotype; default: the shipped "
                      "catalog). The run folder keeps a copy (catalog/) that later stages read."),
]


def checked_shard(value: str | None) -> str | None:
    """--shard must read i/N with 1 ≤ i ≤ N: refused before any work."""
    from intake_eval.core.shard import parse_shard

    parse_shard(value)
    return value


ShardOption = Annotated[
    str | None,
    typer.Option("--shard", metavar="i/N", show_default=False, callback=checked_shard,
                 help="Only shard i of N: the profiles a stable hash of their id assigns to it. Each shard is its "
                      "own run folder (on any machine); `intake-eval merge` joins the N folders into one run."),
]

DEFAULT_RUN_DIR = Path("runs/default")


def console():
    """A rich console on stderr for progress and messages (stdout stays for data such as JSON)."""
    from rich.console import Console

    return Console(stderr=True)


def compact_number(value: Any) -> str:
    """A count for an 80-column table: 473 → '473', 725760 → '725.8k', 12_400_000 → '12.4M' (never cut)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}" if suffix != "k" else f"{value / 1e3:.1f}k"
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def money_text(value: float, known: bool = True) -> str:
    """Dollars as every table writes them; an unknown price shows as a floor (≥) or 'unknown'."""
    text = "$0" if value == 0 else f"${value:,.2f}" if value >= 1 else f"${value:.4f}"
    if not known:
        return f"≥{text}" if value else "unknown"
    return text


def money_lines(spend: dict[str, Any]) -> list[str]:
    """The three figures, named as everywhere: billed, saved by the cache, records' cost."""
    records = money_text(spend.get("records_cost_usd") or 0.0, spend.get("records_cost_known", True))
    if spend.get("billed_usd") is None:
        return [f"billed: unknown (no calls.jsonl: made before the call ledger) · records' cost {records}"]
    billed = money_text(spend["billed_usd"], spend.get("billed_known", True))
    estimated = spend.get("billed_estimated_usd") or 0.0
    lines = [f"billed {billed} · saved by the cache {money_text(spend.get('saved_by_cache_usd') or 0.0)} · "
             f"records' cost {records}",
             f"provider requests {spend.get('requests', 0):,} · retries {spend.get('retries', 0):,} · "
             f"failed attempts {spend.get('failed_attempts', 0):,} · cache hits {spend.get('cache_hits', 0):,}"]
    if estimated:
        lines.append(f"billed includes {money_text(estimated)} estimated for {spend.get('unanswered', 0):,} requests "
                     "whose answer never arrived (in flight at a kill) or could not be read")
    return lines


def print_money(out: Any, run_dir: Any) -> None:
    """The closing money line of a command: the folder's billed, saved-by-the-cache and records' cost figures
    (the names status, the report and metrics/cost*.csv use)."""
    from intake_eval.core.calls import money_figures
    from intake_eval.core.manifest import Manifest
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = run_dir if isinstance(run_dir, RunPaths) else RunPaths(run_dir)
    if not paths.manifest.exists():
        return
    try:
        manifest = Manifest(paths).data
    except Exception:  # a malformed manifest is the status command's to explain
        return
    out.print(f"run folder: {money_lines(money_figures(paths, manifest, stage_kinds()))[0]}", markup=False)


def budget_left_text(left: dict, setting: str = "--budget") -> str:
    """What a budget stop left, in the one wording of run, judge and study: '$X of $Y spent in this run
    folder; N conversations [and M judgments] left, about $Z more to finish (<setting> W or more)'."""
    more = left["dollars_to_finish"]
    work = (f"{left['conversations']} conversations and {left['judgments']} judgments left" if left.get("judgments")
            else f"{left['conversations']} conversations left to run")
    return (f"${left['spent']:.2f} of ${left['limit']:.2f} spent in this run folder; {work}, about ${more:.2f} more "
            f"to finish ({setting} {left['spent'] + more:.2f} or more)")


def budget_stop_line(left: dict | None, not_started: int, what: str = "conversations") -> str:
    """One line: what the budget stop left to run, and roughly what finishing would cost."""
    if not left:
        return f"[yellow]budget reached[/]: {not_started} {what} not started; run again with a larger --budget."
    return f"[yellow]budget reached[/]: {budget_left_text(left)}."


def print_fitted(out: Any, table: Any) -> None:
    """Print a rich table so that no number is ever cut and no word is folded: its number columns
    are the ``no_wrap`` ones and keep their full width; the text columns share the rest, the widest
    narrowed first, never below their longest word, wrapping between words. When that cannot fit the
    console (80 columns, many of them), each row prints as a block instead: its first cell, then
    `header value` pairs wrapped between pairs."""
    import textwrap

    from rich.padding import Padding
    from rich.text import Text

    columns = table.columns
    rows = [[cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain for cell in column.cells]
            for column in columns]
    texts = [[str(column.header), *cells] for column, cells in zip(columns, rows)]
    _, right, _, left = Padding.unpack(table.padding)
    overhead = (left + right) * len(columns) - (0 if table.pad_edge else left + right)
    if table.box:
        overhead += len(columns) - 1 + (2 if table.show_edge else 0)
    natural = [max(len(line) for text in cells for line in text.splitlines() or [""]) for cells in texts]
    words = [max(len(word) for text in cells for word in text.split() or [""]) for cells in texts]
    wrapping = [index for index, column in enumerate(columns) if not column.no_wrap]
    room = out.width - overhead - sum(natural[i] for i, column in enumerate(columns) if column.no_wrap)
    if sum(words[i] for i in wrapping) <= room:
        widths = {i: natural[i] for i in wrapping}
        while sum(widths.values()) > room:  # narrow the widest text column that can still give
            widest = max((i for i in wrapping if widths[i] > words[i]), key=lambda i: widths[i])
            widths[widest] -= 1
        for index, width in widths.items():
            columns[index].width = width
        out.print(table)
        return
    if table.title:
        out.print("\n".join(textwrap.wrap(str(table.title), max(out.width, 20), break_long_words=False)), markup=False)
    for index in range(len(rows[0]) if rows else 0):
        first, *rest = [(str(column.header), cells[index]) for column, cells in zip(columns, rows)]
        pairs = [f"{name} {value}".replace(" ", "\u00a0") + "," for name, value in rest if value.strip()]
        lines = textwrap.wrap(" ".join(pairs).rstrip(","), max(out.width, 20), initial_indent="    ",
                              subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
        head = textwrap.wrap(first[1], max(out.width, 20), break_long_words=False, break_on_hyphens=False)
        out.print("\n".join([*head, *(line.replace("\u00a0", " ") for line in lines)]), markup=False,
                  soft_wrap=True)
