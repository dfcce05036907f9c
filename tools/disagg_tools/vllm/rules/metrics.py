"""vLLM's own figures: KV transfers from the "KV Transfer metrics" lines it logs, and the
phases of its requests from its ``/metrics`` page.

:func:`parse_line` and :func:`summarize` read the NixlConnector's per-interval log lines;
:func:`histograms` and :func:`mean_ms` read a request-phase histogram (:data:`QUEUE_TIME`,
:data:`PREFILL_TIME`) between two pages. Both are vLLM's own measurements, so a bench
reports what the engine saw rather than what its client timed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping

MARKER = "KV Transfer metrics:"
_FIELD = re.compile(r"\s*([^=,]+?)=([-+0-9.eE]+)\s*(?:,|$)")
COUNT = "Num successful transfers"
FAILED = "Num failed transfers"
EXPIRED = "Num KV expired reqs"
AVERAGES = (
    "Avg xfer time (ms)",
    "Avg post time (ms)",
    "Avg MB per transfer",
    "Avg number of descriptors",
)


# from the engine core taking the request to its first scheduled step: on a P/D decode, the
# wait for the remote KV
QUEUE_TIME = "vllm:request_queue_time_seconds"
# from that step to the first token: on a P/D decode, the one-token step after the read
PREFILL_TIME = "vllm:request_prefill_time_seconds"
PHASES = (QUEUE_TIME, PREFILL_TIME)


def parse_line(line: str) -> dict[str, float] | None:
    """One log line → its figures, or None if it is not a transfer-metrics line. vLLM's
    NixlConnector logs one per engine per stats interval (10 s by default) with the
    transfers finished in it: ``... KV Transfer metrics: Num successful transfers=8, Avg
    xfer time (ms)=0.249, ..., Avg number of descriptors=4.0, Num failed transfers=0, Num KV
    expired reqs=0, ...``."""
    at = line.find(MARKER)
    if at < 0:
        return None
    return {
        m.group(1).strip(): float(m.group(2)) for m in _FIELD.finditer(line[at + len(MARKER) :])
    }


def summarize(lines: Iterable[str]) -> dict[str, float]:
    """The transfer-metrics lines among ``lines``, added up over their intervals (counts
    summed, averages weighted by their interval's transfer count), so a caller can report
    exactly what vLLM measured for a span of requests."""
    total: dict[str, float] = {COUNT: 0.0, FAILED: 0.0, EXPIRED: 0.0}
    weighted = dict.fromkeys(AVERAGES, 0.0)
    p90 = 0.0
    for line in lines:
        figures = parse_line(line)
        if figures is None:
            continue
        n = figures.get(COUNT, 0.0)
        for key in (COUNT, FAILED, EXPIRED):
            total[key] += figures.get(key, 0.0)
        for key in AVERAGES:
            weighted[key] += figures.get(key, 0.0) * n
        if n:
            p90 = max(p90, figures.get("P90 xfer time (ms)", 0.0))
    count = total[COUNT]
    out = dict(total)
    for key in AVERAGES:
        out[key] = weighted[key] / count if count else 0.0
    out["Max P90 xfer time (ms)"] = p90
    return out


def histograms(page: str, names: Iterable[str] = PHASES) -> dict[str, tuple[float, float]]:
    """``name`` → (sum, count) of each histogram on a Prometheus text page, added up over
    its label sets (a missing one is (0, 0))."""
    totals = {name: [0.0, 0.0] for name in names}
    for line in page.splitlines():
        head, _, value = line.rpartition(" ")
        name, _, _ = head.partition("{")
        for suffix, i in (("_sum", 0), ("_count", 1)):
            base = name.removesuffix(suffix)
            if name.endswith(suffix) and base in totals:
                with contextlib.suppress(ValueError):  # not a number: not a sample
                    totals[base][i] += float(value)
    return {name: (s, c) for name, (s, c) in totals.items()}


def counter(page: str, name: str) -> float:
    """A counter's value on a Prometheus text page (``name`` or ``name_total``), added up
    over its label sets; 0.0 when absent."""
    total = 0.0
    for line in page.splitlines():
        head, _, value = line.rpartition(" ")
        if head.partition("{")[0] in (name, name + "_total"):
            with contextlib.suppress(ValueError):  # not a number: not a sample
                total += float(value)
    return total


def mean_ms(
    before: Mapping[str, tuple[float, float]], after: Mapping[str, tuple[float, float]], name: str
) -> float | None:
    """The mean of ``name`` (seconds) over the requests between two readings, in ms; None
    when none was counted."""
    (s0, c0), (s1, c1) = before.get(name, (0.0, 0.0)), after.get(name, (0.0, 0.0))
    return (s1 - s0) / (c1 - c0) * 1e3 if c1 > c0 else None
