"""The policies the autoscaling benchmark compares, each deciding pod counts from what the
fleet showed so far.

Every policy acts every ``period_s`` on the fleet's :class:`Step` history and the current
counts: :class:`Static`, :class:`Hpa`, :class:`Saturation` and :class:`Planner` (ours, as
the operator runs it). :class:`Ideal` bounds what any reactive policy can reach: on a trace
whose on/off sojourns are memoryless nothing predicts a burst better than the state now,
so only its reserve is left to choose. docs/autoscaling.md (The benchmark).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from disagg_operator.planning import autoscale
from disagg_operator.planning.autoscale import ROLES
from disagg_tools.bench.autoscale.rules.fleet import Step
from disagg_tools.bench.autoscale.rules.traces import AZURE_CONV_2023


def grown(have: int) -> int:
    """The most an HPA grows a target in one period by default: 100% or 4 pods, the more
    (its default scale-up policies)."""
    return have + max(have, 4)


@dataclass
class Static:
    """Fixed counts (the cheapest that meet the SLO at the trace's peak:
    :func:`cheapest_static`)."""

    counts: dict[str, int]
    period_s: float = 1e9
    name: str = "static"

    def decide(
        self, history: Sequence[Step], current: dict[str, int], now: float
    ) -> dict[str, int]:
        return dict(self.counts)


@dataclass
class Hpa:
    """Our KEDA/HPA example (examples/autoscaling): decode on the sum of
    ``vllm:num_requests_waiting`` over a threshold of 4 per pod, prefill following at 0.5
    per decode (``perDecode``, without the example's small maximum), HPA's 10% tolerance,
    300 s scale-down stabilisation and default scale-up policies (100% or 4 pods per
    period), every 15 s."""

    threshold: float = 4.0
    ratio: float = 0.5
    bounds: tuple[int, int] = (1, 10**6)
    down_s: float = 300.0
    period_s: float = 15.0
    name: str = "hpa-queue"
    _wanted: list[tuple[float, int]] = field(default_factory=list)

    def decide(
        self, history: Sequence[Step], current: dict[str, int], now: float
    ) -> dict[str, int]:
        waiting = history[-1].decode_waiting if history else 0.0
        have = max(1, current["decode"])
        if not self._wanted:  # HPA's window starts with the replicas it found
            self._wanted.append((now, have))
        wanted = math.ceil(waiting / self.threshold)
        if abs(waiting / have / self.threshold - 1) <= 0.1:  # HPA's tolerance
            wanted = have
        self._wanted = [(t, w) for t, w in self._wanted if t >= now - self.down_s] + [(now, wanted)]
        decode = wanted if wanted >= have else max(w for _, w in self._wanted)
        decode = min(self.bounds[1], max(self.bounds[0], min(decode, grown(have))))
        return {"prefill": max(1, math.ceil(decode * self.ratio)), "decode": decode}


@dataclass
class Saturation:
    """Each role on its own saturation, as llm-d's workload-variant-autoscaler does: up when
    prefill's utilisation (offered tokens and backlog over what its pods clear) or decode's
    KV usage passes 0.8, to bring it to 0.8 (at most HPA's default step), down when below
    0.5 for 300 s; against all its pods, starting ones included (capacity on its way, so a
    pod asked for is not asked for again every period)."""

    profiles: dict[str, autoscale.Profile]
    up: float = 0.8
    down: float = 0.5
    cooldown_s: float = 300.0
    period_s: float = 15.0
    name: str = "saturation"
    _low_since: dict[str, float] = field(default_factory=dict)

    def decide(
        self, history: Sequence[Step], current: dict[str, int], now: float
    ) -> dict[str, int]:
        if not history:
            return dict(current)
        last = history[-1]
        rate = self.profiles["prefill"].curve.points[-1][0] * max(1, current["prefill"])
        slots = (self.profiles["decode"].capacity or math.inf) * max(1, current["decode"])
        offered = last.prompt_tokens_per_s + last.prefill_backlog_tokens
        used = {"prefill": offered / rate, "decode": last.decode_sequences / slots}
        out = {}
        for role in ROLES:
            have, u = max(1, current[role]), used[role]
            if u > self.up:
                out[role] = min(grown(have), math.ceil(have * u / self.up))
                self._low_since.pop(role, None)
            elif u < self.down:
                since = self._low_since.setdefault(role, now)
                middle = (self.up + self.down) / 2
                cooled = now - since >= self.cooldown_s
                out[role] = max(1, math.ceil(have * u / middle)) if cooled else have
            else:
                out[role] = have
                self._low_since.pop(role, None)
        return out


@dataclass
class Planner:
    """:func:`disagg_operator.planning.autoscale.plan` on the demand the fleet shows and the
    pools' profiles, with the settings a ``spec.autoscaling`` gives it (``from_spec``); the
    demand is what the operator reads: each role's tokens/s plus its queue's tokens over the
    forecast's mean (``with_queue``)."""

    profiles: dict[str, autoscale.Profile]
    targets: autoscale.Targets
    limits: autoscale.Limits
    settings: autoscale.Settings = field(default_factory=lambda: autoscale.Settings(smooth_s=10.0))
    period_s: float = 5.0  # Dynamo's planner runs its load mode every 5 s too
    output_mean: float = AZURE_CONV_2023.output_mean  # a waiting request's decode tokens
    name: str = "planner"
    memory: autoscale.Memory = field(default_factory=autoscale.Memory)

    def decide(
        self, history: Sequence[Step], current: dict[str, int], now: float
    ) -> dict[str, int]:
        window = [s for s in history if s.t >= now - self.settings.trend_s]
        queued = self.settings.smooth_s  # a queue's tokens count over the forecast's mean
        demand = [
            autoscale.Demand(
                s.t,
                s.prompt_tokens_per_s + s.prefill_backlog_tokens / queued,
                s.output_tokens_per_s + s.decode_waiting * self.output_mean / queued,
            )
            for s in window
        ]
        policy = autoscale.Policy(self.targets, self.limits, self.settings)
        decision = autoscale.plan(demand, self.profiles, policy, current, self.memory, now)
        return decision.replicas


@dataclass
class Ideal:
    """The reactive bound, a policy nobody can run: each role at ``need(rate(now))`` pods
    over ``headroom``, from the trace's true rate every second (no measurement, smoothing
    or hysteresis), never below ``floor``, the reserve (docs/autoscaling.md)."""

    rate: Callable[[float], float]
    need: Callable[[float], dict[str, float]]  # pods per role at a rate, fractional
    floor: dict[str, int]
    headroom: float = 0.9
    period_s: float = 1.0
    name: str = "ideal"

    def decide(
        self, history: Sequence[Step], current: dict[str, int], now: float
    ) -> dict[str, int]:
        need = self.need(self.rate(now))
        return {r: max(self.floor[r], math.ceil(need[r] / self.headroom)) for r in ROLES}
