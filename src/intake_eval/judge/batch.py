"""Batch judging (``judge --batch``): the judge's requests go out as provider batches at the batch rate.

Two passes over the same ``judge_conversation`` the online judge uses, so prompts, parsing,
validation and repair cannot drift apart:
1. collect: every conversation still to judge is "judged" by a stand-in model that records each
   request and answers it with a placeholder label (nothing is written); the requests become JSONL
   batch files, uploaded and submitted.
2. answer: the real judging runs with a model that answers from the batch output; what the batch
   did not answer (repair requests, failed lines) goes to the provider online.
Every submitted batch is recorded in the run folder's stage log before it is awaited, so a rerun
after a crash collects it instead of submitting (and paying for) the same requests again.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intake_eval.core.errors import IntakeEvalError
from intake_eval.core.records import Conversation, Profile
from intake_eval.core.store import RunPaths, done_keys, iter_json_lines, iter_records
from intake_eval.judge.judging import judge_conversation
from intake_eval.llm.anthropic_batch import AnthropicBatchClient
from intake_eval.llm.anthropic_http import anthropic_route
from intake_eval.llm.base import ChatModel, ChatRequest, ChatResult, ModelSpec
from intake_eval.llm.batch import DEFAULT_WAIT_S, BatchClient, BatchStillRunning, NoBatchAPI, batch_route
from intake_eval.llm.cache import cache_key
from intake_eval.llm.openai_http import ProviderHTTPError

if TYPE_CHECKING:
    from intake_eval.catalog.schema import Catalog
    from intake_eval.runner.stage import StageRunner

BATCH_EVENT = "judge_batch"
MAX_BATCH_REQUESTS = 50_000  # OpenAI's caps per batch file: 50,000 requests, 200 MB
MAX_BATCH_BYTES = 190_000_000


@dataclass(frozen=True)
class BatchSettings:
    poll_s: float = 30.0
    wait_s: float = DEFAULT_WAIT_S  # polling one batch stops after this long (the batch stays submitted)
    max_requests: int = MAX_BATCH_REQUESTS
    max_bytes: int = MAX_BATCH_BYTES
    on_progress: Callable[[str], None] | None = None


def batch_client(spec: ModelSpec) -> BatchClient | None:
    """The batch API serving this judge: Anthropic's Message Batches for Claude, the OpenAI batch
    protocol for the providers (and servers) that speak it; None when there is none."""
    claude = anthropic_route(spec)
    if claude is not None:
        return AnthropicBatchClient(spec, claude)
    route = batch_route(spec)
    return BatchClient(spec, route) if route is not None else None


def check_batchable(specs: Mapping[str, ModelSpec]) -> None:
    """Before any work: every judge must sit behind a server that takes batches."""
    for alias, spec in specs.items():
        if batch_client(spec) is None:
            raise IntakeEvalError(
                f"--batch: judge '{alias}' ({spec.model}) is not served by a batch API (Anthropic, OpenAI, "
                "Together, Groq, Gemini, or an api_base that serves /files and /batches); judge it without --batch")


class _Recorder:
    """A stand-in judge: records each first request and answers it with a valid "nothing asked" label,
    so judge_conversation goes on to the next turn (the labels are thrown away)."""

    def __init__(self, spec: ModelSpec, record: Callable[[ChatRequest], None]):
        self.spec = spec
        self.record = record

    async def complete(self, request: ChatRequest) -> ChatResult:
        if len(request.messages) == 1:  # a repair request depends on an answer: never batched
            self.record(request)
        context = request.context or {}
        profile, conversation = context["profile"], context["conversation"]
        hidden = profile.hidden_domains

        def label(number: int) -> dict[str, Any]:
            return {"turn": number, "reasoning": "", "question_type": "other", "patient_faithful": True,
                    "domains": [{"domain": d, "reasoning": "", "asked_about": False, "disclosed": False} for d in hidden]}

        if context.get("turn") is not None:
            answer: dict[str, Any] = label(int(context["turn"]))
        else:
            answer = {"turns": [label(n) for n in [0] + sorted(t.turn for t in conversation.turns)]}
        return ChatResult(text=json.dumps(answer))


class BatchAnswers:
    """The judge model during the answer pass: batch output first, the provider online otherwise."""

    def __init__(self, online: ChatModel, client: BatchClient, answers: dict[str, dict[str, Any]]):
        self.spec = online.spec
        self.online = online
        self.client = client
        self.answers = answers
        self.from_batch = 0

    async def complete(self, request: ChatRequest) -> ChatResult:
        body = self.answers.get(cache_key(self.spec, request))
        if body is None:
            return await self.online.complete(request)
        self.from_batch += 1
        return self.client.result(request, body)


def _todo(paths: RunPaths, label: str, limit: int | None,
          profiles: dict[str, Profile]) -> Iterator[tuple[Conversation, Profile, int]]:
    """The conversations judge_stage will judge for this label, with the attempt number it will use."""
    ids = sorted(cid for path in paths.conversation_files() for cid in done_keys(path, "conversation_id"))
    wanted = set(ids[:limit] if limit is not None else ids)
    done: set[str] = set()
    attempts: dict[str, int] = {}
    judge_dir = paths.judge_dir(label)
    for path in sorted(judge_dir.glob("*.jsonl")) if judge_dir.exists() else []:
        done |= done_keys(path, "conversation_id")
        for data in iter_json_lines(path):
            attempts[str(data.get("conversation_id"))] = attempts.get(str(data.get("conversation_id")), 0) + 1
    for path in sorted(paths.conversation_files()):
        for conversation in iter_records(path, Conversation):
            cid = conversation.conversation_id
            if conversation.ok and cid in wanted and cid not in done and conversation.profile_id in profiles:
                wanted.discard(cid)
                yield conversation, profiles[conversation.profile_id], attempts.get(cid, 0)


async def _collect(paths: RunPaths, setup: Any, limit: int | None, catalog: "Catalog | None",
                   client: BatchClient, out: Path) -> set[str]:
    """Write one batch line per distinct first request; return their ids (the cache keys)."""
    spec = setup.model.spec
    keys: set[str] = set()
    profiles = {p.profile_id: p for p in iter_records(paths.profiles, Profile)}
    with open(out, "w", encoding="utf-8") as handle:
        def record(request: ChatRequest) -> None:
            key = cache_key(spec, request)
            if key not in keys:
                keys.add(key)
                handle.write(json.dumps(client.line(key, request)) + "\n")

        recorder = _Recorder(spec, record)
        for conversation, profile, attempt in _todo(paths, setup.label, limit, profiles):
            await judge_conversation(conversation, profile, recorder, setup.mode, judge=setup.label,
                                     catalog=catalog, attempt=attempt)
    return keys


def _chunks(source: Path, wanted: set[str], folder: Path, settings: BatchSettings) -> list[tuple[Path, int]]:
    """The wanted lines of ``source`` in files within the provider's per-batch caps: (path, lines)."""
    files: list[tuple[Path, int]] = []
    handle = None
    size = 0
    with open(source, "rb") as lines:
        for raw in lines:
            if json.loads(raw)["custom_id"] not in wanted:
                continue
            if handle is None or files[-1][1] >= settings.max_requests or size + len(raw) > settings.max_bytes:
                if handle is not None:
                    handle.close()
                files.append((folder / f"batch-{len(files)}.jsonl", 0))
                handle = open(files[-1][0], "wb")
                size = 0
            handle.write(raw)
            size += len(raw)
            files[-1] = (files[-1][0], files[-1][1] + 1)
    if handle is not None:
        handle.close()
    return files


