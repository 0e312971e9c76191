"""One judge × clinician arm's conversation rows for the per-arm tables (metrics/tables.py): the columns those
tables read, as numpy arrays in conversation order, each row read like the dict the tables take (``row[name]``,
``row.get(name)``) with the Python values ``tolist`` would give. What is held per conversation is a slot in
each array and a small view object, not a dict of Python values, so an arm's memory is a few hundred bytes a
conversation however large the arm grows."""

from __future__ import annotations

from typing import Any

from intake_eval.metrics import registry
from intake_eval.metrics.collect import Collected
from intake_eval.metrics.columnar import numpy_column, read_table

SUMMARY_COLUMNS = ("conversation_id", "judge", "judge_mode", "clinician", "condition", "patient_mode", "profile_id",
                   "phenotype", "alignment", "status", "patient", "judge_calls", "judge_prompt_tokens",
                   "judge_completion_tokens", "judge_cost_usd")


class ArmColumns:
    """One arm's columns as numpy arrays, in conversation order; rows are read through ``ArmRow``.
    ``nulls``: for a number column with undefined cells, where they are (its array holds a 0 there)."""

    def __init__(self, arrays: dict[str, Any], nulls: dict[str, Any], scalar: Any) -> None:
        self.arrays = arrays
        self.nulls = nulls
        self.scalar = scalar  # numpy's scalar type: such a cell is given as the Python value ``tolist`` gives


class ArmRow:
    """One conversation row of an arm, read like the dict the per-arm tables take (``row[name]``,
    ``row.get(name)``), its cells the Python values of its arm's arrays: a slot per row, not a dict."""

    __slots__ = ("_arm", "_index")

    def __init__(self, arm: ArmColumns, index: int) -> None:
        self._arm = arm
        self._index = index

    def __getitem__(self, name: str) -> Any:
        nulls = self._arm.nulls.get(name)
        if nulls is not None and nulls[self._index]:
            return None  # an undefined value
        value = self._arm.arrays[name][self._index]
        return value.item() if isinstance(value, self._arm.scalar) else value

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self._arm.arrays else default


def arm_rows(collected: Collected, arm: tuple[str, str]) -> list[Any]:
    """The conversation rows of one arm with the columns the per-arm tables read, in conversation order."""
    import numpy as np

    columns = [*SUMMARY_COLUMNS, *(metric.name for metric in registry.METRICS)]
    table = read_table(collected.conversations, columns, [("judge", "=", arm[0]), ("clinician", "=", arm[1])])
    arrays: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    for name in columns:
        arrays[name], undefined = _column(table.column(name))
        if undefined is not None:
            nulls[name] = undefined
    del table
    order = np.argsort(arrays["conversation_id"], kind="stable")
    columns_of_arm = ArmColumns({name: array[order] for name, array in arrays.items()},
                                {name: mask[order] for name, mask in nulls.items()}, np.generic)
    return [ArmRow(columns_of_arm, index) for index in range(len(order))]


def _column(column: Any) -> tuple[Any, Any]:
    """(a column as a numpy array, where its undefined cells are or None): text as Python strings shared by
    the rows holding them (columnar.read_columns's), a number column as numbers with its undefined cells
    masked (a Python float per cell would be 32 bytes a cell)."""
    import pyarrow  # type: ignore[import-untyped]  # pyarrow ships no type information

    if pyarrow.types.is_string(column.type) or not column.null_count:
        return numpy_column(column), None
    zero = pyarrow.scalar(False if pyarrow.types.is_boolean(column.type) else 0, type=column.type)
    return (column.fill_null(zero).to_numpy(zero_copy_only=False),
            column.is_null().to_numpy(zero_copy_only=False))
