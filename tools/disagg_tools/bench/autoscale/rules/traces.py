"""Load traces for the autoscaling benchmark: arrival rates over time and request lengths.

Randomness comes in as a seeded ``random.Random``. Lengths are lognormal with the medians
and spreads (sigma of the log) of the Azure LLM inference trace 2023, conversation part
(Patel et al., "Splitwise: Efficient generative LLM inference using phase splitting", ISCA
2024; github.com/Azure/AzurePublicDataset, ``data/AzureLLMInferenceTrace_conv.csv``: 19,366
requests over 58 minutes), computed from that file: context tokens median 1020, sigma 0.985;
generated tokens median 129, sigma 0.859. Three shapes, each scaled to a peak rate:

- ``steady``: Poisson arrivals at the peak rate;
- ``diurnal``: a day compressed into the trace, 4x between trough and peak
  (``rate = peak * (1 + 3 * (1 - cos(2 pi t / T)) / 2) / 4``);
- ``bursty``: Markov-modulated on/off: bursts at the peak rate, 10x the quiet rate,
  lasting 60 s on average, 300 s apart on average (exponential sojourns).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

KINDS = ("steady", "diurnal", "bursty")


@dataclass(frozen=True)
class Lengths:
    """Lognormal prompt and output lengths (median, sigma of the log), capped."""

    prompt_median: float = 1020.0
    prompt_sigma: float = 0.985
    output_median: float = 129.0
    output_sigma: float = 0.859
    cap: int = 8192

    @property
    def prompt_mean(self) -> float:
        return min(self.cap, self.prompt_median * math.exp(self.prompt_sigma**2 / 2))

    @property
    def output_mean(self) -> float:
        return min(self.cap, self.output_median * math.exp(self.output_sigma**2 / 2))


AZURE_CONV_2023 = Lengths()


@dataclass(frozen=True)
class Trace:
    """A rate shape over ``duration_s`` seconds, peaking at ``peak`` requests/s."""

    kind: str
    duration_s: float
    peak: float
    switches: tuple[float, ...] = ()  # bursty: the times the state flips, from quiet

    def rate(self, t: float) -> float:
        if self.kind == "steady":
            return self.peak
        if self.kind == "diurnal":
            return self.peak * (1 + 3 * (1 - math.cos(2 * math.pi * t / self.duration_s)) / 2) / 4
        on = sum(1 for s in self.switches if s <= t) % 2 == 1
        return self.peak if on else self.peak / 10


def make(kind: str, duration_s: float, peak: float, rng: random.Random) -> Trace:
    """A trace of ``kind`` (bursty: its on/off times drawn from ``rng``)."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r}: the traces are {', '.join(KINDS)}")
    switches: list[float] = []
    if kind == "bursty":
        t, on = 0.0, False
        while t < duration_s:
            t += rng.expovariate(1 / (60.0 if on else 300.0))
            switches.append(t)
            on = not on
    return Trace(kind, duration_s, peak, tuple(switches))


def arrivals(rate: float, dt: float, rng: random.Random) -> int:
    """Requests arriving in ``dt`` seconds at ``rate`` (Poisson; normal beyond 50)."""
    mean = rate * dt
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    k, p, threshold = 0, 1.0, math.exp(-mean)
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1
