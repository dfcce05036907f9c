"""Admission to the KV cache: a request that needs more blocks than are free waits its turn
(first come, first served) in a bounded queue for a bounded time, instead of failing.

I/O layer (asyncio). Blocks come back from other threads too (the transfer agent's
notification thread frees a prefill's hold when decode has read it): :meth:`freed` is
thread-safe and hands the freed blocks to the oldest waiter that fits. A request that can
never fit is a 400 naming the prompt; a full queue, or a wait past ``wait_s``, is a 503 with
``Retry-After`` (:class:`Busy`), which the proxy retries on another instance or passes on.
"""

from __future__ import annotations

import asyncio
from collections import deque

from disagg_worker.model.kvcache import BlockAllocator, CacheFullError
from disagg_worker.serve.rules.openai import OpenAIError

RETRY_AFTER_S = 1


class Busy(OpenAIError):
    """503: no room now; ``retry_after_s`` goes out as the Retry-After header."""

    def __init__(self, message: str, retry_after_s: int = RETRY_AFTER_S) -> None:
        super().__init__(503, message)
        self.retry_after_s = retry_after_s


class Admission:
    """FIFO waiting room in front of a :class:`BlockAllocator` (see module docstring)."""

    def __init__(self, allocator: BlockAllocator, *, max_waiting: int, wait_s: float) -> None:
        self._allocator = allocator
        self.max_waiting, self.wait_s = max_waiting, wait_s
        self._waiting: deque[tuple[int, asyncio.Future[list[int]]]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        allocator.on_free = self.freed

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def check_room(self, elsewhere: int = 0) -> None:
        """Busy when the waiting room is full; ``elsewhere``: requests the caller queues
        before they reach this room (they count against the same bound)."""
        queued = len(self._waiting) + elsewhere
        if queued >= self.max_waiting:
            raise Busy(
                f"KV cache busy: {queued} requests already wait for blocks; "
                f"retry after {RETRY_AFTER_S} s or send it to another instance"
            )

    async def allocate(self, count: int) -> list[int]:
        """``count`` blocks, now or once freed; Busy after ``wait_s`` or with a full queue."""
        total = self._allocator.num_blocks
        if count > total:
            raise OpenAIError(
                400,
                f"prompt: the request needs {count} KV blocks and this cache has {total}; "
                "shorten the prompt or max_tokens, or raise DISAGG_NUM_BLOCKS",
                "prompt",
            )
        self._loop = asyncio.get_running_loop()
        if not self._waiting:
            try:
                return self._allocator.allocate(count)
            except CacheFullError:
                pass
        self.check_room()
        future: asyncio.Future[list[int]] = self._loop.create_future()
        item = (count, future)
        self._waiting.append(item)
        try:
            await asyncio.wait_for(asyncio.shield(item[1]), self.wait_s)
        except asyncio.TimeoutError:
            pass
        except asyncio.CancelledError:  # the client left while waiting
            self._abandon(item)
            raise
        if item[1].done():
            return item[1].result()
        self._abandon(item)
        raise Busy(
            f"KV cache full: {count} blocks not free within {self.wait_s:g} s "
            f"({self._allocator.num_free} of {total} free); retry after {RETRY_AFTER_S} s"
        )

    def freed(self) -> None:
        """Blocks came back (any thread): grant waiters on the event loop's thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._grant)

    def _grant(self) -> None:
        while self._waiting:
            count, future = self._waiting[0]
            try:
                ids = self._allocator.allocate(count)
            except CacheFullError:
                return  # first come, first served: the head waits, so do the rest
            self._waiting.popleft()
            future.set_result(ids)

    def _abandon(self, item: tuple[int, asyncio.Future[list[int]]]) -> None:
        if item in self._waiting:
            self._waiting.remove(item)
            self._grant()  # the head may have changed
        elif item[1].done() and not item[1].cancelled():
            self._allocator.free(item[1].result())  # granted as it gave up
