"""Figures of `disagg bench flood` from what its clients, canaries and metric readings
recorded: what the clients got, when the transfer canary passed again after the flood,
how long the engines kept working once nobody waited, and the cancels the workers counted.

Records in, figures out; :mod:`disagg_tools.bench.flood` does the I/O. Times are seconds
on one monotonic clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_tools.bench.rules import verdicts

NO_ANSWER = 0  # a request's status when no HTTP answer came (refused, reset, timed out)

# every figure, in the order the table lists them
KEYS = (
    "requests",
    "answered",
    "shed_503",
    "other_503",
    "timed_out_504",
    "other_failed",
    "statuses",
    "proxy_shed",
    "last_answer_after_end_s",
    "canary_busy_during_flood",
    "canary_pass_after_end_s",
    "prefill_busy_after_last_answer_s",
    "decode_busy_after_last_answer_s",
    "cancelled",
    "cancel_stop_ms_mean",
)

CANARY_TARGET_S = 30.0
BUSY_TARGET_S = 3.0  # the step in flight at a cancel runs out: one 2000-token prompt here

TARGETS: dict[str, Any] = {
    "canary_pass_after_end_s": f"<= {CANARY_TARGET_S:g}",
    "prefill_busy_after_last_answer_s": f"<= {BUSY_TARGET_S:g} (one step)",
    "decode_busy_after_last_answer_s": f"<= {BUSY_TARGET_S:g} (one step)",
}

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "canary_pass_after_end_s": lambda s: s <= CANARY_TARGET_S,
    "prefill_busy_after_last_answer_s": lambda s: s <= BUSY_TARGET_S,
    "decode_busy_after_last_answer_s": lambda s: s <= BUSY_TARGET_S,
}


@dataclass(frozen=True)
class Answer:
    """One flood request: when it went and ended, its status, and whether the proxy shed
    it (a 503 whose error names a full pool) rather than a worker refusing it."""

    start: float
    end: float
    status: int
    shed: bool = False


@dataclass(frozen=True)
class CanaryRun:
    """One transfer canary: when it started and ended, and its problem (None: passed)."""

    start: float
    end: float
    problem: str | None

    @property
    def passed(self) -> bool:
        return self.problem is None


def client_figures(answers: Sequence[Answer], flood_end: float) -> dict[str, Any]:
    """What the clients got, and when the last of them had its answer."""
    statuses = Counter(a.status for a in answers)
    shed = sum(a.shed for a in answers)
    last = max((a.end for a in answers), default=flood_end)
    return {
        "requests": len(answers),
        "answered": statuses[200],
        "shed_503": shed,
        "other_503": statuses[503] - shed,
        "timed_out_504": statuses[504],
        "other_failed": sum(n for s, n in statuses.items() if s not in (200, 503, 504)),
        "statuses": {_status_key(s): statuses[s] for s in sorted(statuses)},
        "last_answer_after_end_s": round(max(0.0, last - flood_end), 2),
    }


def canary_figures(runs: Sequence[CanaryRun], flood_end: float) -> dict[str, Any]:
    """How many canaries failed PrefillBusy while the flood ran, and how long after its
    end the first canary that passed ended (None: none passed)."""
    busy = sum(
        1 for r in runs if r.start < flood_end and r.problem and r.problem.startswith("PrefillBusy")
    )
    passed = [r.end for r in runs if r.passed and r.end >= flood_end]
    return {
        "canary_busy_during_flood": busy,
        "canary_pass_after_end_s": round(min(passed) - flood_end, 2) if passed else None,
    }


def busy_after(samples: Sequence[tuple[float, bool]], since: float) -> float | None:
    """Seconds from ``since`` until the first sample (time, busy) at or after it that
    found the engine idle; None: never idle while sampled."""
    for at, busy in samples:
        if at >= since and not busy:
            return round(at - since, 2)
    return None


def stop_ms_mean(total_s: float, count: float) -> float | None:
    """The mean of a cancel-to-let-go summary (its _sum and _count deltas) in ms."""
    return round(total_s / count * 1000.0, 1) if count else None


def met(figures: dict[str, Any]) -> dict[str, bool | None]:
    """Per target: met, missed, or None when its figure was not measured."""
    return {
        key: None if figures.get(key) is None else bool(check(figures[key]))
        for key, check in _CHECKS.items()
    }


def report_rows(figures: dict[str, Any]) -> list[dict[str, str]]:
    """The table: one row per number with its target and verdict (counts by status or
    kind go in :func:`report_counts`)."""
    return verdicts.rows(figures, KEYS, TARGETS, met(figures), missing="-", unmeasured_rows=True)


def report_counts(figures: dict[str, Any]) -> list[str]:
    """``key: k v, ...`` for each figure that is a count by status or kind."""
    return verdicts.counts(figures, KEYS, empty="none")


def _status_key(status: int) -> str:
    return "no_answer" if status == NO_ANSWER else str(status)
