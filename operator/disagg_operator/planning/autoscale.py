"""The SLO planner: demand and measured pool profiles in, replicas per role and why out.

Part of planning (no clock, no Prometheus: the controller passes ``now`` and the demand it
read). Each role is sized from its own pool's :class:`Profile` (what ``disagg bench
profile`` measured of one pod), so a GPU prefill pool and a CPU decode pool are each sized
by what one of their pods does. Demand is a token rate for both roles because sequences in
flight grow with the ITL the sizing causes, and so oscillate. One pass (forecast, per pod,
need, hysteresis, reserve, bounds): docs/autoscaling.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from disagg_operator.api import Autoscaling

ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class Curve:
    """Measured (load, latency) points of one pod, load rising."""

    points: tuple[tuple[float, float], ...]

    def load_at(self, latency: float) -> float:
        """The most load whose latency stays within ``latency`` (linear between points;
        the last point's load when all are within it; 0 when none is)."""
        best = 0.0
        for (l0, t0), (l1, t1) in zip(self.points, self.points[1:], strict=False):
            if t1 <= latency:
                best = l1
            elif t0 <= latency < t1:
                return l0 + (l1 - l0) * (latency - t0) / (t1 - t0)
        if self.points and self.points[0][1] <= latency:
            best = max(best, self.points[0][0])
        return best

    def latency_at(self, load: float) -> float:
        """The latency at ``load`` (linear between points, extended past the last two)."""
        pts = self.points
        if load <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        for (l0, t0), (l1, t1) in itertools.pairwise(pts):
            if load <= l1:
                return t0 + (t1 - t0) * (load - l0) / (l1 - l0)
        (l0, t0), (l1, t1) = pts[-2], pts[-1]
        return t1 + (t1 - t0) * (load - l1) / (l1 - l0)


@dataclass(frozen=True)
class Profile:
    """One pod of a pool, measured: its latency curve, KV capacity (decode, sequences;
    None: unbounded by KV), start-up seconds (created → serving) and, for decode, the
    most output tokens/s it gave (an engine without continuous batching keeps its ITL
    flat and queues: its limit shows there, not in the curve)."""

    curve: Curve
    start_s: float
    capacity: float | None = None
    max_tokens_per_s: float | None = None  # decode: the most output it gave (measured)

    def per_pod(self, target: float, headroom: float, tokens: bool) -> float:
        """One pod's share at ``target``, times ``headroom``: the load (prefill: prompt
        tokens/s), or with ``tokens`` the output tokens/s the sequences it may hold give
        (decode: sequences within the target and KV capacity over their ITL)."""
        load = self.curve.load_at(target)
        if self.capacity is not None:
            load = min(load, self.capacity)
        if tokens:
            given = load / self.curve.latency_at(load) if load > 0 else 0.0
            if self.max_tokens_per_s is not None:
                given = min(given, self.max_tokens_per_s)
            return headroom * given
        return headroom * load


@dataclass(frozen=True)
class Targets:
    ttft_s: float
    itl_s: float


@dataclass(frozen=True)
class Limits:
    """Per role (min, max); prefill per decode (min, max); a budget in pods, or in cost
    with ``cost`` per pod per role (None: none)."""

    replicas: Mapping[str, tuple[int, int]]
    ratio: tuple[float, float] = (0.0, math.inf)
    pods: int | None = None
    cost: Mapping[str, float] | None = None
    max_cost: float | None = None


@dataclass(frozen=True)
class Demand:
    """What the pools are asked at time ``at``: prompt tokens/s (prefill) and output
    tokens/s (decode)."""

    at: float
    prompt_tokens_per_s: float
    output_tokens_per_s: float

    def of(self, role: str) -> float:
        return self.prompt_tokens_per_s if role == "prefill" else self.output_tokens_per_s


@dataclass(frozen=True)
class Settings:
    trend_s: float = 60.0
    smooth_s: float = 15.0
    scale_down_s: float = 300.0
    scale_up_s: float = 0.0  # a role grows only to the smallest need of this window
    headroom: float = 0.9
    max_down: int = 10**9  # a role shrinks by at most this many pods a pass (each drains first)
    reserve: float = 0.0  # a role keeps this share of its largest need of reserve_window_s
    reserve_window_s: float = 3600.0


@dataclass
class Memory:
    """What the planner keeps between passes: each pass's (time, needs)."""

    needs: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    since: float | None = None  # the first pass
    # the largest need per role of each minute within the reserve's window
    peaks: dict[int, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    replicas: dict[str, int]
    needs: dict[str, int]  # before hysteresis and bounds
    forecast: dict[str, float]
    reason: str  # one CamelCase word
    message: str


def forecast(
    history: Sequence[Demand], role: str, now: float, ahead: float, trend_s: float, smooth_s: float
) -> float:
    """The demand ``ahead`` seconds from ``now``: the latest (its mean over ``smooth_s``:
    arrivals are noisy), or where its trend leads, the higher. The trend is the change
    between that mean and the mean over the ``smooth_s`` that ended ``trend_s`` ago (two
    means: one noisy second does not tilt it), carried ``ahead``."""

    def mean(start: float, end: float) -> float | None:
        values = [d.of(role) for d in history if start < d.at <= end]
        return sum(values) / len(values) if values else None

    latest = mean(now - smooth_s, now)
    if latest is None:
        return history[-1].of(role) if history else 0.0
    before = mean(now - trend_s - smooth_s, now - trend_s)
    if before is None:
        return latest
    slope = (latest - before) / trend_s
    return max(latest, latest + slope * ahead)


class Policy(NamedTuple):
    """What one deployment asks of the planner (:func:`from_spec`): its targets, its
    bounds and its windows."""

    targets: Targets
    limits: Limits
    settings: Settings = Settings()


def plan(
    history: Sequence[Demand],
    profiles: Mapping[str, Profile],
    policy: Policy,
    current: Mapping[str, int],
    memory: Memory,
    now: float,
) -> Decision:
    """This pass's replicas per role under ``policy`` (docs/autoscaling.md, "One pass":
    forecast one start-up ahead, per pod at target, need, hysteresis, reserve, bounds);
    ``memory`` is updated."""
    targets, limits, settings = policy
    target = {"prefill": targets.ttft_s, "decode": targets.itl_s}
    ahead: dict[str, float] = {}
    needs: dict[str, int] = {}
    for role in ROLES:
        p = profiles[role]
        ahead[role] = forecast(history, role, now, p.start_s, settings.trend_s, settings.smooth_s)
        per_pod = p.per_pod(target[role], settings.headroom, tokens=role == "decode")
        low = limits.replicas[role][0]
        needs[role] = low if per_pod <= 0 else max(low, math.ceil(ahead[role] / per_pod))
    if memory.since is None:
        memory.since = now
    kept_s = max(settings.scale_down_s, settings.scale_up_s)
    memory.needs = [(t, n) for t, n in memory.needs if t >= now - kept_s]
    memory.needs.append((now, dict(needs)))
    seen_enough = now - memory.since >= settings.scale_down_s
    out, why = {}, "Steady"
    for role in ROLES:
        have = current.get(role, 0)
        if needs[role] >= have:
            recent = [n[role] for t, n in memory.needs if t >= now - settings.scale_up_s]
            out[role] = max(have, min(recent))
            why = "ScaleUp" if out[role] > have else why
        elif not seen_enough:  # no window of needs yet (a restart): nothing goes
            out[role] = have
        else:
            kept = max(n[role] for _, n in memory.needs)
            out[role] = max(kept, have - settings.max_down)
            why = "ScaleDown" if out[role] < have and why == "Steady" else why
    for role, floor in _reserve(needs, memory, now, settings).items():
        if out[role] < floor:
            out[role], why = floor, "Reserve"
    out, bound = _bounded(out, needs, limits)
    reason = bound or why
    return Decision(out, needs, ahead, reason, _message(reason, out, needs, ahead, targets))


def _reserve(
    needs: Mapping[str, int], memory: Memory, now: float, settings: Settings
) -> dict[str, int]:
    """Each role's floor from the reserve (step 5; none without one): ``reserve`` of its
    largest need within the window, kept as one maximum per minute."""
    minute = int(now // 60)
    kept = memory.peaks.setdefault(minute, dict(needs))
    for role in ROLES:
        kept[role] = max(kept[role], needs[role])
    oldest = int((now - settings.reserve_window_s) // 60)
    for m in [m for m in memory.peaks if m < oldest]:
        del memory.peaks[m]
    if settings.reserve <= 0:
        return {}
    return {
        r: math.ceil(settings.reserve * max(p[r] for p in memory.peaks.values()) - 1e-9)
        for r in ROLES
    }


def _bounded(
    want: dict[str, int], needs: Mapping[str, int], limits: Limits
) -> tuple[dict[str, int], str | None]:
    out, bound = dict(want), None
    for role in ROLES:
        low, high = limits.replicas[role]
        if out[role] > high:
            out[role], bound = high, "AtMaximum"
        out[role] = max(low, out[role])
    rmin, rmax = limits.ratio
    p, d = out["prefill"], out["decode"]
    if p < rmin * d:
        out["prefill"], bound = (
            min(limits.replicas["prefill"][1], math.ceil(rmin * d)),
            "RatioBound",
        )
    elif rmax < math.inf and p > rmax * d:
        out["decode"], bound = min(limits.replicas["decode"][1], math.ceil(p / rmax)), "RatioBound"
    while _over_budget(out, limits):
        spare = [r for r in ROLES if out[r] > limits.replicas[r][0]]
        if not spare:
            break
        role = max(spare, key=lambda r: out[r] - needs[r])  # most above its need goes first
        out[role] -= 1
        bound = "BudgetLimited"
    return out, bound


def _over_budget(out: Mapping[str, int], limits: Limits) -> bool:
    if limits.pods is not None and sum(out.values()) > limits.pods:
        return True
    if limits.cost is not None and limits.max_cost is not None:
        return sum(out[r] * limits.cost[r] for r in ROLES) > limits.max_cost + 1e-9
    return False


def _message(
    reason: str,
    out: Mapping[str, int],
    needs: Mapping[str, int],
    ahead: Mapping[str, float],
    targets: Targets,
) -> str:
    return (
        f"{reason}: prefill {out['prefill']} (needs {needs['prefill']} for "
        f"{ahead['prefill']:.0f} prompt tokens/s at TTFT {targets.ttft_s:g} s), decode "
        f"{out['decode']} (needs {needs['decode']} for {ahead['decode']:.0f} output tokens/s "
        f"at ITL {targets.itl_s * 1000:g} ms)"
    )


def profiles_from(data: Mapping[str, object]) -> dict[str, Profile]:
    """The pools' profiles from what ``disagg bench profile --out`` wrote (parsed JSON);
    ValueError names the field that is missing or wrong."""
    out: dict[str, Profile] = {}
    for role in ROLES:
        part = data.get(role)
        if not isinstance(part, Mapping):
            raise ValueError(f"{role}: missing; the file disagg bench profile --out writes has it")
        try:
            points = tuple((float(a), float(b)) for a, b in part["curve"])
            start = float(part["start_s"])
            capacity, most = part.get("capacity"), part.get("max_tokens_per_s")
            out[role] = Profile(
                Curve(points),
                start,
                None if capacity is None else float(capacity),
                None if most is None else float(most),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"{role}.curve and {role}.start_s: want [[load, latency_s], ...] and seconds "
                f"({e.__class__.__name__}: {e})"
            ) from None
        if not points or any(b <= a for (a, _), (b, _) in itertools.pairwise(points)):
            raise ValueError(f"{role}.curve: want at least one point, load rising")
    return out


def percentile_of(data: Mapping[str, object]) -> int:
    """The percentile a profile's latencies are at (90 when the file does not say)."""
    value = data.get("percentile", 90)
    return int(value) if isinstance(value, (int, float)) else 90


def with_queue(served: float, waiting: float, requests_per_s: float, window_s: float) -> float:
    """A role's demand in tokens/s: what it served, plus its queue's tokens (``waiting``
    requests of the mean size served, ``served / requests_per_s`` each) over ``window_s``
    (the forecast's mean: a queue that stays adds them at every pass). A saturated pool
    serves no more than it can, so its served rate alone never shows a demand above its
    capacity, only creeps up to it."""
    if waiting <= 0 or requests_per_s <= 0 or served <= 0:
        return served
    return served + waiting * (served / requests_per_s) / window_s


def from_spec(auto: Autoscaling) -> Policy:
    """What ``spec.autoscaling`` asks of the planner: targets, bounds and windows."""
    targets = Targets(auto.targets.ttft_milliseconds / 1e3, auto.targets.itl_milliseconds / 1e3)
    bounds = {"prefill": auto.prefill, "decode": auto.decode}
    ratio = auto.prefill_per_decode
    budget = auto.budget
    costs = {r: b.cost for r, b in bounds.items()}
    limits = Limits(
        replicas={r: (b.min_replicas, b.max_replicas) for r, b in bounds.items()},
        ratio=(ratio.min_ratio, math.inf if ratio.max_ratio is None else ratio.max_ratio),
        pods=None if budget is None else budget.pods,
        cost=None if None in costs.values() else {r: float(c or 0) for r, c in costs.items()},
        max_cost=None if budget is None else budget.cost,
    )
    settings = Settings(
        smooth_s=2.0 * auto.period_seconds,  # the bench's planner: every 5 s over 10 s
        scale_down_s=float(auto.scale_down_seconds),
        scale_up_s=float(auto.scale_up_seconds),
        reserve=auto.reserve_percent / 100,
        reserve_window_s=float(auto.reserve_window_seconds),
    )
    return Policy(targets, limits, settings)
