"""Batch files for cluster engines: ``judge --batch-out FILE`` and ``judge --batch-in FILE``.

``--batch-out`` writes the judge's pending requests in the OpenAI batch input format, one JSON line
``{custom_id, method: "POST", url: "/v1/chat/completions", body}`` per distinct first request (the body the
online call would POST; ``custom_id`` is the request's cache key). ``--batch-in`` reads an engine's output
file in the OpenAI batch output format, one line ``{id, custom_id, response: {status_code, request_id,
body}, error}`` — the shape vLLM's ``vllm run-batch`` writes (``BatchRequestOutput`` and
``BatchResponseData`` in vllm/entrypoints/openai/protocol.py, written by vllm/entrypoints/openai/run_batch.py;
a failed request has a non-200 ``status_code`` or an ``error``) and Ray Data LLM's OpenAI-compatible output.

Answers go through the same ``judge_conversation`` as online and provider-batch judging (judge/batch.py):
the collect pass finds each conversation's first requests, and the answer pass validates them and sends
repair requests to the alias online. A conversation is judged only when every one of its first requests
has a 200 line in the file; the others stay pending (no record), counted as missing or errored lines, for
a later file. The same file read again adds nothing: judged conversations are not asked again, and each
answer's ledger call id is the engine's line id. Answers are priced at the alias's prices (times its
``batch_cost_factor`` when the models file sets one: a cluster has no provider's batch discount) and
recorded in the call ledger as billed batch answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Profile
from intake_eval.core.store import iter_records
from intake_eval.judge.batch import BatchAnswers, _Recorder, _todo
from intake_eval.judge.judging import judge_conversation
from intake_eval.llm.base import ChatRequest, ChatResult, ModelSpec
from intake_eval.llm.batch import BatchClient, batch_route, read_output
from intake_eval.llm.cache import cache_key
from intake_eval.llm.litellm_backend import normalise

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.runner.stage import StageRunner


@dataclass(frozen=True)
class BatchFiles:
    """``out``: write the pending requests there; ``into``: judge from this engine output file."""

    out: Path | None = None
    into: Path | None = None
    on_progress: Callable[[str], None] | None = None


@dataclass
class FileCounts:
    """What one judge took from an output file."""

    requests: int = 0  # distinct first requests its pending conversations need
    answered: int = 0  # of those, with a 200 line in the file
    errored: int = 0  # with a line that failed (non-200 status or an error)
    missing: int = 0  # with no line at all
    judged_now: int = 0  # conversations whose every first request is answered
    pending: int = 0  # conversations left for a later file
    errors: dict[str, int] = field(default_factory=dict)  # error text → lines


class FileClient(BatchClient):
    """The OpenAI batch protocol's lines for an alias, priced at the alias's own prices."""

    def result(self, request: ChatRequest, body: dict[str, Any]) -> ChatResult:
        result = normalise(self.spec, request, self.route.fix_usage(body), 0.0)
        factor = 1.0 if self.spec.batch_cost_factor is None else self.spec.batch_cost_factor
        usage = result.usage.model_copy(update={"cost_usd": result.usage.cost_usd * factor})
        return result.model_copy(update={"usage": usage})


def file_client(alias: str, spec: ModelSpec) -> FileClient:
    route = batch_route(spec)
    if route is None or spec.is_offline:
        raise IntakeEvalError(f"--batch-out/--batch-in: judge '{alias}' ({spec.model}) has no OpenAI-compatible "
                              "route (give it an api_base, as for a vLLM server); judge it without a batch file")
    return FileClient(spec, route)


async def _requests_by_conversation(runner: "StageRunner", setup: Any, limit: int | None,
                                    catalog: "Catalog | None") -> dict[str, dict[str, ChatRequest]]:
    """Each pending conversation's first requests (cache key → request), from the collect pass."""
    spec = setup.model.spec
    profiles = {p.profile_id: p for p in iter_records(runner.paths.profiles, Profile)}
    needed: dict[str, dict[str, ChatRequest]] = {}
    for conversation, profile, attempt in _todo(runner.paths, setup.label, limit, profiles):
        mine = needed.setdefault(conversation.conversation_id, {})

        def record(request: ChatRequest, mine: dict[str, ChatRequest] = mine) -> None:
            mine.setdefault(cache_key(spec, request), request)

        recorder = _Recorder(spec, record)
        await judge_conversation(conversation, profile, recorder, setup.mode, judge=setup.label,
                                 catalog=catalog, attempt=attempt)
    return needed


