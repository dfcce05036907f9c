"""The proxy's pools per KV revision, and which revision serves a request.

I/O-free layer. A prefill's KV can be read only by a decode of its KV revision (the same
model, layout and engine version), and while a KV change rolls in (the operator keeps the
old revision's pods until the new one can carry the load) both revisions serve. So the
proxy holds a :class:`Pair` of pools per revision and pairs each request inside one: the
pool policy picks among the decode workers of every revision that can take a request
(both roles have a worker), and that decode's revision gives the prefill pool. A
revision with decode workers alone is chosen only when none has both (its empty prefill
pool then answers the 503 naming its Service, as a single pair does); one with no decode
worker never is. Without revisions (``disagg up``, a proxy given URLs) there is one pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from disagg_worker.serve.proxy.upstream import Backend, Pool


@dataclass
class Pair:
    """One KV revision's prefill and decode pools (``kv`` is "" for the only pair)."""

    kv: str
    prefill: Pool
    decode: Pool


class Pairs:
    """Every revision's pair, and the policy that picks one per request."""

    def __init__(self, pairs: Sequence[Pair], policy: str) -> None:
        if not pairs:
            raise ValueError("the proxy needs at least one pair of pools")
        self.pairs, self.policy = list(pairs), policy
        self._turn = itertools.count()

    @property
    def decodes(self) -> list[Backend]:
        """Every decode worker of every revision."""
        return [b for pair in self.pairs for b in pair.decode.backends]

    def choose(self) -> Pair:
        """The pair that serves the next request (module docstring)."""
        whole = [p for p in self.pairs if p.prefill.backends and p.decode.backends]
        usable = whole or [p for p in self.pairs if p.decode.backends] or self.pairs[:1]
        if len(usable) == 1:
            return usable[0]
        workers = [(b, pair) for pair in usable for b in pair.decode.backends]
        start = next(self._turn) % len(workers)
        order = workers[start:] + workers[:start]
        if self.policy == "least-loaded":
            return min(order, key=lambda w: w[0].inflight)[1]  # ties: round-robin order
        return order[0][1]

    def of(self, decode: Backend) -> Pair:
        """The pair ``decode`` belongs to (the first when it is in none any more)."""
        owner = (p for p in self.pairs if any(b is decode for b in p.decode.backends))
        return next(owner, self.pairs[0])
