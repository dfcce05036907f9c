"""A P/D fleet as a fluid model, one step at a time: what a policy's pod counts give.

Each role is a count of pods, each serving ``start_s`` after it was asked for and billed
from then on; its latency comes from its pool's measured
:class:`~disagg_operator.planning.autoscale.Profile` at the load one serving pod carries,
so a policy is judged against the same curves the planner sizes by. The figures a policy
reads each step are in :class:`Step`. The model's rules: docs/autoscaling.md (the fleet
model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

from disagg_operator.planning.autoscale import ROLES, Profile, Targets
from disagg_tools.bench.autoscale.rules.traces import Lengths

SUSTAINED_S = 10.0  # the window a profile's sustained load stands for
BUCKETS = tuple(NormalDist().inv_cdf((i + 0.5) / 4) for i in range(4))  # output quantiles


@dataclass
class Pods:
    """One role's pods: the time each serves from (asked for + start-up)."""

    start_s: float
    ready_at: list[float] = field(default_factory=list)

    def serving(self, now: float) -> int:
        return sum(1 for t in self.ready_at if t <= now)

    @property
    def count(self) -> int:
        return len(self.ready_at)

    def resize(self, wanted: int, now: float) -> None:
        """Grow by pods that serve after their start-up; shrink starting pods first (the
        newest), then serving ones (drained: their sequences continue on the others)."""
        if wanted > self.count:
            self.ready_at += [now + self.start_s] * (wanted - self.count)
        else:
            self.ready_at = sorted(self.ready_at)[: max(0, wanted)]


@dataclass(frozen=True)
class Step:
    """What one step gave and what a policy can read after it."""

    t: float
    arrived: int
    met: int
    failed: int
    ttft_s: float
    itl_s: float
    prompt_tokens_per_s: float  # offered this step
    decode_sequences: float  # decoding or waiting for a slot
    output_tokens_per_s: float  # the output the step's requests will ask of decode
    prefill_utilisation: float  # offered (with the backlog) / what serving pods clear
    prefill_backlog_tokens: float  # prompt tokens waiting to be computed
    kv_usage: float  # sequences decoding / serving pods' KV capacity
    decode_waiting: float  # requests waiting for a decode slot (vLLM's num_requests_waiting)
    pods: dict[str, int]


class Fleet:
    """The fluid P/D fleet (module docstring)."""

    def __init__(
        self,
        profiles: dict[str, Profile],
        lengths: Lengths,
        targets: Targets,
        *,
        timeout_s: float = 60.0,
        dt: float = 1.0,
    ) -> None:
        self.profiles, self.lengths, self.targets = profiles, lengths, targets
        self.timeout_s, self.dt = timeout_s, dt
        self.pods = {r: Pods(profiles[r].start_s) for r in ROLES}
        self.backlog = 0.0  # prompt tokens not yet computed
        self.sustained = 0.0  # prompt tokens/s over the last SUSTAINED_S (moving average)
        self.waiting = 0.0  # requests computed, waiting for a decode slot
        # (sequences, decoding from, decoding until)
        self.cohorts: list[tuple[float, float, float]] = []
        self.pod_seconds = 0.0
        self.scale_events = 0

    def resize(self, wanted: dict[str, int], now: float) -> None:
        for role in ROLES:
            if wanted[role] != self.pods[role].count:
                self.scale_events += 1
                self.pods[role].resize(wanted[role], now)

    def step(self, now: float, arrived: int) -> Step:
        dt, lengths = self.dt, self.lengths
        prefill, decode = self.profiles["prefill"], self.profiles["decode"]
        serving = {r: self.pods[r].serving(now) for r in ROLES}
        self.pod_seconds += sum(p.count for p in self.pods.values()) * dt
        # prefill: the backlog cleared at the serving pods' saturation rate
        offered = arrived * lengths.prompt_mean
        # the curve is the TTFT percentile at a *sustained* load (the short-term swings of
        # Poisson arrivals are inside it): read it at the load of the last seconds
        weight = 1 - math.exp(-dt / SUSTAINED_S)
        self.sustained += weight * (offered / dt - self.sustained)
        rate = serving["prefill"] * prefill.curve.points[-1][0]
        ahead = (self.backlog / rate) if rate else math.inf
        load = min(self.sustained, rate) / serving["prefill"] if serving["prefill"] else math.inf
        in_pod = prefill.curve.latency_at(load) if math.isfinite(load) else math.inf
        # decode: sequences ending now leave, waiting ones start while slots are free
        # sequences in flight over the last step, time-weighted: a cohort shorter than a
        # step still held its pod for part of it (Little's law, not a snapshot)
        self.cohorts = [(n, t0, end) for n, t0, end in self.cohorts if end > now - dt]
        active = sum(n * max(0.0, min(end, now) - max(t0, now - dt)) / dt
                     for n, t0, end in self.cohorts)  # fmt: skip
        slots = serving["decode"] * (decode.capacity or math.inf)
        per_pod = active / serving["decode"] if serving["decode"] else math.inf
        itl = decode.curve.latency_at(per_pod) if math.isfinite(per_pod) else math.inf
        if decode.max_tokens_per_s and math.isfinite(per_pod):
            # a pod gives at most that many tokens/s, shared by its sequences (an engine
            # that decodes one at a time keeps its measured ITL flat and queues the rest)
            itl = max(itl, per_pod / decode.max_tokens_per_s)
        ending = sum(n / max(end - now, dt) for n, _, end in self.cohorts if end > now)
        slot_wait = self.waiting / ending if self.waiting and ending else 0.0
        if self.waiting and not ending:
            slot_wait = math.inf
        ttft = ahead + in_pod + slot_wait
        failed = arrived if ttft > self.timeout_s else 0
        if not failed:
            self.backlog += offered
        done_tokens = min(self.backlog, rate * dt)
        self.backlog -= done_tokens
        self.waiting += done_tokens / lengths.prompt_mean
        start = min(self.waiting, max(0.0, slots - active))
        if start > 0 and math.isfinite(itl):
            self.waiting -= start
            for z in BUCKETS:
                out = min(lengths.cap, lengths.output_median * math.exp(lengths.output_sigma * z))
                self.cohorts.append((start / len(BUCKETS), now, now + out * itl))
        met = (
            arrived
            if not failed and ttft <= self.targets.ttft_s and itl <= self.targets.itl_s
            else 0
        )
        usage = active / slots if slots and math.isfinite(slots) else (0.0 if not active else 1.0)
        return Step(
            t=now,
            arrived=arrived,
            met=met,
            failed=failed,
            ttft_s=ttft,
            itl_s=itl,
            prompt_tokens_per_s=offered / dt,
            decode_sequences=active + self.waiting,
            output_tokens_per_s=arrived * lengths.output_mean / dt,
            prefill_utilisation=(offered / dt + self.backlog / dt) / rate if rate else math.inf,
            prefill_backlog_tokens=self.backlog,
            kv_usage=usage,
            decode_waiting=self.waiting,
            pods={r: self.pods[r].count for r in ROLES},
        )
