"""`intake-eval show CONVERSATION_ID`: a transcript in the terminal, with its judges' labels and the
clinician's system prompt (``--patient-prompt``: the patient's too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from intake_eval.commands.common import DEFAULT_RUN_DIR, RunDirOption


def show(
    conversation_id: Annotated[str, typer.Argument(
        help="Conversation id, e.g. P00001.offline__screener.minimal.prompted.t0 (see conversations/*.jsonl).",
        show_default=False)],
    reasoning: Annotated[bool, typer.Option(
        "--reasoning", help="Also print the clinician's hidden reasoning (reasoning models).")] = False,
    patient_prompt: Annotated[bool, typer.Option(
        "--patient-prompt", help="Also print the patient's system prompt for this conversation, rendered from the "
                                 "run folder's copy of the templates (tracked mode: at the opening and at the end).")]
    = False,
    run_dir: RunDirOption = DEFAULT_RUN_DIR,
) -> None:
    """Print one conversation: the clinician's system prompt (as the run folder keeps it), profile
    summary, the patient's opening, every turn with the tracker's unlock decisions (tracked mode), and
    each judge's per-turn labels once `judge` has run."""
    from rich.console import Console

    from intake_eval.core.store import RunPaths

    paths = RunPaths(Path(run_dir))
    conversation = find_conversation(paths, conversation_id)
    judgments = find_judgments(paths, conversation)
    profile = find_profile(paths, conversation.profile_id)
    console = Console()
    render_prompts(console, paths, conversation, profile, patient=patient_prompt)
    render_transcript(console, conversation, judgments, profile, show_reasoning=reasoning)


def _manifest_data(paths, console) -> dict:
    """The manifest's data; a malformed one costs only the prompts (said), never the transcript."""
    from rich.markup import escape

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.manifest import parse_manifest

    if not paths.manifest.is_file():
        return {}
    try:
        return parse_manifest(paths.manifest, paths.manifest.read_text(encoding="utf-8", errors="replace"))
    except IntakeEvalError as exc:
        console.print(f"[yellow]warning: {escape(str(exc))}[/]")
        return {}


def render_prompts(console, paths, conversation, profile, *, patient: bool) -> None:
    """The clinician's system prompt from the run folder's snapshot (and, asked for, the patient's,
    rendered again from the snapshotted templates: rendering is deterministic given text and profile)."""
    from functools import partial

    from rich.markup import escape

    from intake_eval.core.prompts import render_prompt, render_source
    from intake_eval.runner.prompt_snapshot import rendered_prompt, stage_template_sources

    manifest = _manifest_data(paths, console)
    label = f"clinician.{conversation.condition}"
    clinician = rendered_prompt(paths, manifest, label)
    if clinician is None or clinician.text is None:
        why = clinician.problem if clinician is not None else (
            f"this run folder keeps no text for {label} (made before intake-eval kept prompt texts)")
        console.print(f"[yellow]clinician system prompt: {escape(why)}[/]")
    else:
        _print_prompt(console, f"clinician system prompt ({clinician.entry.get('file')})", clinician.text)
        if clinician.problem:
            console.print(f"[yellow]{escape(clinician.problem)}[/]")
    if not patient:
        return
    if profile is None:
        console.print(f"[yellow]patient system prompt: profile {escape(conversation.profile_id)} is not in "
                      f"{escape(str(paths.profiles))}[/]")
        return
    from intake_eval.forks.stage import fork_stage_name
    from intake_eval.interview.prompt_texts import conversation_patient_prompts
    from intake_eval.interview.stage import RUN_STAGE

    fork = conversation.fork  # a fork's patient was played by its fork stage, with that stage's templates
    stage = fork_stage_name(str(fork.get("at")), str(fork.get("nudge"))) if fork else RUN_STAGE

    kept = stage_template_sources(paths, manifest, stage)
    render: Callable[..., str]
    if kept is not None:
        render, source = partial(render_source, kept), "the run folder's templates"
    else:
        render, source = render_prompt, "the templates installed now (this run folder keeps none; they may differ)"
    for when, text in conversation_patient_prompts(conversation, profile, render):
        _print_prompt(console, f"patient system prompt, {when}; from {source}", text)


def _print_prompt(console, title: str, text: str) -> None:
    """A prompt verbatim (no wrapping, markup or highlighting), so it can be copied exactly."""
    from rich.markup import escape

    console.rule(f"[bold]{escape(title)}[/]", align="left")
    console.print(text, markup=False, highlight=False, soft_wrap=True, emoji=False)
    console.rule()


