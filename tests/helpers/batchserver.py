"""A loopback server speaking the OpenAI batch protocol on top of tests/helpers/fakeserver.py's chat endpoint.

POST /v1/files (multipart, purpose=batch), POST /v1/batches, GET /v1/batches/{id},
GET /v1/files/{id}/content; POST /v1/chat/completions stays the online endpoint (``dialect="together"``:
Together's wrapped creation and upper-case statuses). Each batch line is
answered by the same responder the online endpoint uses, so a batch and an online run of the same
requests get the same answers. ``hold`` keeps batches in progress until a test releases them.

Anthropic's Message Batches too: POST /v1/messages/batches (every request inline as
``{"custom_id", "params"}``), GET /v1/messages/batches/{id} (``processing_status``, ``request_counts``,
``results_url``) and GET …/{id}/results (JSONL of ``{"custom_id", "result"}``), answered in the
Messages shape by the same responder (it gets each request's ``params``).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

from tests.helpers.fakeserver import (
    FakeOpenAIServer,
    Reply,
    Responder,
    _anthropic_payload,
    _approx_tokens,
    _Handler,
    _Server,
)


def completion_body(body: dict[str, Any], reply: Reply, index: int) -> dict[str, Any]:
    prompt_text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    completion = reply.completion_tokens if reply.completion_tokens is not None else _approx_tokens(reply.content or " ")
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else _approx_tokens(prompt_text)
    return {"id": f"chatcmpl-batch-{index}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.content},
                         "finish_reason": reply.finish_reason}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                      **(reply.usage or {})}}  # a provider's own usage fields, as online


class _BatchHandler(_Handler):
    server: Any

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def do_GET(self) -> None:  # noqa: N802
        owner = self.server.owner
        parts = self.path.strip("/").split("/")
        if len(parts) in (4, 5) and parts[1:3] == ["messages", "batches"]:
            batch = owner.poll_messages(parts[3]) if len(parts) == 4 else None
            if len(parts) == 5 and parts[4] == "results" and parts[3] in owner.results:
                self._send(200, owner.results[parts[3]])
            elif batch:
                self._json(200, batch)
            else:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "no such batch"}})
        elif len(parts) == 3 and parts[1] == "batches":
            batch = owner.poll(parts[2])
            self._json(200, batch) if batch else self._json(404, {"error": {"message": "no such batch"}})
        elif len(parts) == 4 and parts[1] == "files" and parts[3] == "content" and parts[2] in owner.files:
            self._send(200, owner.files[parts[2]])
        else:
            super().do_GET()

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        if self.path.rstrip("/").endswith("/messages/batches"):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self._json(200, owner.create_messages(body, dict(self.headers)))
        elif self.path.rstrip("/").endswith("/files"):
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            message = email.parser.BytesParser(policy=email.policy.default).parsebytes(
                f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + raw)
            fields = {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                      for part in message.iter_parts()}
            file_id = owner.add_file(fields["file"], purpose=fields["purpose"].decode())
            self._json(200, {"id": file_id, "object": "file", "purpose": "batch", "bytes": len(fields["file"])})
        elif self.path.rstrip("/").endswith("/batches"):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self._json(200, owner.create_batch(body, self.headers.get("Authorization", "")))
        else:
            super().do_POST()


def together_job(batch: dict[str, Any]) -> dict[str, Any]:
    """A batch as Together's API shows it (tests/conformance: together_batch_create_shape): its own field
    names, no request_counts, the status in upper case."""
    return {"id": batch["id"], "user_id": "user-fake", "input_file_id": batch["input_file_id"],
            "file_size_bytes": 0, "status": batch["status"].upper(), "job_deadline": "2026-01-02T00:00:00Z",
            "created_at": "2026-01-01T00:00:00Z", "endpoint": batch["endpoint"], "progress": 0.0,
            "model_id": "", "output_file_id": batch["output_file_id"], "error_file_id": batch["error_file_id"],
            "error": None, "completed_at": None}


class FakeBatchServer(FakeOpenAIServer):
    """``dialect="together"``: batches are created as ``{"job": {…}, "warning": null}`` and shown in
    Together's shape (``together_job``), as Together's API answers."""

    def __init__(self, responder: Responder | None = None, *, hold: bool = False, polls_to_finish: int = 2,
                 dialect: str = "openai"):
        super().__init__(responder)
        self.dialect = dialect
        self._server.server_close()
        self._server = _Server(("127.0.0.1", 0), _BatchHandler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.hold = hold
        self.polls_to_finish = polls_to_finish
        self.files: dict[str, bytes] = {}
        self.uploads: list[str] = []
        self.purposes: list[str] = []
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_auth: list[str] = []
        self.batch_lines = 0  # requests answered inside batches
        self.batch_headers: list[dict[str, str]] = []  # of each Message Batch creation
        self.results: dict[str, bytes] = {}  # Message Batch id -> its results JSONL
        self._ids = itertools.count(1)
        self._batch_lock = threading.Lock()

    def add_file(self, content: bytes, purpose: str) -> str:
        with self._batch_lock:
            file_id = f"file-{next(self._ids)}"
            self.files[file_id] = content
            self.purposes.append(purpose)
            if purpose in ("batch", "batch-api"):
                self.uploads.append(file_id)
            return file_id

    def create_batch(self, body: dict[str, Any], auth: str) -> dict[str, Any]:
        with self._batch_lock:
            lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
            batch = {"id": f"batch_{next(self._ids)}", "object": "batch", "endpoint": body["endpoint"],
                     "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                     "status": "validating", "created_at": int(time.time()), "output_file_id": None,
                     "error_file_id": None, "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                     "_lines": lines, "_polls": 0}
            self.batches[batch["id"]] = batch
            self.batch_auth.append(auth)
            if self.dialect == "together":
                return {"job": together_job(batch), "warning": None}
            return self._public(batch)

    @staticmethod
    def _public(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def poll(self, batch_id: str) -> dict[str, Any] | None:
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            batch["_polls"] += 1
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
            elif batch["status"] == "in_progress" and not self.hold and batch["_polls"] >= self.polls_to_finish:
                self._finish(batch)
            return together_job(batch) if self.dialect == "together" else self._public(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        out = []
        for line in batch["_lines"]:
            index = self.batch_lines
            self.batch_lines += 1
            reply = self.responder(line["body"], index)
            response = ({"status_code": 200, "request_id": f"req-{index}", "body": completion_body(line["body"], reply, index)}
                        if reply.status == 200 else
                        {"status_code": reply.status, "request_id": f"req-{index}",
                         "body": {"error": {"message": reply.error_message}}})
            out.append(json.dumps({"id": f"line-{index}", "custom_id": line["custom_id"], "response": response,
                                   "error": None}))
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = ("\n".join(out) + "\n").encode()
        batch.update(status="completed", output_file_id=file_id,
                     request_counts={"total": len(out), "completed": len(out), "failed": 0})

    # ---------------------------------------------------------------- Anthropic's Message Batches

    def create_messages(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        with self._batch_lock:
            lines = list(body["requests"])
            batch = {"id": f"msgbatch_{next(self._ids)}", "type": "message_batch", "processing_status": "in_progress",
                     "request_counts": {"processing": len(lines), "succeeded": 0, "errored": 0, "canceled": 0,
                                        "expired": 0},
                     "created_at": "2026-01-01T00:00:00Z", "ended_at": None, "results_url": None,
                     "_lines": lines, "_polls": 0}
            self.batches[batch["id"]] = batch
            self.batch_headers.append({k.lower(): v for k, v in headers.items()})
            return self._public(batch)

    def poll_messages(self, batch_id: str) -> dict[str, Any] | None:
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None or "processing_status" not in batch:
                return None
            batch["_polls"] += 1
            if batch["processing_status"] == "in_progress" and not self.hold and batch["_polls"] >= self.polls_to_finish:
                out, succeeded = [], 0
                for line in batch["_lines"]:
                    index = self.batch_lines
                    self.batch_lines += 1
                    reply = self.responder(line["params"], index)
                    if reply.status == 200:
                        succeeded += 1
                        result = {"type": "succeeded", "message": _anthropic_payload(line["params"], reply, index)}
                    else:
                        result = {"type": "errored", "error": {"type": "error", "error": {
                            "type": "api_error", "message": reply.error_message}}}
                    out.append(json.dumps({"custom_id": line["custom_id"], "result": result}))
                self.results[batch_id] = ("\n".join(out) + "\n").encode()
                batch.update(processing_status="ended", ended_at="2026-01-01T00:01:00Z",
                             results_url=f"{self.url.removesuffix('/v1')}/v1/messages/batches/{batch_id}/results",
                             request_counts={"processing": 0, "succeeded": succeeded,
                                             "errored": len(out) - succeeded, "canceled": 0, "expired": 0})
            return self._public(batch)


def kill_once_batch_is_polled(server: Any, command: list[str], env: dict[str, str]) -> None:
    """Run ``command`` (a judge --batch invocation) and SIGKILL it once the server has been polled twice
    about a batch it submitted: the moment between submit and collect."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(batch["_polls"] >= 2 for batch in server.batches.values()):
            assert process.poll() is None and time.monotonic() < deadline, "the batch was never submitted"
            time.sleep(0.05)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