def logged_batches(paths: RunPaths, stage: str, model: str) -> list[str]:
    """Batch ids submitted for this judge stage and model, oldest first."""
    return [str(entry["batch_id"]) for entry in iter_json_lines(paths.stage_log)
            if entry.get("event") == BATCH_EVENT and entry.get("stage") == stage and entry.get("model") == model]


def _progress_reporter(label: str, settings: BatchSettings) -> Callable[[dict[str, Any]], None]:
    last: dict[str, str] = {}

    def report(batch: dict[str, Any]) -> None:
        counts = batch.get("request_counts") or {}
        if not counts and isinstance(batch.get("progress"), (int, float)):  # Together: a percentage, no counts
            done = f"{batch['progress']:.0f}% done"
        else:
            done = f"{counts.get('completed', 0)}/{counts.get('total', '?')} done, {counts.get('failed', 0)} failed"
        line = f"judge {label}: batch {batch.get('id')} {batch.get('status')} {done}"
        if settings.on_progress is not None and last.get(str(batch.get("id"))) != line:
            last[str(batch.get("id"))] = line
            settings.on_progress(line)

    return report


async def _answers_for(runner: "StageRunner", setup: Any, *, limit: int | None,
                       catalog: "Catalog | None", settings: BatchSettings) -> BatchAnswers:
    spec = setup.model.spec
    client = batch_client(spec)
    if client is None:
        raise IntakeEvalError(f"--batch: judge '{setup.alias}' has no batch API")
    stage = f"judge:{setup.label}"
    answers: dict[str, dict[str, Any]] = {}
    report = _progress_reporter(setup.label, settings)
    with tempfile.TemporaryDirectory(prefix="intake-eval-batch-") as folder:
        source = Path(folder) / "requests.jsonl"
        keys = await _collect(runner.paths, setup, limit, catalog, client, source)
        async with client:
            for batch_id in logged_batches(runner.paths, stage, spec.model) if keys else []:
                if keys <= answers.keys():
                    break
                batch = await client.wait(batch_id, settings.poll_s, report, settings.wait_s)
                for line in await client.results(batch):
                    if line.body is not None and line.custom_id in keys:
                        answers[line.custom_id] = line.body
            submitted = []
            for path, count in _chunks(source, keys - answers.keys(), Path(folder), settings):
                batch_id, file_id = await client.submit(path)
                # logged before waiting: a crash from here on is resumed by collecting, not resubmitting
                runner.log({"event": BATCH_EVENT, "stage": stage, "model": spec.model, "batch_id": batch_id,
                            "input_file_id": file_id, "requests": count})
                submitted.append(batch_id)
            for batch_id in submitted:
                batch = await client.wait(batch_id, settings.poll_s, report, settings.wait_s)
                for line in await client.results(batch):
                    if line.body is not None and line.custom_id in keys:
                        answers[line.custom_id] = line.body
    return BatchAnswers(setup.model, client, answers)


async def batch_judges(runner: "StageRunner", setups: Sequence[Any], *, limit: int | None,
                       catalog: "Catalog | None", settings: BatchSettings) -> list[Any]:
    """Submit (or pick up) each judge's batches and wait for them; the JudgeSetups to judge with
    (judge.stage imports this module, so they are not named here)."""
    async def one(setup: Any) -> Any:
        try:
            answers = await _answers_for(runner, setup, limit=limit, catalog=catalog, settings=settings)
        except (NoBatchAPI, BatchStillRunning) as error:
            raise IntakeEvalError(f"judge {setup.label} --batch: {error}") from None
        except ProviderHTTPError as error:
            client = batch_client(setup.model.spec)
            raise IntakeEvalError(f"judge {setup.label} --batch: the batch API at {client.base_url if client else '?'} "
                                  f"failed ({error}); rerun the same command to resume") from None
        return replace(setup, model=answers)

    # every judge's batches are in flight at once: the providers work on them in parallel
    return list(await asyncio.gather(*(one(setup) for setup in setups)))
