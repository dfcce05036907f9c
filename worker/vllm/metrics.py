"""vLLM's own KV-transfer figures, read from the "KV Transfer metrics" lines it logs.

Pure layer. vLLM's NixlConnector logs, once per stats interval (10 s by default), one line
per engine with the transfers finished in that interval::

    ... KV Transfer metrics: Num successful transfers=8, Avg xfer time (ms)=0.249,
    P90 xfer time (ms)=0.46, ..., Avg MB per transfer=0.125, Throughput (MB/s)=502.26,
    Avg number of descriptors=4.0, Num failed transfers=0, Num KV expired reqs=0, ...

:func:`parse_line` turns one line into ``{field: number}``; :func:`summarize` adds up the
intervals (counts summed, averages weighted by their interval's transfer count), so a
caller can report exactly what vLLM measured for a span of requests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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


def parse_line(line: str) -> dict[str, float] | None:
    """One log line → its figures, or None if it is not a transfer-metrics line."""
    at = line.find(MARKER)
    if at < 0:
        return None
    return {
        m.group(1).strip(): float(m.group(2)) for m in _FIELD.finditer(line[at + len(MARKER) :])
    }


def summarize(lines: Iterable[str]) -> dict[str, float]:
    """The transfer-metrics lines among ``lines``, added up over their intervals."""
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
