"""Lease table: the prefill side's record of published blocks awaiting decode's READ.

Pure layer (stdlib only; time is passed in). Thread-safe: the request path holds and the
notification thread pops or expires.
"""

from __future__ import annotations

import threading


class LeaseTable:
    """request id → (block ids, expiry time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[list[int], float]] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)

    def hold(self, request_id: str, block_ids: list[int], expires: float) -> None:
        with self._lock:
            if request_id in self._held:
                raise ValueError(f"request {request_id!r} is already published")
            self._held[request_id] = (list(block_ids), expires)

    def pop(self, request_id: str) -> list[int] | None:
        with self._lock:
            item = self._held.pop(request_id, None)
        return None if item is None else item[0]

    def expire(self, now: float) -> list[tuple[str, list[int]]]:
        """Remove and return every lease whose expiry is at or before ``now``."""
        with self._lock:
            gone = [rid for rid, (_, exp) in self._held.items() if exp <= now]
            return [(rid, self._held.pop(rid)[0]) for rid in gone]
