"""Lease table: hold, pop once, expire by the time passed in."""

from __future__ import annotations

import pytest

from disagg_worker.leases import LeaseTable


def test_pop_returns_blocks_once() -> None:
    t = LeaseTable()
    t.hold("a", [1, 2], expires=10.0)
    assert len(t) == 1
    assert t.pop("a") == [1, 2]
    assert t.pop("a") is None and len(t) == 0


def test_expire_takes_only_due_leases() -> None:
    t = LeaseTable()
    t.hold("a", [1], expires=5.0)
    t.hold("b", [2], expires=9.0)
    assert t.expire(4.9) == []
    assert t.expire(5.0) == [("a", [1])]
    assert t.pop("b") == [2]


def test_duplicate_request_is_refused() -> None:
    t = LeaseTable()
    t.hold("a", [1], expires=1.0)
    with pytest.raises(ValueError, match="already published"):
        t.hold("a", [2], expires=1.0)
