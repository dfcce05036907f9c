"""The drain's idle test over a /debug/blocks report."""

from __future__ import annotations

import pytest

from disagg_worker.serve import drain


def test_idle_report() -> None:
    assert drain.idle({"used": 0, "free": 8, "held": {}, "waiting": 0})


@pytest.mark.parametrize(
    "report",
    [
        {"used": 3, "free": 5, "held": {"r1": 3}, "waiting": 0},
        {"used": 2, "free": 6, "held": {}, "waiting": 0},  # a request in flight
        {"used": 0, "free": 8, "held": {}, "waiting": 1},
        {"free": 8},  # not a report this drain understands: keep waiting
    ],
)
def test_busy_reports(report: dict[str, object]) -> None:
    assert not drain.idle(report)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_idle_returns_when_the_worker_is_idle() -> None:
    clock = _Clock()
    busy = {"used": 1, "held": {"r": 1}, "waiting": 0}
    reports = iter([busy, busy, {"used": 0, "held": {}, "waiting": 0}])
    drained, last = drain.wait_idle(lambda: next(reports), 10, 1, clock, clock.sleep)
    assert drained and last == {"used": 0, "held": {}, "waiting": 0}
    assert clock.now == 2


def test_wait_idle_stops_at_the_timeout() -> None:
    clock = _Clock()
    busy = {"used": 1, "held": {"r": 1}, "waiting": 0}
    drained, last = drain.wait_idle(lambda: busy, 2.5, 1, clock, clock.sleep)
    assert not drained and last == busy
    assert clock.now == 2.5


def test_a_worker_that_does_not_answer_is_drained() -> None:
    assert drain.wait_idle(lambda: None, 10, 1) == (True, None)
