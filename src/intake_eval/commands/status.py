"""`intake-eval status`: what a run folder holds, from its manifest, as tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, checked_run_dir, money_lines, money_text

if TYPE_CHECKING:
    from intake_eval.core.record_facts import FolderFacts
    from intake_eval.core.stage_kinds import StageKinds

RunDirOption = Annotated[Path, typer.Option("--run-dir", help="Run folder whose manifest.json to show.",
                                            callback=checked_run_dir)]


SHOWN_PARAMS = ("temperature", "max_tokens", "reasoning", "api_base", "api_key_env", "rpm", "tpm")


def _when(stamp: Any) -> str:
    """'2026-11-21T23:35:13+00:00' → '2026-11-21 23:35' (UTC)."""
    return str(stamp or "")[:16].replace("T", " ")


def _usage_rows(stage: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted((stage.get("usage") or {}).items())


def facts_from_records(paths: Any, data: dict[str, Any], kinds: StageKinds, facts: FolderFacts | None = None
                       ) -> dict[str, Any]:
    """Usage, retries, records done and the live status of each stage, from the records' kept facts and
    the stage log (the manifest's copies can be stale after a kill); ``kinds`` reads each stage's records,
    ``facts`` the folder's record facts (else as kept, nothing written).
    A stage no kind reads is refused, naming it and the manifest."""
    from intake_eval.core.calls import money_figures
    from intake_eval.core.run_lock import RunLock
    from intake_eval.core.usage import retry_totals, stage_aliases

    facts = facts or kinds.folder_facts(paths, keep=False)
    held = RunLock.is_held(paths)
    for name, _kind, _entry in list(kinds.stages(paths, data)):
        stage = data["stages"][name]
        found = kinds.stage_facts(paths, name, stage, facts)
        stage["usage"] = {alias: usage.model_dump() for alias, usage in found.usage.items()}
        stage["retries"] = retry_totals(paths, stage_aliases(stage))
        if found.done is not None:
            stage.setdefault("counts", {})
            stage["counts"] = {**(stage.get("counts") or {}), "done": found.done}
        if stage.get("status") == "running" and not held:
            stage["status"] = "interrupted"  # its process is gone: rerun the command to resume
    data["spend"] = money_figures(paths, data, kinds, facts)
    return data


def _facts(paths: Any, kinds: StageKinds) -> dict[str, Any]:
    """The manifest with the records' facts and the answers counted from them. The stages keep each record
    file's facts as they finish (core/record_facts), so this reads the manifest, the stage log and the kept
    facts; of a record file that only grew since (a stage appending now) only the new lines are read, and
    one changed otherwise (a merge, a compaction, an edit) is read again. What it read is kept, also while
    a stage holds the folder: every kept entry is checked against its file when used, so the next status
    reads only what was appended after this one."""
    from intake_eval.core.manifest import Manifest
    from intake_eval.metrics.answer_facts import kept_answers

    facts = kinds.folder_facts(paths, keep=True)
    data = facts_from_records(paths, Manifest(paths).data, kinds, facts)
    data["answers"] = kept_answers(paths, facts)
    facts.save()
    shaped: dict[str, Any] = json.loads(json.dumps(data, default=str))  # as --json prints it
    return shaped


def _retries(data: dict[str, Any], stage_name: str) -> dict[str, int]:
    """Retries per alias of a stage: the call ledger's count, else (a folder without one) the stage log's."""
    ledger = (data.get("spend") or {}).get("retries_by_stage_alias")
    if ledger is not None:
        return dict(ledger.get(stage_name) or {})
    stage = (data.get("stages") or {}).get(stage_name) or {}
    return {alias: r.get("retries", 0) for alias, r in (stage.get("retries") or {}).items() if isinstance(r, dict)}


def _stage_table(data: dict[str, Any]):
    from rich import box
    from rich.table import Table

    from intake_eval.commands.common import compact_number

    table = Table(title="Stages (done = records ok on disk; $ = records' cost)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    # numbers keep their width (no_wrap); the text columns wrap to make room at 80 columns
    table.add_column("stage", overflow="fold")
    table.add_column("status", overflow="fold")
    for column in ("done", "failed", "calls", "retries", "tokens", "$"):
        table.add_column(column, justify="right", no_wrap=column != "failed")
    for name, stage in data.get("stages", {}).items():
        counts = dict(stage.get("counts") or {})
        done = counts.pop("done", counts.pop("ok", counts.pop("profiles", "")))
        failed = counts.pop("failed", "")
        errors = counts.pop("judge_errors", 0)
        totals = {"calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        known = True
        for _, usage in _usage_rows(stage):
            for key in totals:
                totals[key] += usage.get(key, 0) or 0
            known = known and usage.get("cost_known", True)
        retries = sum(_retries(data, name).values())
        failed_text = f"{failed}" + (f" +{errors} judge err" if errors else "")
        table.add_row(name, str(stage.get("status", "?")), compact_number(done), failed_text,
                      compact_number(totals["calls"]), compact_number(retries),
                      compact_number(totals["prompt_tokens"] + totals["completion_tokens"]),
                      money_text(totals["cost_usd"], known))
    return table


def _model_usage_table(data: dict[str, Any]):
    from rich import box
    from rich.table import Table

    from intake_eval.commands.common import compact_number

    table = Table(title="Usage per stage and model ($ = records' cost)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  pad_edge=False)
    table.add_column("stage · model", overflow="fold")
    # cached = answers from our response cache; p-cache = share of prompt tokens the provider's
    # prompt cache served
    for column in ("calls", "cached", "retries", "prompt", "p-cache", "output", "$"):
        table.add_column(column, justify="right", no_wrap=True)
    for name, stage in data.get("stages", {}).items():
        for model, usage in _usage_rows(stage):
            retried = _retries(data, name).get(model, 0)
            prompt = usage.get("prompt_tokens", 0) or 0
            share = f"{(usage.get('cached_prompt_tokens', 0) or 0) / prompt:.0%}" if prompt else "—"
            table.add_row(f"{name} · {model}", compact_number(usage.get("calls", 0)),
                          compact_number(usage.get("cache_hits", 0)), compact_number(retried),
                          compact_number(prompt), share,
                          compact_number(usage.get("completion_tokens", 0) + usage.get("reasoning_tokens", 0)),
                          money_text(usage.get("cost_usd", 0.0), usage.get("cost_known", True)))
    return table


def _answers_table(rows: list[dict[str, Any]]):
    """Per clinician arm: conversations failed on an answer without visible text, and answers cut at the cap."""
    from rich import box
    from rich.table import Table

    table = Table(title="Answers per clinician (refused / empty = conversations failed on an answer without "
                        "visible text; cut = answers stopped at the token cap, share of that role's answers)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("clinician", overflow="fold", min_width=12)
    for column in ("conv.", "ok", "refused", "empty", "cut→failed", "clinician cut", "patient cut"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        arm = row["clinician"] + ("" if (row["condition"], row["patient_mode"]) == ("minimal", "prompted")
                                  else f" ({row['condition']}, {row['patient_mode']})")
        refused = sum(row[f"{role}_refused"] for role in ("clinician", "patient", "tracker"))
        empty = sum(row[f"{role}_empty_answer"] for role in ("clinician", "patient", "tracker"))
        cut = {role: f"{row[f'{role}_truncated']} ({row[f'{role}_truncated_share'] or 0:.0%})"
               for role in ("clinician", "patient")}
        table.add_row(arm, str(row["conversations"]), str(row["ok"]),
                      f"{refused}" + (f" ({row['clinician_refused']} clinician)" if refused else ""),
                      f"{empty}" + (f" ({row['clinician_empty_answer']} clinician)" if empty else ""),
                      str(row["failed_truncated"]), cut["clinician"], cut["patient"])
    return table


def _billed_table(data: dict[str, Any]):
    from rich import box
    from rich.table import Table

    from intake_eval.commands.common import compact_number

    table = Table(title="Billed per model (the call ledger, calls.jsonl)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    table.add_column("model", overflow="fold", min_width=12)
    for column in ("requests", "retries", "failed", "cached", "billed $", "saved $"):
        table.add_column(column, justify="right", no_wrap=True)
    for alias, calls in (data.get("spend", {}).get("by_alias") or {}).items():
        table.add_row(alias, compact_number(calls["requests"]), compact_number(calls["retries"]),
                      compact_number(calls["failed_attempts"]), compact_number(calls["cache_hits"]),
                      money_text(calls["billed_usd"], calls["billed_known"]), money_text(calls["saved_by_cache_usd"]))
    return table


def _models_table(data: dict[str, Any]):
    from rich.table import Table

    table = Table(title="Models per role", title_justify="left")
    for column in ("role", "alias", "provider id", "params"):
        table.add_column(column)
    for role, specs in (data.get("models") or {}).items():
        for spec in specs or []:
            spec = dict(spec) if isinstance(spec, dict) else {"alias": str(spec)}
            alias, model = spec.pop("alias", ""), spec.pop("model", "")
            params = spec.pop("params", None)
            shown = params if isinstance(params, dict) else spec
            shown = {k: v for k, v in shown.items() if k in SHOWN_PARAMS and v not in (None, "", {})}
            table.add_row(role, alias, model, ", ".join(f"{k}={v}" for k, v in sorted(shown.items())))
    return table


def _study_runs_table(data: dict[str, Any]):
    from rich import box
    from rich.table import Table

    from intake_eval.commands.common import compact_number

    table = Table(title="Study invocations (UTC)", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  pad_edge=False)
    for column in ("started", "finished", "status", "calls", "cached", "billed $", "wall s"):
        table.add_column(column, justify="left" if column in ("started", "finished", "status") else "right",
                         no_wrap=True)
    for entry in (data.get("study") or {}).get("history", []):
        started, finished = _when(entry.get("started")), _when(entry.get("finished"))
        if finished[:10] == started[:10]:
            finished = finished[11:]  # the same day: the time says it
        table.add_row(started, finished, str(entry.get("status", "")), compact_number(entry.get("calls", 0)),
                      compact_number(entry.get("cache_hits", 0)),
                      money_text(entry.get("cost_usd", 0.0), entry.get("cost_known", True)),
                      compact_number(round(float(entry.get("wall_s", 0) or 0), 1)))
    return table


def _provenance_table(data: dict[str, Any]):
    from rich.table import Table

    table = Table(title="Provenance", title_justify="left", show_header=False)
    table.add_column("key")
    table.add_column("value", overflow="fold")  # hashes and paths wrap whole, never cut
    study = data.get("study") or {}
    table.add_row("run", str(data.get("run_name", "")))
    if study.get("config_file"):
        table.add_row("study config", str(study["config_file"]))
    table.add_row("config hash", str(data.get("config_hash", "")))
    for name, stage in data.get("stages", {}).items():
        table.add_row(f"  {name} config hash", str(stage.get("config_hash", ""))[:16])
    table.add_row("created", str(data.get("created", "")))
    table.add_row("updated", str(data.get("updated", "")))
    for name, seed in (data.get("seeds") or {}).items():
        table.add_row(f"seed {name}", str(seed))
    for name, version in (data.get("versions") or {}).items():
        table.add_row(f"version {name}", str(version))
    for name, digest in sorted((data.get("prompts") or {}).items()):
        table.add_row(f"prompt {name}", str(digest))
    return table


def _styles_line(data: dict[str, Any]) -> str | None:
    """The run's patient behaviour styles, when it has more than the default: they multiply its conversations."""
    run = (data.get("stages") or {}).get("run") or {}
    styles = (run.get("config") or {}).get("patient_styles")
    if not styles:
        return None
    planned = (run.get("counts") or {}).get("planned")
    per_style = f" ({planned // len(styles)} per style)" if isinstance(planned, int) else ""
    return (f"patient styles: {', '.join(styles)} — every profile × clinician × condition × trial once per style: "
            f"{planned} conversations planned{per_style}")


def _rebuild(paths: Any, kinds: StageKinds) -> None:
    from intake_eval.commands.common import console
    from intake_eval.core.manifest_rebuild import rebuild_manifest
    from intake_eval.core.run_lock import RunLock

    with RunLock(paths):  # no stage may write the manifest meanwhile
        kept, data = rebuild_manifest(paths, kinds)
    where = f"; the malformed one is kept as {kept.name}" if kept is not None else ""
    console().print(f"rebuilt {paths.manifest} from the records ({len(data['stages'])} stages: "
                    f"{', '.join(data['stages']) or 'none'}){where}", markup=False)


def status(
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON on stdout instead of tables."),
    rebuild_manifest: bool = typer.Option(
        False, "--rebuild-manifest", help="Replace a malformed (or missing) manifest.json by one rebuilt from the "
        "records: stages, models per stage and counts (status 'rebuilt'; config hashes cannot be recovered, so the "
        "next run of each stage registers its configuration and resumes the records). The malformed file is kept "
        "as manifest.json.malformed-<time>. A readable manifest is refused."),
) -> None:
    """Show what a run folder holds: the money (billed by providers, saved by the response cache, and the
    records' cost), stages with counts (done, failed, judge errors), calls, retries, tokens and dollars per
    stage and model, models per role, config hash, seeds and versions.

    Also counts, per clinician and judge, answers refused, empty or cut at the token cap (from the
    records). Reads the manifest and the records only; safe while a run is in progress.
    """
    from rich.console import Console

    from intake_eval.commands.common import print_fitted
    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.store import RunPaths
    from intake_eval.stage_kinds import stage_kinds

    paths = RunPaths(run_dir)
    kinds = stage_kinds()
    if rebuild_manifest:
        _rebuild(paths, kinds)
    if not paths.manifest.exists():
        raise IntakeEvalError(f"{paths.manifest}: no manifest here; is --run-dir right? "
                              "(start with `intake-eval demo`)")
    data = _facts(paths, kinds)
    answers = data["answers"]["clinicians"]
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
        return
    out = Console()
    out.print(f"[bold]{paths.root}[/bold]  run [bold]{data.get('run_name', '')}[/bold]")
    for line in money_lines(data["spend"]):
        out.print(line, markup=False)
    print_fitted(out, _stage_table(data))
    styles = _styles_line(data)
    if styles:
        out.print(styles, markup=False)
    for patient, cell in sorted((((data.get("stages") or {}).get("run") or {}).get("per_patient") or {}).items()):
        out.print(f"  run with patient {patient}: {cell['ok']} ok, {cell['failed']} failed, "
                  f"{cell['not_started']} not started", markup=False)
    print_fitted(out, _model_usage_table(data))
    if answers:
        print_fitted(out, _answers_table(answers))
    for row in data["answers"]["judges"]:
        if row["refused"] or row["truncated_answers"]:
            out.print(f"judge {row['judge']} on {row['clinician']}: {row['refused']} of {row['judgments']} judgments "
                      f"refused; {row['truncated_answers']} judge answers cut at the token cap")
    if data["spend"].get("by_alias"):
        print_fitted(out, _billed_table(data))
    if data.get("models"):
        out.print(_models_table(data))
    if (data.get("study") or {}).get("history"):
        print_fitted(out, _study_runs_table(data))
    out.print(_provenance_table(data))
