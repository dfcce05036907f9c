"""Figures of `disagg bench e2e --routing threshold` from its probes, and the order the
probes go out in. The figures: each router's spread per prompt length, every
threshold-router probe judged against the path it took, the break-even length.

A probe is one streamed request (:mod:`.stream`) of ``MIN_TOKENS`` or more generated
tokens; its path is what the router's stream headers say (``X-Disagg-Path``). Times are
seconds on one monotonic clock; latencies are milliseconds.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_tools.bench.rules.spread import spread

PATHS = ("decode", "pd")
TOLERANCE = 0.10  # the target: a threshold probe within 10% of the router of its path
REQUESTS = "disagg_proxy_requests_total{"


@dataclass(frozen=True)
class Probe:
    """One streamed request through a router: when it went and came back, its first and
    last token (ms from the send), tokens received, and the path the router counted."""

    start: float
    end: float
    ttft_ms: float
    ttlt_ms: float
    tokens: int
    path: str


def interleaved(names: Sequence[str], repeat: int) -> list[str]:
    """``repeat`` rounds of ``names``, each round in the next of their orders: each name
    follows each other equally often (a P/D request leaves work behind on both workers
    that slows whatever comes next, and this host drifts)."""
    orders = itertools.cycle(itertools.permutations(names))
    return [name for _ in range(repeat) for name in next(orders)]


def worst_during(done: Sequence[tuple[float, float, float]], t0: float, t1: float) -> float:
    """The slowest load request, of ``done`` (start, end, ms), in flight at some moment of
    [t0, t1]; 0 when none was."""
    return max((ms for s, e, ms in done if s < t1 and e > t0), default=0.0)


def router_paths(metrics_text: str) -> dict[str, int]:
    """Requests a router has answered by path, from its ``/metrics`` page (summed over
    routing reasons)."""
    out = dict.fromkeys(PATHS, 0)
    for line in metrics_text.splitlines():
        if not line.startswith(REQUESTS):
            continue
        labels, _, value = line.rpartition(" ")
        path = labels.split('path="', 1)[1].split('"', 1)[0]
        out[path] = out.get(path, 0) + int(float(value))
    return out


def router_figures(name: str, probes: Sequence[Probe], worst: Sequence[float]) -> dict[str, Any]:
    """One router's spreads at one length: TTFT, time to last token, and the slowest load
    request each probe overlapped."""
    return {
        f"ttft_{name}_ms": spread([p.ttft_ms for p in probes], 2),
        f"ttlt_{name}_ms": spread([p.ttlt_ms for p in probes], 2),
        f"load_{name}_ms": spread(worst, 2),
    }


def judged(probes: Sequence[Probe], ref: Mapping[str, float]) -> list[dict[str, Any]]:
    """Each threshold probe against ``ref``, the median TTFT of the router of the path it
    took at this length."""
    out = []
    for p in probes:
        ratio = p.ttft_ms / ref[p.path]
        out.append({"path": p.path, "ttft_ms": round(p.ttft_ms, 2), "vs_path": round(ratio, 3),
                    "within_target": ratio <= 1.0 + TOLERANCE})  # fmt: skip
    return out


def case_figures(
    n: int, cut: int, probes: Mapping[str, Sequence[Probe]], worst: Mapping[str, Sequence[float]]
) -> dict[str, Any]:
    """One length through the routers ``decode``, ``pd`` and ``threshold`` (at ``cut``
    tokens): their spreads, every threshold probe's path counted and judged, and the
    threshold router's median against the faster of the other two (``vs_best``)."""
    case: dict[str, Any] = {"prompt_tokens": n, "threshold_tokens": cut}
    for name, done in probes.items():
        case.update(router_figures(name, done, worst[name]))
    ref = {path: case[f"ttft_{path}_ms"]["median"] for path in PATHS}
    mine = probes["threshold"]
    counts = dict.fromkeys(PATHS, 0)
    for p in mine:
        counts[p.path] += 1
    expected = "decode" if n < cut else "pd"
    each = judged(mine, ref)
    best = min(ref.values())
    case.update(
        expected_path=expected,
        path_counts=counts,
        misrouted=len(mine) - counts[expected],
        vs_best=round(case["ttft_threshold_ms"]["median"] / best, 3),
        vs_path=round(statistics.median(p["vs_path"] for p in each), 3),
        within_target=sum(p["within_target"] for p in each),
        probes=len(each),
        stream_tokens=min(p.tokens for done in probes.values() for p in done),
        threshold_probes=each,
    )
    return case


def crossover(figures: Mapping[int, Mapping[str, Mapping[str, float]]]) -> int | None:
    """The break-even length: the shortest at which P/D's median TTFT is at most decode
    alone's at that same length, and at every longer length measured; None when P/D is
    slower at the longest."""
    found = None
    for n in sorted(figures, reverse=True):
        f = figures[n]
        if f["ttft_pd_ms"]["median"] > f["ttft_decode_ms"]["median"]:
            break
        found = n
    return found
