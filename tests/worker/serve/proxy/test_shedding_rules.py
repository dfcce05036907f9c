"""A pool's measured rate and its shedding bound (serve/proxy/rules/shedding.py), on a
clock the test moves: hops served per busy second, decayed (so within a few percent of the
plain ratio over a few seconds); the bound is rate times the queue budget, never under one
hop per worker; no rate, no bound."""

from __future__ import annotations

import math

import pytest

from disagg_worker.serve.proxy.rules.shedding import HALF_LIFE_S, Drain, Shed, message


def serial(drain: Drain, hops: int, each_s: float, start: float = 0.0) -> float:
    """``hops`` served one after the other, ``each_s`` each; the time after the last."""
    now = start
    for _ in range(hops):
        drain.began(now)
        now += each_s
        drain.ended(now, served=True)
    return now


def test_a_serial_pool_measures_one_over_its_service_time() -> None:
    drain = Drain()
    now = serial(drain, 4, 0.5)
    assert drain.rate(now) == pytest.approx(2.0, rel=0.02)


def test_idle_time_between_hops_is_not_counted_against_the_rate() -> None:
    drain = Drain()
    now = 0.0
    for _ in range(3):  # one 0.5 s hop every 10 s: busy a twentieth of the time
        now = serial(drain, 1, 0.5, now) + 9.5
    assert drain.rate(now) == pytest.approx(2.0, rel=0.02)


def test_concurrent_hops_raise_the_rate_a_batching_engine_shows() -> None:
    drain = Drain()
    for _ in range(4):  # four at once, each done in 1 s: 4 per busy second
        drain.began(0.0)
    for _ in range(4):
        drain.ended(1.0, served=True)
    assert drain.rate(1.0) == pytest.approx(4.0, rel=0.02)


def test_no_rate_without_a_hop_served_and_none_once_it_has_aged() -> None:
    drain = Drain()
    drain.began(0.0)
    drain.ended(3.0, served=False)  # failed or cancelled: no evidence of what it can do
    assert drain.rate(3.0) is None
    now = serial(drain, 1, 0.5, 3.0)
    assert drain.rate(now) is not None
    # two half-lives later the one hop weighs a quarter: too little to refuse anything on
    assert drain.rate(now + 2 * HALF_LIFE_S) is None


def test_the_bound_is_rate_times_budget_and_at_least_one_per_worker() -> None:
    drain = Drain()
    now = serial(drain, 4, 0.5)  # 2 per second
    assert drain.limit(now, 2.0, workers=1) == 4
    assert drain.limit(now, 0.1, workers=3) == 3  # each worker can start one now
    assert drain.limit(now, 0.0, workers=1) is None  # 0: shedding off


def test_past_the_bound_a_request_is_shed_with_when_to_come_back() -> None:
    drain = Drain()
    now = serial(drain, 4, 0.5)
    for _ in range(3):
        drain.began(now)
    assert drain.shed(now, 2.0, workers=1) is None  # 3 in flight, 4 start in time
    drain.began(now)
    assert drain.shed(now, 2.0, workers=1) == Shed(4, 4, pytest.approx(2.0, rel=0.02), 1)
    for _ in range(5):
        drain.began(now)
    shed = drain.shed(now, 2.0, workers=1)
    assert shed is not None and shed.inflight == 9
    assert shed.retry_after_s == math.ceil((9 - 4 + 1) / 2.0)


def test_the_message_names_the_pool_the_budget_and_the_retry() -> None:
    text = message("prefill", "demo-prefill.ns.svc:8000", Shed(9, 4, 2.0, 3), 30.0)
    assert text == (
        "prefill pool (demo-prefill.ns.svc:8000) is full: 9 requests in flight, more than it "
        "starts within --pool-queue-s 30 s at its measured 2.00 requests/s; retry after 3 s"
    )
