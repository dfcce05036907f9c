"""Retries of refused writes: per-deployment back-off state and the timers that end it.

I/O shell (asyncio timers) around the pure state of
:mod:`disagg_operator.controller.rules.refusals`. The
:class:`~disagg_operator.controller.sync.Reconciler` asks :meth:`Retries.held` before a sync
and reports the sync's refusals to :meth:`Retries.settle` after it; when a back-off starts,
a timer requests one more sync at its end.

Why a timer of our own and not kopf's ``TemporaryError(delay=...)``: the operator
registers only event handlers (handlers.py), and kopf never retries those. The timer
covers every trigger, and a retry that gets the same answer writes nothing but the
refused write itself (the status is unchanged).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

from disagg_operator.controller.rules.refusals import Backoff, Pending, Refusal, after, held

log = logging.getLogger("disagg.operator")


# ``call_later(delay, callback)`` → a handle with ``cancel()``: the event loop's by default.
CallLater = Callable[[float, Callable[[], None]], Any]


class Retries:
    """Back-off state per key; ``retry(key)`` is awaited when a back-off ends. ``monotonic``
    and ``call_later`` are the clock and the timers (the running loop's by default; tests
    pass their own to move time by hand)."""

    def __init__(
        self,
        retry: Callable[[Hashable], Awaitable[None]],
        backoff: Backoff | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        call_later: CallLater | None = None,
    ) -> None:
        self.backoff = backoff or Backoff()
        self._retry = retry
        self._now = monotonic
        self._call_later = call_later
        self._pending: dict[Hashable, Pending] = {}
        self._timers: dict[Hashable, Any] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def held(self, key: Hashable, generation: int | None) -> tuple[Refusal, ...]:
        """Refused writes a sync of ``key`` starting now must not retry yet."""
        return held(self._pending.get(key), generation, self._now())

    def pending(self, key: Hashable) -> Pending | None:
        return self._pending.get(key)

    def settle(
        self,
        key: Hashable,
        generation: int | None,
        refusals: Sequence[Refusal],
        holding: bool,
    ) -> None:
        """Record a finished sync of ``key``; start or end its back-off."""
        old = self._pending.get(key)
        now = self._now()
        new = after(
            old, refusals, generation=generation, now=now, holding=holding, backoff=self.backoff
        )
        if new is None:
            self.forget(key)
            return
        self._pending[key] = new
        if old is None or new.due != old.due:
            self._schedule(key, new.due - now)

    def forget(self, key: Hashable) -> None:
        self._pending.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def close(self) -> None:
        """Cancel every timer and running retry (operator shutdown)."""
        for key in list(self._timers):
            self.forget(key)
        for task in self._tasks:
            task.cancel()

    def _schedule(self, key: Hashable, delay: float) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        later = self._call_later or asyncio.get_running_loop().call_later
        self._timers[key] = later(max(delay, 0.0), lambda: self._fire(key))

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._run(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Hashable) -> None:
        try:
            await self._retry(key)
        except Exception as e:  # transient trouble: try again after the same back-off
            pending = self._pending.get(key)
            log.warning("retry of %s after refused writes failed: %s", key, e)
            if pending is not None:
                self._schedule(key, self.backoff.delay(pending.attempt))
