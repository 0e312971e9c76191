"""One judge × clinician arm's conversation rows for the per-arm tables (metrics/tables.py): the columns those
tables read, as numpy arrays in conversation order, each row read like the dict the tables take (``row[name]``,
``row.get(name)``) with the Python values ``tolist`` would give. What is held per conversation is a slot in
each array and a small view object, not a dict of Python values, so an arm's memory is a few hundred bytes a
conversation however large the arm grows."""

from __future__ import annotations

from typing import Any

from intake_eval.metrics import registry
from intake_eval.metrics.collect import Collected
from intake_eval.metrics.columnar import read_columns

SUMMARY_COLUMNS = ("conversation_id", "judge", "judge_mode", "clinician", "condition", "patient_mode", "profile_id",
                   "phenotype", "alignment", "status", "patient", "judge_calls", "judge_prompt_tokens",
                   "judge_completion_tokens", "judge_cost_usd")


class ArmColumns:
    """One arm's columns as numpy arrays, in conversation order; rows are read through ``ArmRow``."""

    def __init__(self, arrays: dict[str, Any], scalar: Any) -> None:
        self.arrays = arrays
        self.scalar = scalar  # numpy's scalar type: such a cell is given as the Python value ``tolist`` gives


class ArmRow:
    """One conversation row of an arm, read like the dict the per-arm tables take (``row[name]``,
    ``row.get(name)``), its cells the Python values of its arm's arrays: a slot per row, not a dict."""

    __slots__ = ("_arm", "_index")

    def __init__(self, arm: ArmColumns, index: int) -> None:
        self._arm = arm
        self._index = index

    def __getitem__(self, name: str) -> Any:
        value = self._arm.arrays[name][self._index]
        return value.item() if isinstance(value, self._arm.scalar) else value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._arm.arrays else default


def arm_rows(collected: Collected, arm: tuple[str, str]) -> list[Any]:
    """The conversation rows of one arm with the columns the per-arm tables read, in conversation order."""
    import numpy as np

    columns = [*SUMMARY_COLUMNS, *(metric.name for metric in registry.METRICS)]
    values = read_columns(collected.conversations, columns, {"judge": arm[0], "clinician": arm[1]})
    order = np.argsort(values["conversation_id"], kind="stable")
    columns_of_arm = ArmColumns({name: values[name][order] for name in columns}, np.generic)
    return [ArmRow(columns_of_arm, index) for index in range(len(order))]
