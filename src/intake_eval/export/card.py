"""The dataset card of an ``--format hf`` export: README.md with YAML front matter the Hugging Face
hub reads (``configs``: one per table, its Parquet file as the train split; licence; tags), then the
simulated-data statement, each table's fields with their types and meanings, how to load it, the
study configuration (secrets removed), and the report's methods text as Markdown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from intake_eval.export.columns import Table

SIMULATED_NOTE = ("All data here are simulated: the patients are profiles sampled from a domain catalog and played "
                  "by language models or rule-based simulators; no real patient, clinician or health record was "
                  "used. The transcripts are not clinical advice.")
TAGS = ["synthetic", "mental-health", "clinical-interview", "llm-evaluation", "intake-eval"]
# Keys whose values can carry credentials or private endpoints: never written to the card.
SECRET_KEY = re.compile(r"^(api_base|base_url|api_key\w*|\w*secret\w*|\w*password\w*|\w*_token|token|"
                        r"\w*headers?|authorization)$", re.IGNORECASE)


@dataclass
class ExportedTable:
    """One Parquet file written: its table declaration (None for a metrics table: columns as found)."""

    name: str
    file: str
    rows: int
    about: str
    fields: list[tuple[str, str, str]] = field(default_factory=list)  # (name, arrow type, meaning)


def without_secrets(value: Any) -> Any:
    """A copy of a config with every credential-bearing key (api_base, keys, tokens, headers) removed."""
    if isinstance(value, dict):
        return {key: without_secrets(item) for key, item in value.items() if not SECRET_KEY.match(str(key))}
    if isinstance(value, list):
        return [without_secrets(item) for item in value]
    return value


def declared_fields(table: Table) -> list[tuple[str, str, str]]:
    names = {"strings": "list<string>"}
    return [(column.name, names.get(column.type, column.type), column.meaning) for column in table.columns]


def front_matter(tables: list[ExportedTable], license_id: str, pretty_name: str) -> str:
    configs: list[dict[str, object]] = [{"config_name": table.name, "data_files": [{"split": "train", "path": table.file}]} for table in tables
               if table.rows]  # datasets refuses a split with no rows, so an empty table is no configuration
    if configs:
        configs[0]["default"] = True
    meta = {"license": license_id, "pretty_name": pretty_name, "tags": TAGS, "configs": configs}
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _fields_markdown(table: ExportedTable) -> list[str]:
    empty = " This table is empty in this run, so it is not listed as a configuration." if not table.rows else ""
    out = [f"### `{table.name}` — `{table.file}` ({table.rows:,} rows)", "", table.about + empty, "",
           "| Field | Type | Meaning |", "|---|---|---|"]
    out += [f"| `{name}` | {_cell(kind)} | {_cell(meaning)} |" for name, kind, meaning in table.fields]
    return out + [""]


def _config_markdown(manifest: dict[str, Any]) -> list[str]:
    study = without_secrets(manifest.get("study") or {})
    summary = {
        "run_name": manifest.get("run_name"),
        "config_hash": manifest.get("config_hash"),
        "seeds": manifest.get("seeds"),
        "versions": manifest.get("versions"),
        "source": without_secrets(manifest.get("source")),
        "models": {role: [{key: spec.get(key) for key in ("alias", "model", "description") if spec.get(key)}
                          for spec in specs if isinstance(spec, dict)]
                   for role, specs in (manifest.get("models") or {}).items() if isinstance(specs, list)},
        "study_config": study.get("config"),
        "stages": {name: without_secrets(stage.get("config")) for name, stage in (manifest.get("stages") or {}).items()
                   if isinstance(stage, dict) and stage.get("config") is not None},
    }
    text = yaml.safe_dump({key: value for key, value in summary.items() if value}, sort_keys=False, allow_unicode=True)
    return ["## Study configuration", "",
            "From the run's manifest.json (credentials, API endpoints and key names removed):", "",
            "```yaml", text.rstrip("\n"), "```", ""]


def _loading_markdown(tables: list[ExportedTable]) -> list[str]:
    shown = next((table for table in tables if table.name == "turns"), tables[0] if tables else None)
    if shown is None:
        return []
    return ["## Loading", "", "```python", "import datasets, pandas",
            f'{shown.name} = datasets.load_dataset("parquet", data_files="{shown.file}", split="train")',
            f'frame = pandas.read_parquet("{shown.file}")', "```", "",
            "On the hub, each table is a configuration: `datasets.load_dataset(REPO, \"labels\")`.", ""]


def dataset_card(tables: list[ExportedTable], manifest: dict[str, Any], license_id: str,
                 methods: list[str] | None) -> str:
    name = str(manifest.get("run_name") or "run")
    lines = [f"# intake-eval run `{name}`", "",
             "Simulated mental-health intake interviews: LLM clinicians interview simulated patients who hold "
             "hidden comorbid domains and disclose them only when asked; LLM judges label every turn. "
             "Exported by `intake-eval export`.", "", f"**{SIMULATED_NOTE}**", "", "## Tables", ""]
    for table in tables:
        lines += _fields_markdown(table)
    lines += _loading_markdown(tables) + _config_markdown(manifest)
    if methods:
        lines += methods
    else:
        lines += ["## Methods", "", "This run folder has no conversations yet, so there is no methods text.", ""]
    lines += ["## Licence", "", f"Released under `{license_id}`. {SIMULATED_NOTE}", ""]
    return front_matter(tables, license_id, f"intake-eval {name}") + "\n" + "\n".join(lines)