def find_conversation(paths, conversation_id: str):
    """The id names its file: {profile}.{file-safe clinician}.{condition}.{mode}.t{trial}."""
    import difflib

    from intake_eval.core.errors import IntakeEvalError
    from intake_eval.core.records import Conversation
    from intake_eval.core.store import latest_by_key

    parts = conversation_id.split(".")
    candidates = []
    if len(parts) >= 5:
        candidates.append(paths.conversations_dir / f"{'.'.join(parts[1:-3])}.jsonl")
    candidates += [p for p in paths.conversation_files() if p not in candidates]
    seen: list[str] = []
    for path in candidates:
        if not path.exists():
            continue
        records = latest_by_key(path, Conversation, "conversation_id")
        if conversation_id in records:
            return records[conversation_id]
        seen.extend(records)
    if not seen:
        raise IntakeEvalError(f"{paths.conversations_dir}: no conversations yet; run `intake-eval run` first")
    close = difflib.get_close_matches(conversation_id, seen, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; for example {sorted(seen)[0]}"
    raise IntakeEvalError(f"no conversation {conversation_id!r} in {paths.conversations_dir}{hint}")


def find_judgments(paths, conversation) -> dict:
    from intake_eval.core.records import Judgment
    from intake_eval.core.store import iter_records

    found: dict[str, Judgment] = {}
    if not paths.judgments_dir.exists():
        return found
    for judge_dir in sorted(p for p in paths.judgments_dir.iterdir() if p.is_dir()):
        path = judge_dir / paths.conversations(conversation.clinician).name
        for record in iter_records(path, Judgment):
            if record.conversation_id == conversation.conversation_id:
                found[record.judge] = record  # the latest line wins
    return found


def find_profile(paths, profile_id: str):
    from intake_eval.core.records import Profile
    from intake_eval.core.store import iter_records

    for profile in iter_records(paths.profiles, Profile):
        if profile.profile_id == profile_id:
            return profile
    return None


def _judge_lines(judgments: dict, turn: int) -> list[str]:
    from rich.markup import escape

    lines = []
    for judge, judgment in sorted(judgments.items()):
        label = next((t for t in judgment.turns if t.turn == turn), None)
        if label is None:
            continue
        asked = [d for d, v in sorted(label.domains.items()) if v.asked_about]
        disclosed = [d for d, v in sorted(label.domains.items()) if v.disclosed]
        bleed = [d for d in disclosed if d not in asked]
        text = f"[magenta]{escape(judge)}[/]: {label.question_type}"
        text += f" · asked {', '.join(asked) or '-'} · disclosed {', '.join(disclosed) or '-'}"
        if bleed:
            text += f" · [yellow]bleed {', '.join(bleed)}[/]"
        if not label.patient_faithful:
            text += " · [red]patient unfaithful[/]"
        lines.append(text)
    return lines


def render_transcript(console, conversation, judgments: dict, profile, *, show_reasoning: bool = False) -> None:
    from rich.markup import escape
    from rich.panel import Panel

    c = conversation
    status = "[green]ok[/]" if c.ok else f"[red]{escape(c.status)}[/]"
    header = [
        f"[bold]{escape(c.conversation_id)}[/]  {status}  termination: {c.termination}",
        f"clinician {escape(c.clinician)} ({escape(c.clinician_model)}) · condition {c.condition} · trial {c.trial}",
        f"patient {escape(c.patient)} ({escape(c.patient_model)}) · mode {c.patient_mode} · phenotype {escape(c.phenotype)}",
    ]
    if profile is not None:
        hidden = ", ".join(f"{d.domain} ({d.severity})" for d in profile.hidden)
        header.append(f"presenting {profile.presenting.domain} ({profile.presenting.severity}) · hidden {hidden}")
    if c.error:
        header.append(f"[red]error:[/] {escape(c.error)}")
    if c.truncated:
        cut = ", ".join(f"{role} {count}" for role, count in c.truncated.items())
        header.append(f"[yellow]answers cut at the token cap:[/] {cut}")
    for judge, judgment in sorted(judgments.items()):
        if not judgment.ok:
            header.append(f"[yellow]judge {escape(judge)}: {escape(judgment.status)}[/]")
    console.print(Panel("\n".join(header), title="conversation", expand=True))
    console.print(f"[bold cyan]Patient (opening)[/]: {escape(c.opening)}")
    for line in _judge_lines(judgments, 0):
        console.print(f"    {line}")
    for turn in c.turns:
        console.print()
        console.print(f"[bold]Turn {turn.turn}[/]")
        if show_reasoning and turn.clinician_reasoning:
            console.print(f"  [dim]reasoning: {escape(turn.clinician_reasoning)}[/]")
        cut = " [yellow](cut at the token cap)[/]"
        console.print(f"  [bold green]Clinician[/]: {escape(turn.clinician)}" + (cut if "clinician" in turn.truncated else ""))
        if turn.tracker is not None:
            t = turn.tracker
            unlocked = f" · [bold yellow]unlocked {', '.join(t.newly_unlocked)}[/]" if t.newly_unlocked else ""
            repaired = " · repaired" if t.repaired else ""
            console.print(f"  [dim]tracker ({escape(t.source)}): {t.question_type} · asks {', '.join(t.asked_domains) or '-'}"
                          f"{repaired}[/]{unlocked}")
        console.print(f"  [bold cyan]Patient[/]: {escape(turn.patient)}" + (cut if "patient" in turn.truncated else ""))
        for line in _judge_lines(judgments, turn.turn):
            console.print(f"    {line}")
    if not judgments:
        console.print("\n[dim]no judgments yet for this conversation (run `intake-eval judge`)[/]")
    _render_formulation(console, c.formulation)


def _render_formulation(console, formulation: dict | None) -> None:
    """The post-intake case formulation (not a turn; the patient never saw it)."""
    from rich.markup import escape

    if not formulation:
        return
    console.print()
    if formulation.get("status") != "ok":
        console.print(f"[bold]Formulation[/]: [red]{escape(str(formulation.get('status')))}[/] "
                      f"{escape(str(formulation.get('error', '')))}")
        return
    body = formulation.get("formulation", {})
    principal = body.get("principal_diagnosis") or {}
    console.print("[bold]Formulation[/] (after the last turn; not shown to the patient)")
    console.print(f"  chief complaint: {escape(str(body.get('chief_complaint', '')))}")
    console.print(f"  principal: {escape(str(principal.get('name', '')))} {escape(str(principal.get('icd10', '')))}")
    for item in body.get("differential", []):
        console.print(f"  differential: {escape(str(item.get('name', '')))} {escape(str(item.get('icd10', '')))}")
    console.print(f"  risk: {escape(str(body.get('risk_level', '')))} — {escape(str(body.get('risk_evidence', '')))}")

