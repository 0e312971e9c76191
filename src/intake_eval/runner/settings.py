"""Stage settings: one pydantic model per stage, read from command-line flags or a study config.

A stage's defaults and limits are declared once, on its settings model; the study config builds
the same model from its fields, so ``run --turns 1000`` and ``turns: 1000`` in a study config are
refused by the same declaration. ``from_flags`` turns the first validation problem into one line
naming the flag (``--turns must be at most 100 (got 1000)``); a study config names the file and key
(``core.errors.describe_validation_error``).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from intake_eval.core.errors import IntakeEvalError

SettingsT = TypeVar("SettingsT", bound="StageSettings")

# pydantic error types whose limit reads as "must be <word> <limit>"
_BOUNDS = {"greater_than_equal": ("at least", "ge"), "less_than_equal": ("at most", "le"),
           "greater_than": ("more than", "gt"), "less_than": ("less than", "lt"),
           "too_short": ("at least", "min_length")}


class StageSettings(BaseModel):
    """Validated settings of one stage. ``FLAGS`` names a field's flag where it is not ``--<field>``;
    ``HINTS`` replaces the bound wording of a field whose flag has its own (``--budget``)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    FLAGS: ClassVar[dict[str, str]] = {}
    HINTS: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_flags(cls: type[SettingsT], **values: Any) -> SettingsT:
        """The settings from a command's flags; bad input is one ``IntakeEvalError`` naming the flag."""
        try:
            return cls(**values)
        except ValidationError as error:
            raise IntakeEvalError(cls.flag_problem(error)) from None

    @classmethod
    def flag_of(cls, field: str) -> str:
        return cls.FLAGS.get(field, "--" + field.replace("_", "-"))

    @classmethod
    def flag_problem(cls, error: ValidationError) -> str:
        """The first problem as one line: the flag, what it must be, and the value given."""
        item = error.errors()[0]
        location = item.get("loc", ())
        field = str(location[0]) if location else ""
        flag = cls.flag_of(field) if field else "(settings)"
        given = values_text(item.get("input"))
        if field in cls.HINTS:
            return f"{flag} {cls.HINTS[field]} (got {given})"
        bound = _BOUNDS.get(str(item.get("type")))
        context = item.get("ctx") or {}
        if bound is not None and bound[1] in context:
            return f"{flag} must be {bound[0]} {number_text(context[bound[1]])} (got {number_text(given)})"
        message = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        return f"{flag} {given}: {message}"


def number_text(value: Any) -> str:
    """A whole number with thousands separators (1,000,000), anything else as it is."""
    try:
        return f"{int(value):,}" if str(int(value)) == str(value) else str(value)
    except (TypeError, ValueError):
        return str(value)


def values_text(value: Any) -> str:
    """A flag's value as the user typed it (a repeated flag's values joined by spaces)."""
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value)
    return str(value)
