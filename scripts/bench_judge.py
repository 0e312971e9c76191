"""Benchmark: judge 540 offline conversations with offline/judge and compute metrics/*.csv.

    .venv/bin/python scripts/bench_judge.py [--work DIR] [--profiles 270]

1. Builds (once; reused from --work) an offline run folder with the offline pipeline: N profiles
   from offline/generator, then offline/screener and offline/anchored against offline/patient
   → 2·N conversations (N = 270 → 540).
2. Times the judge stage (offline/judge, per-turn mode, through the ModelPool like the CLI) and
   write_metrics separately, on a fresh copy of the folder. Target: < 20 s together.
3. Tokens per judged conversation in both modes on a realistic 12-turn transcript: the rendered
   judge prompts counted with litellm.token_counter (offline, tiktoken), the answer estimated as
   one well-formed JSON answer with one-sentence reasonings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")

# A realistic intake (the study's trauma-substance example, DeepSeek-V3-like clinician): long
# empathic clinician turns, paragraph-length patient replies, pivot to advice mid-way.
REALISTIC = [
    ("Thank you for sharing that, Daniel. It takes courage to talk about drinking. Can you tell me a bit more about "
     "how much you've been drinking on a typical day, and when you noticed it starting to increase?",
     "Most nights it's six or seven beers, more on weekends. It crept up over the last year or so. I tell myself I'll "
     "have two and then it's midnight and the fridge is empty. My wife started counting the cans, which I hate."),
    ("That sounds frustrating, and I appreciate your honesty. Have you ever tried to cut back, and what happened "
     "when you did? Some people notice shakiness, sweating or trouble settling when they stop.",
     "I tried for a week in March. By day three I was sweating and jumpy and couldn't settle at all, so I went back "
     "to it. Honestly it's the only thing that switches my head off at night."),
    ("It makes sense that you'd reach for something that helps you switch off. How is the drinking affecting your "
     "work and your relationships at home?",
     "Work is okay, I'm a contractor so nobody's watching the clock. At home it's tense. My wife and I argue about it "
     "and the kids have started staying out of my way, which kills me."),
    ("I can hear how much your family matters to you. When you think about the arguments with your wife, what tends "
     "to set them off?",
     "Usually me coming home late or her finding the bottles in the truck. Sometimes it's nothing, I just snap. I'm "
     "not as patient as I should be at home."),
    ("Thank you for being open about that. What would you like to be different about your drinking, if anything "
     "could change?",
     "I'd like to be able to have a couple and stop. Or go a few days without it and not feel like I'm crawling out "
     "of my skin. I want my kids to stop tiptoeing around me."),
    ("Those are really meaningful goals. One thing that can help is finding other ways to unwind in the evening, "
     "like exercise, a hobby, or a set routine that doesn't revolve around drinking. Is there anything like that "
     "you've enjoyed in the past?",
     "I used to do woodworking in the garage. Haven't touched it in a long time. I don't really have the energy for "
     "it anymore."),
    ("Woodworking could be a wonderful outlet. Would you be open to setting aside a couple of evenings a week for it, "
     "as an alternative to drinking on those nights?",
     "Maybe. I can try. I'd probably still want a beer while I'm doing it, to be honest."),
    ("That's an honest answer, and it's a good starting point. Another option is talking with your primary care "
     "doctor about medications that reduce cravings, such as naltrexone. Have you ever discussed your drinking with "
     "a doctor?",
     "No. I haven't been to a doctor in years. I don't love the idea of it going on my record."),
    ("That concern is understandable, and your privacy matters. Support groups such as AA or SMART Recovery are "
     "confidential and free. How would you feel about trying a meeting?",
     "I went to one meeting years ago. Lots of talking about feelings. Not really my thing, but I could look at the "
     "other one you mentioned."),
    ("It's great that you're open to exploring SMART Recovery. It's more focused on practical tools. Let's also think "
     "about a realistic first step for this week. What feels doable?",
     "Maybe no drinking on Monday and Tuesday. And I'll clear out the garage so I can actually use it."),
    ("That sounds like a solid, concrete plan. Before we finish, is there anything else you'd like to talk about or "
     "any questions you have for me?",
     "No, I think that's it. I wasn't sure what this would be like. It's been okay."),
    ("Thank you for coming in today, Daniel. You've taken an important first step. Let's schedule a follow-up in two "
     "weeks to see how the plan is going.",
     "Sounds good. Thanks, doc."),
]
REALISTIC_OPENING = ("My wife said I should come in. I've been drinking more than I should, pretty much every night, "
                     "and it's causing problems at home. I guess I want to get a handle on it before it gets worse.")


def build_run_folder(work: Path, profiles: int) -> Path:
    source = work / f"offline-{profiles}"
    if (source / "conversations").exists() and any((source / "conversations").glob("*.jsonl")):
        return source
    if source.exists():
        shutil.rmtree(source)
    from intake_eval.core.store import RunPaths
    from intake_eval.generate.stage import execute_generate
    from intake_eval.interview.plan import RunSettings
    from intake_eval.interview.stage import execute_run
    from intake_eval.stage_kinds import stage_kinds

    started = time.perf_counter()
    paths = RunPaths(source)
    execute_generate(paths, n=profiles, mode="stratified", seed=7, concurrency=64, kinds=stage_kinds())
    execute_run(paths, RunSettings(clinicians=["offline/screener", "offline/anchored"], patient="offline/patient",
                                   patient_mode="prompted", concurrency=64), kinds=stage_kinds())
    print(f"built {source} with the offline pipeline in {time.perf_counter() - started:.1f} s")
    return source


def time_judging(source: Path) -> dict[str, float]:
    from intake_eval.catalog.load import load_catalog
    from intake_eval.core.store import RunPaths
    from intake_eval.judge.stage import JudgeSetup, judge_stage
    from intake_eval.llm.pool import ModelPool
    from intake_eval.llm.registry import load_model_specs
    from intake_eval.metrics.tables import write_metrics
    from intake_eval.simulated import OfflineParticipants
    from intake_eval.stage_kinds import stage_kinds

    scratch = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    target = scratch / "run"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("judgments", "metrics", "report", "cache.sqlite*"))
    paths = RunPaths(target)
    catalog = load_catalog()
    started, cpu_started = time.perf_counter(), time.process_time()
    with ModelPool(load_model_specs(None), offline=OfflineParticipants(catalog)) as pool:
        setup = [JudgeSetup(label="offline/judge", alias="offline/judge", model=pool.get("offline/judge"))]
        result = asyncio.run(judge_stage(paths, setup, concurrency=32, catalog=catalog))
    judged = time.perf_counter()
    tables = write_metrics(paths, stage_kinds())
    done, cpu_done = time.perf_counter(), time.process_time()
    import csv

    with open(tables["clinicians"], encoding="utf-8") as handle:
        headline = [(r["clinician"], r["n"], r["mean_active_coverage"], r["median_first_treatment_planning_turn"])
                    for r in csv.DictReader(handle)]
    shutil.rmtree(scratch)
    return {"conversations": result.judged["offline/judge"] + result.judge_errors["offline/judge"],
            "judge_errors": result.judge_errors["offline/judge"], "judge_s": judged - started,
            "metrics_s": done - judged, "total_s": done - started, "total_cpu_s": cpu_done - cpu_started,
            "headline": headline}


def realistic_tokens() -> dict[str, float]:
    from intake_eval.catalog.load import load_catalog
    from intake_eval.core.records import (
        Conversation,
        ConversationTurn,
        Demographics,
        DomainDraw,
        Profile,
    )
    from intake_eval.judge.judging import conversation_prompt, turn_prompt
    from intake_eval.llm.base import ChatRequest, ModelSpec
    from intake_eval.llm.litellm_backend import import_litellm
    from intake_eval.simulated.judge import OfflineJudge

    catalog = load_catalog()

    def draw(domain: str, n: int) -> DomainDraw:
        entry = catalog.domains[domain]
        return DomainDraw(domain=domain, label=entry.label, severity="moderate",
                          symptoms=[s.text for s in entry.symptoms[:n]])

    profile = Profile(profile_id="P99999", phenotype="trauma_substance", presenting=draw("alcohol_use", 4),
                      hidden=[draw("ptsd", 5), draw("depression", 5), draw("nightmares", 3), draw("irritability", 3)],
                      demographics=Demographics(age=38, sex="male", name="Daniel"))
    convo = Conversation(conversation_id="P99999.bench", profile_id="P99999", phenotype="trauma_substance",
                         clinician="deepseek-v3", patient="gpt-4o", opening=REALISTIC_OPENING,
                         turns=[ConversationTurn(turn=i + 1, clinician=c, patient=p) for i, (c, p) in enumerate(REALISTIC)])
    litellm = import_litellm()

    def count(text: str) -> int:
        return litellm.token_counter(model="gpt-4o", messages=[{"role": "user", "content": text}])

    # Output estimate: the answer a judge gives, with one-sentence reasonings like a real judge's.
    judge = OfflineJudge(ModelSpec(alias="offline/judge", model="offline/judge"), catalog)

    async def answer(turn: int | None) -> str:
        context = {"role": "judge", "profile": profile, "conversation": convo, "turn": turn}
        return (await judge.complete(ChatRequest(messages=[], context=context))).text

    per_turn_in = sum(count(turn_prompt(convo, profile, t, catalog)) for t in range(13))
    per_turn_out = sum(count(asyncio.run(answer(t))) for t in range(13))
    whole_in = count(conversation_prompt(convo, profile, catalog))
    whole_out = count(asyncio.run(answer(None)))
    return {"per_turn_prompt": per_turn_in, "per_turn_completion": per_turn_out, "per_turn_calls": 13,
            "conversation_prompt": whole_in, "conversation_completion": whole_out, "conversation_calls": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "intake-eval-bench-judge")
    parser.add_argument("--profiles", type=int, default=270, help="profiles; conversations = 2 × profiles")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    tokens = realistic_tokens()
    print("tokens per judged conversation (realistic 12-turn transcript, 4 hidden domains; gpt-4o tokenizer):")
    for mode, prefix in (("per-turn", "per_turn"), ("conversation", "conversation")):
        prompt, completion = tokens[f"{prefix}_prompt"], tokens[f"{prefix}_completion"]
        print(f"  {mode:>12}: {tokens[f'{prefix}_calls']:>2} calls, {prompt:>6,} prompt + {completion:>5,} completion "
              f"= {prompt + completion:>6,} tokens")
    ratio = (tokens["per_turn_prompt"] + tokens["per_turn_completion"]) / (
        tokens["conversation_prompt"] + tokens["conversation_completion"])
    print(f"  per-turn costs {ratio:.1f}× the tokens of conversation mode")

    source = build_run_folder(args.work, args.profiles)
    figures = time_judging(source)
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} (other work shares them)")
    print(f"judged {figures['conversations']} conversations ({figures['judge_errors']} judge errors) in "
          f"{figures['judge_s']:.2f} s; metrics/*.csv in {figures['metrics_s']:.2f} s; "
          f"total {figures['total_s']:.2f} s wall, {figures['total_cpu_s']:.2f} s CPU (target < 20 s)")
    for clinician, n, coverage, ftp in figures["headline"]:
        print(f"  {clinician}: n={n} mean active coverage {float(coverage):.3f}, median first TP turn {ftp or '—'}")
    print(json.dumps({k: v for k, v in figures.items() if k != "headline"} | tokens))


if __name__ == "__main__":
    main()