async def write_requests(runner: "StageRunner", setups: Sequence[Any], *, limit: int | None,
                         catalog: "Catalog | None", out: Path) -> dict[str, int]:
    """Write every judge's pending first requests to ``out`` (written whole, then moved into place);
    returns the number of lines per judge label."""
    counts: dict[str, int] = {}
    clients = {setup.label: file_client(setup.alias, setup.model.spec) for setup in setups}  # before any file
    partial = out.with_name(out.name + ".partial")
    try:
        with open(partial, "w", encoding="utf-8") as handle:
            for setup in setups:
                client = clients[setup.label]
                written: set[str] = set()
                for requests in (await _requests_by_conversation(runner, setup, limit, catalog)).values():
                    for key, request in requests.items():
                        if key not in written:
                            written.add(key)
                            handle.write(json.dumps(client.line(key, request)) + "\n")
                counts[setup.label] = len(written)
    except OSError as error:
        raise IntakeEvalError(f"--batch-out {out}: cannot write it ({error.strerror or error})") from None
    partial.replace(out)
    return counts


def read_answers(path: Path) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The output file's answers (custom_id → chat completion, its ``id`` set to the line's id) and its
    failed lines (custom_id → error text). A torn line is left out (its request stays pending)."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise IntakeEvalError(f"--batch-in {path}: cannot read it ({error.strerror or error})") from None
    ids = {}
    for text in raw.decode("utf-8", errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("id"):
            ids[str(line.get("custom_id", ""))] = str(line["id"])
    answers: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for line in read_output(raw):
        if line.body is not None:
            answers[line.custom_id] = {**line.body, "id": ids.get(line.custom_id) or line.body.get("id")}
            failed.pop(line.custom_id, None)
        elif line.custom_id not in answers:
            failed[line.custom_id] = line.error or "failed"
    return answers, failed


async def judges_from_file(runner: "StageRunner", setups: Sequence[Any], *, limit: int | None,
                           catalog: "Catalog | None", path: Path) -> tuple[list[Any], dict[str, FileCounts]]:
    """The JudgeSetups to judge with: each answers from the file and judges only the conversations the
    file answers whole; with what each judge took from the file."""
    answers, failed = read_answers(path)
    judges, counts = [], {}
    for setup in setups:
        client = file_client(setup.alias, setup.model.spec)
        needed = await _requests_by_conversation(runner, setup, limit, catalog)
        tally = counts[setup.label] = FileCounts()
        keys = {key for requests in needed.values() for key in requests}
        tally.requests = len(keys)
        tally.answered = sum(1 for key in keys if key in answers)
        tally.errored = sum(1 for key in keys if key not in answers and key in failed)
        tally.missing = tally.requests - tally.answered - tally.errored
        for key in keys:
            if key not in answers and key in failed:
                tally.errors[failed[key]] = tally.errors.get(failed[key], 0) + 1
        ready = frozenset(cid for cid, requests in needed.items() if requests.keys() <= answers.keys())
        tally.judged_now, tally.pending = len(ready), len(needed) - len(ready)
        model = BatchAnswers(setup.model, client, {key: answers[key] for key in keys if key in answers},
                             runner.pool.ledger)
        judges.append(replace(setup, model=model, only=ready))
    return judges, counts


def counts_line(label: str, tally: FileCounts, path: Path) -> str:
    """One line saying what a judge took from an output file."""
    line = (f"judge {label}: {path}: {tally.answered}/{tally.requests} requests answered, {tally.errored} failed "
            f"lines, {tally.missing} missing; {tally.judged_now} conversations judged from it, {tally.pending} left "
            "pending")
    if tally.errors:
        worst = max(tally.errors.items(), key=lambda item: item[1])
        line += f" (e.g. {worst[1]}× {worst[0][:120]})"
    return line
