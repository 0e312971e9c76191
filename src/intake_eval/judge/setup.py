"""One judge as a judging run uses it: its record label, alias, model and mode."""

from __future__ import annotations

from dataclasses import dataclass

from intake_eval.llm.base import ChatModel


@dataclass
class JudgeSetup:
    label: str  # the judge's folder and record label
    alias: str
    model: ChatModel
    mode: str = "per-turn"
    only: frozenset[str] | None = None  # the conversations it may judge now (a batch file answered them); None: all
