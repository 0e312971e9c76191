"""How often Python's cycle collector runs during the metrics pass.

The pass makes millions of short-lived objects (a record's dict, its labels, a row group's cells) while
holding a few hundred thousand long-lived ones (pyarrow, scipy and the catalog). With the default
thresholds the collector runs thousands of times and every few dozen runs walks every long-lived object:
about a sixth of the pass's CPU at 10⁴ conversations, for almost nothing to collect (the pass's garbage
is freed by reference counting as it goes). ``fewer_collections`` raises the thresholds while the pass
runs and puts the caller's back after, so the collector still runs, rarely: what a cycle holds is freed
a little later, never kept, and memory stays flat in the run's size.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between two young-generation runs, and young runs per middle run, middle runs per full run:
# fifty thousand objects are a few MB at most, whatever the run's size.
PASS_THRESHOLDS = (50_000, 20, 10)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Run the block with ``PASS_THRESHOLDS`` (never lower than the caller's), then restore the caller's."""
    before = gc.get_threshold()
    gc.set_threshold(*(max(mine, theirs) for mine, theirs in zip(PASS_THRESHOLDS, before)))
    try:
        yield
    finally:
        gc.set_threshold(*before)
