"""One limiter per model endpoint: a cap on requests in flight and on requests per minute.

Every attempt (retries included) passes through it, so retries respect the rate limit too.
A 429 with Retry-After pauses the whole endpoint, not only the request that saw it.
The asyncio primitives are made per event loop, so one pool can serve several asyncio.run calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class EndpointLimiter:
    def __init__(self, max_in_flight: int | None = None, rpm: float | None = None):
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        if rpm is not None and rpm <= 0:
            raise ValueError("rpm must be positive")
        self.max_in_flight = max_in_flight
        self.rpm = rpm
        self.in_flight = 0
        self.peak_in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._pace: asyncio.Lock | None = None
        # Token bucket: refills at rpm/60 per second, holds at most one second's worth
        # (at least one), so a burst can never exceed what the provider allows per second.
        self._capacity = max(1.0, (rpm or 0) / 60.0)
        self._tokens = self._capacity
        self._refilled_at = time.monotonic()
        self._paused_until = 0.0

    def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._slots = asyncio.Semaphore(self.max_in_flight) if self.max_in_flight else None
            self._pace = asyncio.Lock()

    def pause_for(self, seconds: float) -> None:
        """The provider asked us to back off (Retry-After): hold new requests until then."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    async def _wait_for_rate(self) -> None:
        assert self._pace is not None
        async with self._pace:  # one waiter at a time keeps the bucket arithmetic simple and fair
            while True:
                now = time.monotonic()
                if now < self._paused_until:
                    await asyncio.sleep(self._paused_until - now)
                    continue
                if self.rpm is None:
                    return
                rate = self.rpm / 60.0
                self._tokens = min(self._capacity, self._tokens + (now - self._refilled_at) * rate)
                self._refilled_at = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                await asyncio.sleep((1.0 - self._tokens) / rate)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self._bind()
        if self._slots is not None:
            await self._slots.acquire()
        try:
            await self._wait_for_rate()
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
        finally:
            if self._slots is not None:
                self._slots.release()
