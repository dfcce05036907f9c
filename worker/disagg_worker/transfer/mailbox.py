"""Decode's NIXL notifications, for whoever waits on them.

Effectful layer (the poll is the agent's ``get_new_notifs``). NIXL hands out every new
notification once, to whichever caller asks; several requests may wait at once, each for
its own. :meth:`Mailbox.wait` drains the queue (one caller at a time) into a table and
returns when its key is there. Keys nobody took (the push of a request that gave up
waiting) are dropped after :data:`KEEP_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Poll = Callable[[], dict[str, list[bytes]]]
KEEP_S = 60.0
# a waiter polls without pausing this long (then every 0.2 ms at most): the bytes of a
# WRITE into this process move only while it polls, and a push lands in a few ms
SPIN_S = 0.05


class Mailbox:
    def __init__(self, poll: Poll) -> None:
        self._poll = poll
        self._lock = threading.Lock()
        self._seen: dict[bytes, float] = {}

    def wait(
        self, key: bytes, deadline: float, give_up: Callable[[], bool] = lambda: False
    ) -> bool:
        """Whether ``key`` arrived before ``deadline`` (perf_counter) or ``give_up()``.
        Each poll also drives UCX on (this agent has no progress thread): a WRITE into
        this process moves while it waits. Polls without pausing for :data:`SPIN_S`
        (measured: 4 MiB over tcp on loopback 2.4 GB/s against 1.9 with the READ's
        back-off), then backs off to 0.2 ms."""
        spin_until = time.perf_counter() + SPIN_S
        delay = 0.0
        while True:
            with self._lock:
                if self._take(key):
                    return True
            now = time.perf_counter()
            if now >= deadline or give_up():
                return False
            time.sleep(delay)
            if now >= spin_until:
                delay = min(0.0002, delay * 2 or 0.00002)

    def _take(self, key: bytes) -> bool:
        if self._seen.pop(key, None) is not None:
            return True
        try:
            notifs = self._poll()
        except Exception as e:  # a broken agent shows up as the wait's deadline
            log.debug("notification poll: %s", e)
            return False
        now = time.monotonic()
        for msgs in notifs.values():
            for m in msgs:
                self._seen[bytes(m)] = now
        if len(self._seen) > 64:
            for k in [k for k, t in self._seen.items() if now - t > KEEP_S]:
                del self._seen[k]
        return self._seen.pop(key, None) is not None
