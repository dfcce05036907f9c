"""Cooperative cancellation of engine work: when a request's handler is cancelled (its
client, or a proxy at its deadline, closed the connection), the engine thread stops that
request at its next step boundary, and the handler waits until it has.

I/O layer (asyncio, threads). The engine is not re-entrant and runs on a thread of its own,
which a cancelled coroutine cannot stop: a handler that freed its blocks on cancellation
while the engine still ran would let another request be granted blocks the engine is
writing. So a :class:`Job` carries a flag the engine reads before each forward pass
(``ReferenceModel.generate``'s ``stop``), and :func:`on_engine` sets it on cancellation and
returns (raising CancelledError) only once the engine let go; the caller's ``finally``
frees the blocks after that.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class Job:
    """One request's engine work as its handler and the engine thread share it: what sees
    each token as it is made (``on_token``, called on the engine thread), ``cancelled``
    (set by the handler), whether the engine ran a step for it (``stepped``), and when the
    cancel came and the engine let go (monotonic seconds)."""

    on_token: Callable[[int], None] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    stepped: bool = False
    cancelled_at: float | None = None
    let_go_at: float | None = None

    def stop(self) -> bool:
        """The engine thread, before each forward pass: True stops the request there."""
        if self.cancelled.is_set():
            return True
        self.stepped = True
        return False

    def cancel(self) -> None:
        if self.cancelled_at is None:
            self.cancelled_at = time.monotonic()
        self.cancelled.set()

    @property
    def stage(self) -> str:
        """Where a cancel found it: ``queued`` (no engine step had run for it) or
        ``running``."""
        return "running" if self.stepped else "queued"

    @property
    def stop_s(self) -> float:
        """Seconds from the cancel until the engine let go (the step in flight ran out)."""
        if self.cancelled_at is None or self.let_go_at is None:
            return 0.0
        return max(0.0, self.let_go_at - self.cancelled_at)


async def on_engine(executor: Executor, fn: Callable[[], T], job: Job | None = None) -> T:
    """``fn()`` on the engine's thread. Cancelled while it runs or waits its turn: the job
    is cancelled (``fn`` should read ``job.stop`` between its steps), and CancelledError is
    raised only once ``fn`` returned or raised, so the request's blocks are the caller's
    to free again."""
    future = asyncio.get_running_loop().run_in_executor(executor, fn)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        if job is not None:
            job.cancel()
        await settled(future)
        if job is not None:
            job.let_go_at = time.monotonic()
        raise


async def settled(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever it ends with, through further cancellations
    of the waiting task (the engine is at most one step from letting go)."""
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            continue  # cancelled again: the engine still holds the blocks, keep waiting
        except Exception:  # its outcome is the engine's to report (Stopped, mostly)
            return
    if not future.cancelled():
        future.exception()  # retrieved: a Stopped is the expected end, never "unretrieved"
