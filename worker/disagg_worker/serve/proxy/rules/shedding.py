"""Load shedding per pool: how fast a pool gets through its hops, and whether a new request
would start there within the queue budget (``--pool-queue-s``) or is refused at once.

Times are passed in. A pool's rate is measured, never configured: hops served
per second the pool was busy (at least one hop in flight), both sums decayed with a
half-life, so it follows the traffic (a long prompt costs a prefill more than a short one)
and a batching engine (vLLM) shows its higher rate as its concurrency grows. With ``n``
hops in flight and rate ``r``, a new one starts after about ``n / r`` seconds (Little's
law); the bound is ``r * queue_s``, and a request past it would wait longer than the
budget, then most likely run out of its deadline after the pool had worked on it.
Nothing is shed while the pool has fewer hops in flight than workers (each can start one
now) or before it has served a hop recently (no rate to judge by).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

HALF_LIFE_S = 30.0  # a minute-old hop weighs a quarter of one served now
MIN_SERVED = 1.0  # decayed hops served: less is too little evidence to refuse anything


@dataclass(frozen=True)
class Shed:
    """A refusal: ``inflight`` hops in the pool, ``limit`` what it starts within the budget,
    its ``rate`` (hops per busy second) and when to come back (``retry_after_s``)."""

    inflight: int
    limit: int
    rate: float
    retry_after_s: int


@dataclass
class Drain:
    """One pool's hops in flight and its decayed served-per-busy-second rate."""

    half_life_s: float = HALF_LIFE_S
    inflight: int = 0
    served: float = 0.0  # hops served, decayed
    busy_s: float = 0.0  # seconds with a hop in flight, decayed alike
    at: float | None = None

    def began(self, now: float) -> None:
        self._advance(now)
        self.inflight += 1

    def ended(self, now: float, served: bool) -> None:
        """A hop left the pool: ``served`` when the pool did its work (an answer), not
        when it failed, was refused or its client left."""
        self._advance(now)
        self.inflight = max(0, self.inflight - 1)
        if served:
            self.served += 1.0

    def rate(self, now: float) -> float | None:
        """Hops served per busy second; None without enough recent evidence."""
        self._advance(now)
        if self.served < MIN_SERVED or self.busy_s <= 0.0:
            return None
        return self.served / self.busy_s

    def limit(self, now: float, queue_s: float, workers: int) -> int | None:
        """The hops in flight the pool starts within ``queue_s`` (at least one per worker);
        None: no bound (no rate yet, or ``queue_s`` 0: shedding off)."""
        rate = self.rate(now)
        if rate is None or queue_s <= 0:
            return None
        return max(workers, math.floor(rate * queue_s))

    def shed(self, now: float, queue_s: float, workers: int) -> Shed | None:
        """A :class:`Shed` when one more request would not start within ``queue_s``."""
        limit = self.limit(now, queue_s, workers)
        if limit is None or self.inflight < limit:
            return None
        rate = self.rate(now)
        assert rate is not None  # a limit means a rate
        wait = (self.inflight - limit + 1) / rate  # until the pool is back under its bound
        return Shed(self.inflight, limit, rate, max(1, math.ceil(wait)))

    def _advance(self, now: float) -> None:
        if self.at is not None and now > self.at:
            keep = 0.5 ** ((now - self.at) / self.half_life_s)
            self.served *= keep
            # the busy time since ``at``, each instant decayed by its own age
            busy = (1.0 - keep) * self.half_life_s / math.log(2) if self.inflight else 0.0
            self.busy_s = self.busy_s * keep + busy
        if self.at is None or now > self.at:
            self.at = now


def message(role: str, where: str, shed: Shed, queue_s: float) -> str:
    """The 503's error: the pool (role and Service or workers), why, when to come back."""
    return (
        f"{role} pool ({where}) is full: {shed.inflight} requests in flight, more than it "
        f"starts within --pool-queue-s {queue_s:g} s at its measured {shed.rate:.2f} "
        f"requests/s; retry after {shed.retry_after_s} s"
    )
