"""The figures of `disagg bench pods`, from what it measured: per prompt length and run, the
streamed TTFT's spread, the KV bytes and NIXL transfer time the decode workers counted for
each request, the transfer's rate, and that rate against the path's iperf3 limits. A
transfer is decode's READ, or a push (the prefill's WRITE, timed by decode from its ask to
the WRITE's notification); ``pushed`` counts the requests moved by pushes.

Benchmark layer, computes only: :mod:`.pods` makes the requests and runs iperf3, this
reads the decode workers' metrics text and turns samples into figures, so a fixed set of
samples gives known figures. A request's READ is read off the decode workers' counters
around it (``disagg_kv_transfers``, ``_bytes``, and the sums of ``disagg_kv_transfer_post_ms``
and ``disagg_kv_transfer_ms``): a streamed answer carries no transfer figures. A request
during which the workers counted other than one READ (a canary's, a retry) gives no rate.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from disagg_tools.bench.stream import spread

# counter name → the sample that holds it (counters end in _total, histograms' time in _sum)
COUNTERS = {
    "transfers": "disagg_kv_transfers_total",
    "kv_bytes": "disagg_kv_transfer_bytes_total",
    "post_ms": "disagg_kv_transfer_post_ms_sum",
    "wire_ms": "disagg_kv_transfer_ms_sum",
    "pushed": "disagg_kv_pushed_transfers_total",
}
PROCESS = "process"
PODS = "podman"  # the run of the manifest as rendered; variants are "podman:<name>"


def counters(texts: Sequence[str]) -> dict[str, float]:
    """The transfer counters of one or more decode workers' ``/metrics`` texts, summed."""
    wanted = {sample: key for key, sample in COUNTERS.items()}
    out = dict.fromkeys(COUNTERS, 0.0)
    for text in texts:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in wanted:
                    out[wanted[s.name]] += float(s.value)
    return out


@dataclass(frozen=True)
class Sample:
    """One streamed request: its client's times and the READs counted around it."""

    ttft_ms: float
    ttlt_ms: float
    transfers: float
    kv_bytes: float
    post_ms: float  # building and posting the READ (a push: asking until it is posted)
    wire_ms: float  # posted to done
    pushed: float = 0.0  # transfers that were pushes

    @property
    def read_ms(self) -> float:
        return self.post_ms + self.wire_ms

    @property
    def read_gbps(self) -> float | None:
        """bytes / (post + wire): the READ from the moment it is posted; None unless
        exactly one READ was counted."""
        if self.transfers != 1 or self.read_ms <= 0:
            return None
        return self.kv_bytes / self.read_ms / 1e6


def sample(
    ttft_ms: float, ttlt_ms: float, before: Mapping[str, float], after: Mapping[str, float]
) -> Sample:
    """A request's :class:`Sample` from the counters read before and after it."""
    delta = {k: after[k] - before[k] for k in COUNTERS}
    return Sample(ttft_ms, ttlt_ms, **delta)


def case(samples: Sequence[Sample], limits: Mapping[str, float] | None) -> dict[str, Any]:
    """The figures of one run at one prompt length (medians; TTFT with its spread), and
    with the path's iperf3 ``limits`` NIXL's share of each."""
    read = [s for s in samples if s.read_gbps is not None]
    out: dict[str, Any] = {
        "requests": len(samples),
        "ttft_ms": spread([s.ttft_ms for s in samples]),
        "kv_bytes": int(_median([s.kv_bytes for s in read])),
        "nixl_post_ms": round(_median([s.post_ms for s in read]), 3),
        "nixl_wire_ms": round(_median([s.wire_ms for s in read]), 3),
        "nixl_gbps": round(_median([s.read_gbps or 0.0 for s in read]), 3),
        "pushed": sum(1 for s in read if s.pushed == 1),
        "unattributed": len(samples) - len(read),
    }
    if limits:
        for streams in ("single", "multi"):
            limit = limits[f"{streams}_gbps"]
            out[f"nixl_vs_iperf3_{streams}"] = round(out["nixl_gbps"] / limit, 3) if limit else 0
    return out


def limits(measured: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The path's limits over the rounds: the median of each figure, beside its spread."""
    out: dict[str, Any] = {
        "rounds": len(measured),
        "streams": measured[0]["streams"],
        "seconds": measured[0]["seconds"],
    }
    for key in ("single_gbps", "multi_gbps"):
        values = [float(m[key]) for m in measured]
        out[key] = round(_median(values), 3)
        out[key.replace("gbps", "spread")] = spread(values)
    return out


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def by_prompt(
    samples: Mapping[str, Mapping[int, Sequence[Sample]]],
    limits: Mapping[str, Mapping[str, float]],
) -> dict[int, dict[str, Any]]:
    """prompt length → run name → :func:`case`, with ``ttft_ratio``: the pods' median TTFT
    over the processes' (each run of pods has its own in ``ttft_vs_process``)."""
    lengths = sorted({n for per_run in samples.values() for n in per_run})
    out: dict[int, dict[str, Any]] = {}
    for n in lengths:
        row: dict[str, Any] = {
            name: case(per_run[n], limits.get(name)) for name, per_run in samples.items()
        }
        base = row.get(PROCESS, {}).get("ttft_ms", {}).get("median", 0.0)
        for name, figures in row.items():
            if name != PROCESS and base:
                figures["ttft_vs_process"] = round(figures["ttft_ms"]["median"] / base, 3)
        if PODS in row and "ttft_vs_process" in row[PODS]:
            row["ttft_ratio"] = row[PODS]["ttft_vs_process"]
        out[n] = row
    return out
