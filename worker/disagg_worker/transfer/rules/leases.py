"""Lease table: the prefill side's record of published blocks awaiting decode's READ.

The standard library and the claim reasons of the wire contract (:mod:`protocol`); time is
passed in. Thread-safe: the request path holds, the side-channel thread claims, and the
notification thread pops or expires.

A claim is decode asking, before it posts its READ, whether the blocks are still held for
it. It is answered atomically under the table's lock: either the lease is live, decode
names the published blocks in their order (all of them, or the tail when it holds a prefix
already), the prompt digest matches the one the blocks were computed for, and the lease is
extended to ``until`` (so it cannot expire during the read), or the answer says why not.
Recently ended requests are remembered (a bounded number) so that a late claim learns
"expired" or "released" rather than "unknown".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from disagg_worker.transfer.rules.protocol import ClaimReason

ENDED_MEMORY = 4096  # recently ended request ids remembered for claim answers


@dataclass(frozen=True)
class ClaimResult:
    """``reason``: "" when held; else expired, released, unknown, blocks_differ or
    prompt_differs.

    ``expires``: the (extended) expiry when held, when the lease ran out when expired,
    else 0.0. ``held_ids``: the published block ids when they differ from the claim's.
    """

    held: bool
    reason: ClaimReason
    expires: float = 0.0
    held_ids: tuple[int, ...] = ()


class LeaseTable:
    """request id → (block ids, expiry time, prompt digest)."""

    def __init__(self, ended_memory: int = ENDED_MEMORY) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[list[int], float, str]] = {}
        self._ended: OrderedDict[str, tuple[ClaimReason, float]] = OrderedDict()
        self._ended_memory = ended_memory

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def hold(self, request_id: str, block_ids: list[int], expires: float, digest: str = "") -> None:
        with self._lock:
            if request_id in self._held:
                raise ValueError(f"request {request_id!r} is already published")
            self._held[request_id] = (list(block_ids), expires, digest)
            self._ended.pop(request_id, None)

    def expiry(self, request_id: str) -> float | None:
        with self._lock:
            item = self._held.get(request_id)
        return None if item is None else item[1]

    def pop(self, request_id: str) -> list[int] | None:
        with self._lock:
            item = self._held.pop(request_id, None)
            if item is not None:
                self._remember(request_id, "released", 0.0)
        return None if item is None else item[0]

    def expire(self, now: float) -> list[tuple[str, list[int]]]:
        """Remove and return every lease whose expiry is at or before ``now``."""
        with self._lock:
            gone = [(rid, exp) for rid, (_, exp, _) in self._held.items() if exp <= now]
            for rid, exp in gone:
                self._remember(rid, "expired", exp)
            return [(rid, self._held.pop(rid)[0]) for rid, _ in gone]

    def claim(
        self, request_id: str, block_ids: list[int], now: float, until: float, digest: str = ""
    ) -> ClaimResult:
        """Held (expiry extended to at least ``until``) or not, and why; see the docstring.

        Decode may claim the tail of the published blocks (it may hold a prefix already),
        never another order; ``digest`` "" skips the prompt check. A lease due at ``now``
        is expired even if the sweep has not removed it yet.
        """
        with self._lock:
            item = self._held.get(request_id)
            if item is None:
                ended = self._ended.get(request_id)
                if ended is None:
                    return ClaimResult(False, "unknown")
                return ClaimResult(False, ended[0], ended[1])
            ids, expires, held_digest = item
            if expires <= now:  # the notification thread's sweep releases it
                return ClaimResult(False, "expired", expires)
            if not block_ids or list(block_ids) != ids[len(ids) - len(block_ids) :]:
                return ClaimResult(False, "blocks_differ", expires, tuple(ids))
            if digest and held_digest and digest != held_digest:
                return ClaimResult(False, "prompt_differs", expires)
            expires = max(expires, until)
            self._held[request_id] = (ids, expires, held_digest)
            return ClaimResult(True, "", expires)

    def _remember(self, request_id: str, reason: ClaimReason, at: float) -> None:
        self._ended[request_id] = (reason, at)
        self._ended.move_to_end(request_id)
        while len(self._ended) > self._ended_memory:
            self._ended.popitem(last=False)
