"""Could it ask? Counterfactual forks: ids and fork points, the capacity gap on a hand-worked case, and a
fork run against a loopback server (shared turns cost no call, the nudge reaches the clinician verbatim,
a rerun resumes), and a study that forks, judges and reports them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from intake_eval.cli import app
from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.prompts import render_prompt
from intake_eval.core.records import Conversation, Judgment, TurnJudgment, arm_condition
from intake_eval.core.store import RunPaths, iter_records
from intake_eval.forks.plan import fork_turn, parse_fork_at
from intake_eval.interview.conversation import make_fork_id
from intake_eval.metrics.forks import capacity_rows
from tests.helpers.fakeserver import Reply
from tests.commands.test_run_loopback import setup_run, study_server


def judgment(types: list[str]) -> Judgment:
    turns = [TurnJudgment(turn=i, question_type=t, patient_faithful=True, domains={}) for i, t in enumerate(types)]
    return Judgment(conversation_id="c", judge="j", clinician="doc", profile_id="P1", phenotype="x", turns=turns)


def test_fork_ids_points_and_arms():
    assert make_fork_id("P00001.doc.minimal.prompted.t0", "closure", "review") == \
        "P00001.doc.minimal.prompted.t0.fork-closure-review"
    assert parse_fork_at("closure", 12) == "closure" and parse_fork_at("5", 12) == "t5" and parse_fork_at("t12", 12) == "t12"
    for bad in ("13", "0", "later", "t-1"):
        with pytest.raises(IntakeEvalError, match="--fork-at"):
            parse_fork_at(bad, 12)
    # turn 0 is the opening; turns 1..5: probe, probe, plan, probe, plan → closure at 5, first planning at 3
    labels = judgment(["other", "open", "closed_hypothesis", "treatment_planning", "clarifying", "treatment_planning"])
    assert fork_turn("closure", labels) == 5 and fork_turn("first-planning", labels) == 3
    assert fork_turn("t2", None) == 2
    assert fork_turn("closure", judgment(["other", "open", "treatment_planning", "open"])) is None  # never closed
    assert arm_condition("minimal", {"at": "closure", "nudge": "review"}) == "minimal+review@closure"
    assert arm_condition("minimal", None) == "minimal"


def row(cid: str, profile: str, rate: float | None, caught: str, missed: str, condition: str = "minimal") -> dict:
    return {"conversation_id": cid, "judge": "j", "clinician": "doc", "condition": condition, "patient_mode": "prompted",
            "profile_id": profile, "phenotype": "ph", "status": "ok" if rate is not None else "judge_error",
            "active_coverage_rate": "" if rate is None else str(rate), "caught_domains": caught, "missed_domains": missed}


def test_capacity_gap_on_a_hand_worked_case():
    # Three intakes on three profiles (two hidden domains each):
    #   A: caught a, missed b → forked, the fork catches a and b   → 0.5 → 1.0 (gap +0.5)
    #   B: caught nothing     → never closed, no fork              → 0.0 → 0.0 (gap 0)
    #   C: caught a           → forked, but the fork's judgment failed → left out of both sides
    rows = [row("A", "P1", 0.5, "a", "b"), row("B", "P2", 0.0, "", "a;b"), row("C", "P3", 0.5, "a", "b"),
            row("A.f", "P1", 1.0, "a;b", "", "minimal+review@closure"),
            row("C.f", "P3", None, "", "", "minimal+review@closure")]
    links = {"A.f": ("A", "+review@closure"), "C.f": ("C", "+review@closure")}
    out = capacity_rows(rows, links)
    clinician = next(r for r in out if r["scope"] == "clinician")
    assert clinician["fork_arm"] == "minimal+review@closure" and clinician["n_intakes"] == 2
    assert clinician["n_forked"] == 1 and clinician["n_fork_missing"] == 1
    assert clinician["spontaneous"] == pytest.approx(0.25) and clinician["nudged"] == pytest.approx(0.5)
    assert clinician["capacity_gap"] == pytest.approx(0.25)
    assert clinician["gap_ci_low"] <= 0.25 <= clinician["gap_ci_high"]
    domains = {r["key"]: r for r in out if r["scope"] == "domain"}
    assert domains["b"]["spontaneous"] == 0 and domains["b"]["nudged"] == pytest.approx(0.5)  # A's fork caught b
    assert domains["a"]["capacity_gap"] == pytest.approx(0.0)


def test_a_fork_reuses_the_parent_turns_and_gives_the_nudge_verbatim(tmp_path):
    nudge = render_prompt("nudge_review")
    with study_server() as server:
        plain = server.responder

        def respond(body, index):  # a clinician that takes the supervisor's hint
            if body["model"] == "doc" and any(m["content"] == nudge for m in body["messages"]):
                return Reply(content="Before we plan anything: how much alcohol do you drink in a week?")
            return plain(body, index)

        server.responder = respond
        run_dir, models = setup_run(tmp_path, server)
        base = ["run", "--clinician", "doc", "--patient", "pat", "--turns", "4", "--limit", "1", "--models", str(models),
                "--run-dir", str(run_dir)]
        assert CliRunner().invoke(app, base).exit_code == 0
        parent_requests = list(server.requests)
        forked = CliRunner().invoke(app, [*base, "--fork-at", "3", "--nudge", "review"])
        assert forked.exit_code == 0, forked.output
        fork_requests = server.requests[len(parent_requests):]
        again = CliRunner().invoke(app, [*base, "--fork-at", "3", "--nudge", "review"])
        assert again.exit_code == 0 and len(server.requests) == len(parent_requests) + len(fork_requests)  # resumed
    # the fork asks turns 3 and 4 only: two clinician calls and two patient replies, no opening, no turn 1-2
    doc = [body["messages"] for body in fork_requests if body["model"] == "doc"]
    assert len(doc) == 2 and len([b for b in fork_requests if b["model"] == "pat"]) == 2
    assert doc[0][-1] == {"role": "user", "content": nudge}  # verbatim, just before turn 3
    parent_turn3 = [body["messages"] for body in parent_requests if body["model"] == "doc"][2]
    assert doc[0][:-1] == parent_turn3  # everything before the nudge is the parent's request, byte for byte
    conversations = {c.conversation_id: c for c in iter_records(RunPaths(run_dir).conversations("doc"), Conversation)}
    parent = next(c for c in conversations.values() if c.fork is None)
    fork = conversations[make_fork_id(parent.conversation_id, "t3", "review")]
    assert fork.fork == {"parent": parent.conversation_id, "at": "t3", "turn": 3, "nudge": "review"}
    assert fork.opening == parent.opening and fork.turns[:2] == parent.turns[:2]
    assert fork.turns[2].nudge == nudge and all(t.nudge is None for t in fork.turns[:2]) and len(fork.turns) == 4
    assert fork.usage["clinician"].calls == 2 and "formulation" not in fork.usage


def test_a_study_forks_at_closure_judges_the_forks_and_reports_the_gap(tmp_path):
    config = tmp_path / "study.yaml"
    config.write_text("name: forked\nseed: 3\nprofiles: {n: 4}\npatient: {model: offline/patient}\n"
                      "clinicians: [offline/anchored]\njudges: [offline/judge]\nturns: 8\nconcurrency: 4\n"
                      "forks: [{at: closure, nudge: review}]\n")
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    paths = RunPaths(run_dir)
    manifest = json.loads(paths.manifest.read_text())
    stage = manifest["stages"]["fork:closure:review"]
    assert stage["status"] == "done" and stage["counts"]["ok"] == stage["counts"]["planned"] == 4  # anchored closes
    assert manifest["stages"]["run"]["counts"]["ok"] == 4  # the intakes alone
    judged = list(iter_records(paths.judgments("offline/judge", "offline/anchored"), Judgment))
    assert len(judged) == 8 and {j.condition for j in judged} == {"minimal", "minimal+review@closure"}
    capacity = paths.metrics("capacity_gap").read_text()
    assert "minimal+review@closure,clinician,offline/anchored,4,4,0," in capacity
    assert "Could it ask? Capacity gap" in paths.report_index.read_text()
    rerun = CliRunner().invoke(app, ["study", str(config), "--run-dir", str(run_dir)])
    assert rerun.exit_code == 0 and "0 model calls this time" in rerun.output.replace("\n", " ")


def test_the_anchored_clinician_screens_once_a_supervisor_reminds_it():
    from intake_eval.catalog.classifier import classify
    from intake_eval.catalog.load import load_catalog
    from intake_eval.simulated.anchored import anchored_turn
    from intake_eval.simulated.phrasing import supervisor_note_turn

    note = render_prompt("nudge_review")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "I feel low."},
                {"role": "assistant", "content": "Tell me more."}, {"role": "user", "content": "It is hard."},
                {"role": "user", "content": note}]
    assert supervisor_note_turn(messages) == 2
    assert supervisor_note_turn(messages[:-1]) is None
    catalog = load_catalog()
    pairs = [("Tell me more.", "It is hard.")] * 6
    context = {"turn": 7, "max_turns": 12, "conversation_id": "P1.x", "trial": 0}
    spontaneous = anchored_turn(catalog, context, "depression", pairs)
    nudged = anchored_turn(catalog, context, "depression", pairs, noted_at=7)
    assert classify(spontaneous).domains == []  # advice: it asks about nothing
    assert len(classify(nudged).domains) >= 2  # a screening bundle
