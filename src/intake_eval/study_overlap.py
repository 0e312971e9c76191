"""The run and judge stages of a study, overlapped: each conversation is judged as soon as it ends.

The runner's ``on_done`` puts every finished ok conversation on an asyncio queue that judge workers
consume (one judge call set per conversation and judge, as ``judging.judge_conversation`` makes
them), so the judging costs little wall time beyond the conversations. Afterwards
``judging.judge_stage`` sweeps up whatever an earlier, interrupted invocation left unjudged, the
files are compacted, and the manifest's run and judge stages are finished with counts and the
usage summed from the records on disk (every invocation, cached calls free).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from intake_eval.store import RunPaths
from intake_eval.study_config import StudyConfig


def _run_settings(config: StudyConfig):
    from intake_eval.runner import RunSettings

    return RunSettings(
        clinicians=list(config.clinicians), patient=config.patient.model, patient_mode=config.patient.mode,
        tracker=config.patient.tracker, turns=config.turns, conditions=list(config.conditions),
        trials=config.trials, concurrency=config.concurrency, budget=config.budget,
        formulation=config.formulation,  # issue 8
    )


def _begin_run_stage(config: StudyConfig, specs: dict, paths: RunPaths, manifest: Any, force: bool):
    from intake_eval.leakage import assert_no_generator_leak
    from intake_eval.runner import begin_run_stage

    settings = _run_settings(config)
    for role, aliases in config.roles().items():
        if role != "generator":
            assert_no_generator_leak(manifest, role, aliases, specs=specs)
    role_specs = {"patient": specs[config.patient.model]}
    if config.patient.mode == "tracked":
        role_specs["tracker"] = specs[config.patient.tracker] if config.patient.tracker else role_specs["patient"]
    begin_run_stage(manifest, paths, settings, role_specs,
                    {alias: specs[alias] for alias in config.clinicians}, force=force)
    return settings


def _begin_judge_stage(config: StudyConfig, specs: dict, paths: RunPaths, manifest: Any, force: bool,
                       pool: Any) -> list:
    from intake_eval.judging import JUDGE_PROMPTS, JudgeSetup, judge_config, judge_label
    from intake_eval.prompts import prompt_hashes

    setups = []
    for alias in config.judges:
        label = judge_label(alias, config.judge_mode)
        manifest.begin_stage(f"judge:{label}", judge_config(alias, specs[alias].model, config.judge_mode),
                             force=force, outputs=[paths.judge_dir(label)])
        setups.append(JudgeSetup(label=label, alias=alias, model=pool.get(alias), mode=config.judge_mode))
    known = {entry.get("alias"): entry for entry in manifest.data.get("models", {}).get("judge", [])}
    for setup in setups:
        known[setup.alias] = {"alias": setup.alias, "label": setup.label, "mode": setup.mode,
                              **specs[setup.alias].public_dict()}
    manifest.record_models("judge", [known[key] for key in sorted(known)])
    # The first judge of the config is the primary one (the report's numbers); the rest cross-check.
    manifest.data.setdefault("judges", {})["primary"] = setups[0].label
    manifest.record_prompts(prompt_hashes(list(JUDGE_PROMPTS)))
    manifest.save()
    return setups


class _Progress:
    """Two bars on stderr: conversations and judgments, advancing together."""

    def __init__(self, console: Any, conversations: int, judgments: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("[bold]{task.description:<10}[/]"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=console,
                                 refresh_per_second=4, disable=console is None)
        self.run = self.progress.add_task("run", total=max(conversations, 1), note="")
        self.judge = self.progress.add_task("judge", total=max(judgments, 1), note="")
        self.judge_errors = 0

    def update_run(self, totals: Any) -> None:
        dollars = f"${totals.dollars:.2f}" + ("" if totals.cost_known else "+")
        self.progress.update(self.run, completed=totals.skipped + totals.ok + totals.failed,
                             total=max(totals.planned, 1),
                             note=f"failed {totals.failed} · in flight {totals.in_flight} · {dollars}")

    def judged(self, ok: bool) -> None:
        self.judge_errors += 0 if ok else 1
        self.progress.update(self.judge, advance=1, note=f"judge errors {self.judge_errors}")

    def __enter__(self) -> "_Progress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


async def _run_and_judge(plan: list, settings: Any, setups: list, pool: Any, paths: RunPaths, catalog: Any,
                         profiles: dict, progress: _Progress, judge_workers: int) -> Any:
    """Conversations run; each one that finishes ok is judged by every judge right away."""
    from intake_eval.judging import judge_conversation
    from intake_eval.runner import RunTotals, run_conversations
    from intake_eval.store import JsonlWriter

    queue: asyncio.Queue = asyncio.Queue()
    writers: dict[Path, JsonlWriter] = {}

    def on_done(conversation: Any) -> None:
        if conversation.ok:
            for setup in setups:
                queue.put_nowait((setup, conversation))

    async def worker() -> None:
        while True:
            item = await queue.get()
            try:
                if item is None:
                    return
                setup, conversation = item
                judgment = await judge_conversation(conversation, profiles[conversation.profile_id], setup.model,
                                                    setup.mode, judge=setup.label, catalog=catalog)
                out = paths.judgments(setup.label, conversation.clinician)
                if out not in writers:
                    writers[out] = JsonlWriter(out)
                writers[out].write(judgment)
                progress.judged(judgment.ok)
            finally:
                queue.task_done()

    workers = [asyncio.create_task(worker()) for _ in range(max(1, judge_workers))]
    totals = RunTotals()
    try:
        await run_conversations(plan, pool, paths=paths, patient=settings.patient, tracker=settings.tracker,
                                concurrency=settings.concurrency, budget=settings.budget, on_done=on_done,
                                totals=totals, on_update=progress.update_run)
        await queue.join()
    finally:
        for _ in workers:
            queue.put_nowait(None)
        await asyncio.gather(*workers, return_exceptions=True)
        for writer in writers.values():
            writer.close()
    return totals


def _judgment_counts(paths: RunPaths, setups: list, conversation_ids: set[str]) -> dict[str, dict[str, int]]:
    from intake_eval.store import iter_json_lines

    counts = {}
    for setup in setups:
        status: dict[str, str] = {}
        for path in sorted((paths.judge_dir(setup.label)).glob("*.jsonl")):
            for data in iter_json_lines(path):
                status[str(data.get("conversation_id"))] = str(data.get("status", "ok"))
        wanted = [status.get(cid) for cid in conversation_ids]
        counts[setup.label] = {
            "done": sum(1 for s in wanted if s == "ok"),
            "judge_errors": sum(1 for s in wanted if s == "judge_error"),
            "failed": sum(1 for s in wanted if s not in (None, "ok", "judge_error")),
            "not_judged": sum(1 for s in wanted if s is None),
        }
    return counts


def _ok_conversation_ids(paths: RunPaths, clinicians: list[str]) -> set[str]:
    from intake_eval.store import done_keys

    ids: set[str] = set()
    for alias in clinicians:
        ids |= done_keys(paths.conversations(alias), "conversation_id")
    return ids


def _records_usage(paths: RunPaths, config: StudyConfig, setups: list) -> tuple[dict, dict]:
    """Usage per model alias summed over the records on disk (every invocation, cached calls free):
    (run stage, judge label → usage)."""
    from intake_eval.records import Usage
    from intake_eval.store import iter_json_lines

    owners = {"patient": config.patient.model, "tracker": config.patient.tracker or config.patient.model}
    run: dict[str, Usage] = {}
    for alias in config.clinicians:
        for data in iter_json_lines(paths.conversations(alias)):
            for role, raw in (data.get("usage") or {}).items():
                owner = alias if role in ("clinician", "formulation") else owners.get(role, role)
                run[owner] = run.get(owner, Usage()).add(Usage.model_validate(raw))
    judged: dict[str, dict[str, Usage]] = {}
    for setup in setups:
        total = Usage()
        for path in sorted((paths.judge_dir(setup.label)).glob("*.jsonl")):
            for data in iter_json_lines(path):
                total = total.add(Usage.model_validate(data.get("usage") or {}))
        judged[setup.label] = {setup.alias: total}
    return run, judged


def run_and_judge_stages(config: StudyConfig, specs: dict, paths: RunPaths, manifest: Any, pool: Any, catalog: Any,
                         *, force: bool, console: Any, laps: Any = None) -> dict[str, Any]:
    """Register, run and finish the run stage and every judge stage. Returns their counts."""
    from intake_eval.judging import judge_stage
    from intake_eval.runner import compact_conversations, disk_counts, load_profiles, plan_conversations
    from intake_eval.store import compact

    settings = _begin_run_stage(config, specs, paths, manifest, force)
    setups = _begin_judge_stage(config, specs, paths, manifest, force, pool)
    profiles_list = load_profiles(paths)
    profiles = {p.profile_id: p for p in profiles_list}
    plan = plan_conversations(profiles_list, settings)
    progress = _Progress(console, len(plan), len(plan) * len(setups))
    already = _judgment_counts(paths, setups, _ok_conversation_ids(paths, settings.clinicians))
    progress.progress.update(progress.judge, completed=sum(c["done"] for c in already.values()))
    with progress:
        totals = asyncio.run(_run_and_judge(plan, settings, setups, pool, paths, catalog, profiles, progress,
                                            judge_workers=config.concurrency))
        if laps is not None:
            laps("run+judge")
        compact_conversations(paths, settings.clinicians)
        sweep = asyncio.run(judge_stage(paths, setups, concurrency=config.concurrency, catalog=catalog,
                                        on_done=lambda judgment: progress.judged(judgment.ok)))
    for path in paths.judgment_files():  # the overlapped writes, like the sweep's: latest per id, sorted
        compact(path, "conversation_id")
    if laps is not None:
        laps("judge sweep")
    counts, per_clinician = disk_counts(paths, plan)
    run_usage, judge_usage = _records_usage(paths, config, setups)
    manifest.finish_stage("run", status="done" if counts["ok"] == counts["planned"] else "incomplete",
                          counts=counts, usage=run_usage,
                          extra={"per_clinician": per_clinician, "budget_reached": totals.budget_reached})
    judge_counts = _judgment_counts(paths, setups, _ok_conversation_ids(paths, settings.clinicians))
    for setup in setups:
        done = judge_counts[setup.label]
        aborted = sweep.aborted.get(setup.label)
        manifest.finish_stage(f"judge:{setup.label}", status="done" if done["done"] == counts["ok"] else "incomplete",
                              counts=done, usage=judge_usage[setup.label],
                              extra={"aborted": aborted} if aborted else None)
    return {"run": counts, "judge": judge_counts}
