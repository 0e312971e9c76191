"""metrics/columnar.ParquetRows: cells given once per key (``head``) write the very file full rows would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from intake_eval.metrics.columnar import ParquetRows, read_columns

COLUMNS = ("conversation_id", "judge", "trial", "turn", "label", "asked")
TYPES = {"trial": "int64", "turn": "int64", "asked": "bool"}
# (key, head cells, each row's cells after them): an empty judgment, a None in a head, a key written twice
# (an uncompacted file: the later rows win), rows spread over several row groups
ADDS: list[tuple[tuple[str, str], tuple[Any, ...], list[tuple[Any, ...]]]] = [
    (("j", "c1"), ("c1", "j", 0), [(1, "open", True), (2, None, False)]),
    (("j", "c2"), ("c2", "j", 1), []),
    (("j", "c3"), ("c3", None, 0), [(0, "opening", False)]),
    (("j", "c1"), ("c1", "j", 0), [(1, "open", False)]),
    *((("k", f"c{n}"), (f"c{n}", "k", n), [(turn, f"q{turn}", turn % 2 == 0) for turn in range(n % 4)])
      for n in range(4, 40)),
]


def _written(path: Path, heads: bool, flush_at: int | None = None) -> Path:
    rows = ParquetRows(path, COLUMNS, TYPES, row_group_rows=7, head_columns=3 if heads else 0)
    for index, (key, head, tails) in enumerate(ADDS):
        if heads:
            rows.add(key, tails, head=head)
        else:
            rows.add(key, [(*head, *tail) for tail in tails])
        if index == flush_at:
            rows.flush()
    return rows.close()


def test_a_head_given_once_writes_the_same_file_as_full_rows(tmp_path: Path) -> None:
    full = _written(tmp_path / "full.parquet", heads=False, flush_at=20)
    headed = _written(tmp_path / "headed.parquet", heads=True, flush_at=20)
    assert headed.read_bytes() == full.read_bytes()
    values = read_columns(headed, list(COLUMNS))
    assert values["label"][:3].tolist() == ["opening", "open", "q0"]  # c1's first rows were superseded


def test_a_head_of_the_wrong_width_is_refused(tmp_path: Path) -> None:
    rows = ParquetRows(tmp_path / "t.parquet", COLUMNS, TYPES, head_columns=3)
    with pytest.raises(ValueError, match="a head of 2 cells, not 3"):
        rows.add(("j", "c1"), [(1, "open", True)], head=("c1", "j"))
    rows.discard()
