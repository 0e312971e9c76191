"""A priced loopback provider that keeps its own bill: what it answered, with which usage, at which price.

It plays clinician ("doc") and patient ("pat") deterministically, injects faults at seeded rates
(a truncated 200 body — billed, like a real provider bills an answer the network cut —, a 500 and a
429, both with ``Retry-After: 0`` so a test stays fast) and bills every 200 it answers at the moment
it answers (prompt and completion tokens as it reports them × its prices), whether or not the client
lives to read the answer. ``bill`` and ``faults`` are the figures a client's ledger must match.
"""

from __future__ import annotations

import json
import random
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tests.helpers.fakeserver import FakeOpenAIServer, Reply

QUESTIONS = ["What brings you in today, and how long has it been going on?",
             "Tell me more about how that has affected your work and your days.",
             "How is your sleep, and has your appetite or energy changed?", "Anything else you want me to know?"]
PRICES = {"doc": (2e-5, 6e-5), "pat": (1e-5, 3e-5)}  # dollars per prompt / completion token


def tokens(text: str) -> int:
    return max(1, len(text) // 4)


@dataclass
class BillingResponder:
    seed: int = 7
    truncated_rate: float = 0.03
    server_error_rate: float = 0.03
    rate_limited_rate: float = 0.03
    bill: float = 0.0
    answered: int = 0
    faults: dict[str, int] = field(default_factory=lambda: {"truncated": 0, "500": 0, "429": 0})
    by_patient: dict[str, float] = field(default_factory=dict)  # patient name → what its conversation's calls billed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _content(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        if body["model"] == "doc":
            asked = sum(1 for m in messages if m["role"] == "assistant")
            return QUESTIONS[asked % len(QUESTIONS)]
        names = re.findall(r"You are (Daniel\d+)", str(messages[0].get("content", "")))
        return (f"I'm {names[0] if names else 'the patient'} and I've mostly been feeling low and tired; "
                "mornings are the worst and I have been pulling away from friends.")

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        roll = random.Random(self.seed * 1_000_003 + index).random()
        if roll < self.server_error_rate:
            with self.lock:
                self.faults["500"] += 1
            return Reply(status=500, error_message="injected server error", headers={"Retry-After": "0"})
        if roll < self.server_error_rate + self.rate_limited_rate:
            with self.lock:
                self.faults["429"] += 1
            return Reply(status=429, error_message="injected rate limit", headers={"Retry-After": "0"})
        content = self._content(body)
        prompt = tokens(" ".join(str(m.get("content", "")) for m in body.get("messages", [])))
        completion = tokens(content)
        price_in, price_out = PRICES[body["model"]]
        named = re.findall(r"\b(Daniel\d+)", " ".join(str(m.get("content", "")) for m in body.get("messages", [])))
        with self.lock:
            self.bill += prompt * price_in + completion * price_out
            self.answered += 1
            if named:
                key = named[0]
                self.by_patient[key] = self.by_patient.get(key, 0.0) + prompt * price_in + completion * price_out
        if roll < self.server_error_rate + self.rate_limited_rate + self.truncated_rate:
            with self.lock:
                self.faults["truncated"] += 1
            payload = {"id": f"cut-{index}", "object": "chat.completion", "model": body["model"],
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
            raw = json.dumps(payload).encode()
            return Reply(raw_body=raw[: len(raw) // 2])
        return Reply(content=content, prompt_tokens=prompt, completion_tokens=completion)

    def one_conversation(self) -> float:
        """What one conversation was billed, by this server's own figures: the median over patients (a
        conversation cut by a kill and run again, or retried, was billed more than one)."""
        with self.lock:
            bills = sorted(self.by_patient.values())
        return bills[len(bills) // 2] if bills else 0.0

    @property
    def fault_count(self) -> int:
        with self.lock:
            return sum(self.faults.values())


def billing_server(**settings: Any) -> tuple[FakeOpenAIServer, BillingResponder]:
    responder = BillingResponder(**settings)
    return FakeOpenAIServer(responder), responder


def models_yaml(url: str) -> str:
    lines = ["models:"]
    for alias, (price_in, price_out) in PRICES.items():
        lines.append(f"  {alias}: {{model: openai/{alias}, api_base: '{url}', input_cost_per_token: {price_in}, "
                     f"output_cost_per_token: {price_out}}}")
    return "\n".join(lines) + "\n"
