"""Records looked up by key without holding them all: where each key's latest line sits, read back on demand.

A stage that needs any one of 10⁵ profiles by id (the judge, for each conversation it labels) would hold
every profile as a model object (≈ 22 KB each in memory, 5 KB on disk); the index holds each key's line
offset and length and validates the line again when asked (a small cache keeps the last few, since the
same profile is asked for by its trials and conditions side by side). Lines are validated while indexing
too, so a line that is not a valid record is skipped with a warning then, as every reader does. The file
must not be rewritten while the index is used (the run lock keeps the stages that rewrite it out).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel

from intake_eval.core.lines import iter_json_lines_at

T = TypeVar("T", bound=BaseModel)


class RecordIndex(Mapping[str, T], Generic[T]):
    """``key → record`` over one JSONL file: the latest valid line per key, read when asked."""

    def __init__(self, path: Path, model: type[T], key: str, *, cached: int = 64):
        self.path = path
        self.model = model
        self._where: dict[str, tuple[int, int]] = {}
        for data, start, length in iter_json_lines_at(path, model=model):
            if isinstance(data.get(key), str):
                self._where[data[key]] = (start, length)
        self._cached: OrderedDict[str, T] = OrderedDict()
        self._room = cached

    def __getitem__(self, key: str) -> T:
        if key in self._cached:
            self._cached.move_to_end(key)
            return self._cached[key]
        start, length = self._where[key]
        handle = os.open(self.path, os.O_RDONLY)
        try:
            line = os.pread(handle, length, start)
        finally:
            os.close(handle)
        record = self.model.model_validate_json(line)
        self._cached[key] = record
        if len(self._cached) > self._room:
            self._cached.popitem(last=False)
        return record

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
