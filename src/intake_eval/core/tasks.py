"""Running coroutines side by side so that a failure stops them all and is raised once.

``asyncio.gather`` raises the first exception but leaves its siblings running: their own failures
(every worker hits the same unwritable folder) are never retrieved and asyncio prints a traceback
for each when the loop closes, and a worker that dies while others wait on a queue for it hangs the
stage. ``gather_or_cancel`` cancels the siblings at the first failure, waits for them (collecting
their exceptions, so none is left unretrieved) and re-raises that first exception as it was — not
wrapped in an ExceptionGroup, so callers keep catching the types they catch today.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any


async def gather_or_cancel(awaitables: Iterable[Awaitable[Any]]) -> list[Any]:
    """Results in order, like ``asyncio.gather``; the first failure cancels the rest and is raised."""
    tasks = [asyncio.ensure_future(item) for item in awaitables]
    if not tasks:
        return []
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    raise failure
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # every sibling's outcome retrieved
