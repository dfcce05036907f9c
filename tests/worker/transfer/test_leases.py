"""Lease table: hold, pop once, expire by the time passed in, claim atomically."""

from __future__ import annotations

import pytest

from disagg_worker.transfer.rules.leases import LeaseTable


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


def test_claim_extends_a_live_lease_to_cover_the_read() -> None:
    t = LeaseTable()
    t.hold("a", [1, 2, 3], expires=10.0)
    res = t.claim("a", [1, 2, 3], now=9.0, until=14.0)
    assert (res.held, res.reason, res.expires) == (True, "", 14.0)
    assert t.expiry("a") == 14.0
    assert t.expire(13.9) == []  # the old expiry no longer frees it
    assert t.expire(14.0) == [("a", [1, 2, 3])]


def test_claim_never_shortens_a_lease() -> None:
    t = LeaseTable()
    t.hold("a", [1], expires=30.0)
    assert t.claim("a", [1], now=1.0, until=5.0).expires == 30.0
    assert t.expiry("a") == 30.0


def test_claim_of_the_ordered_tail_is_held_and_of_anything_else_is_not() -> None:
    """Decode names the published blocks in order (all, or the tail when it holds a prefix
    already); a reordering would put KV at the wrong positions, so it is refused."""
    t = LeaseTable()
    t.hold("a", [4, 5, 6], expires=10.0)
    assert t.claim("a", [4, 5, 6], now=1.0, until=2.0).held
    assert t.claim("a", [5, 6], now=1.0, until=2.0).held
    for wrong in ([6, 7], [6, 5], [4, 6, 5], [4, 5], [5], [], [4, 5, 6, 6]):
        res = t.claim("a", wrong, now=1.0, until=2.0)
        assert (res.held, res.reason, res.held_ids) == (False, "blocks_differ", (4, 5, 6)), wrong
    assert t.expiry("a") == 10.0  # held claims never shorten it; refused ones never extend it


def test_claim_for_another_prompt_is_refused() -> None:
    t = LeaseTable()
    t.hold("a", [1, 2], expires=10.0, digest="d-mine")
    res = t.claim("a", [1, 2], now=1.0, until=20.0, digest="d-other")
    assert (res.held, res.reason) == (False, "prompt_differs")
    assert t.expiry("a") == 10.0  # a refused claim does not extend the lease
    assert t.claim("a", [1, 2], now=1.0, until=20.0, digest="d-mine").held
    assert t.claim("a", [1, 2], now=1.0, until=20.0).held  # no digest: not checked


def test_claim_after_expiry_says_expired_even_before_the_sweep() -> None:
    t = LeaseTable()
    t.hold("a", [1], expires=5.0)
    res = t.claim("a", [1], now=5.0, until=9.0)
    assert (res.held, res.reason, res.expires) == (False, "expired", 5.0)
    assert t.expiry("a") == 5.0  # not extended: the sweep releases it
    assert t.expire(5.0) == [("a", [1])]
    res = t.claim("a", [1], now=6.0, until=9.0)
    assert (res.held, res.reason, res.expires) == (False, "expired", 5.0)


def test_claim_of_released_and_unknown_requests() -> None:
    t = LeaseTable()
    t.hold("a", [1], expires=5.0)
    t.pop("a")
    assert t.claim("a", [1], now=1.0, until=2.0).reason == "released"
    assert t.claim("nobody", [1], now=1.0, until=2.0).reason == "unknown"


def test_ended_requests_are_remembered_up_to_a_bound() -> None:
    t = LeaseTable(ended_memory=2)
    for rid in "abc":
        t.hold(rid, [1], expires=1.0)
    t.expire(1.0)
    assert [t.claim(r, [1], 2.0, 3.0).reason for r in "abc"] == ["unknown", "expired", "expired"]
    t.hold("b", [1], expires=9.0)  # an id published again is live again
    assert t.claim("b", [1], 2.0, 3.0).held
