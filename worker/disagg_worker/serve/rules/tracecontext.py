"""W3C Trace Context (level 1): the ``traceparent`` and ``tracestate`` a request carries,
read, checked and written, and the sampling decision for a trace this process starts.

Ids and randomness come in. The rules are the Recommendation's
(https://www.w3.org/TR/trace-context/, section 3.2 and 3.3, read at w3c/trace-context
acab820): version ``00`` is exactly four fields; a later version is read by its first
four and may carry more after a dash; ``ff``, an all-zero id, upper-case hex or a
wrong length make the header invalid, and an invalid (or repeated) ``traceparent`` starts a
new trace, never an error. ``tracestate`` is passed on unread, and only with a valid
``traceparent``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
SAMPLED = 0x01  # the one flag level 1 defines; the others are written as zero
_HEX = re.compile(r"[0-9a-f]+")
_ZERO_TRACE, _ZERO_SPAN = "0" * 32, "0" * 16
_RATIO_BITS = 1 << 64  # TraceIdRatioBased compares the trace id's low 64 bits

RandomBytes = Callable[[int], bytes]


@dataclass(frozen=True)
class SpanContext:
    """One span's place in a trace: the trace id (32 lower-case hex), its span id (16),
    the flags and the ``tracestate`` it passes on."""

    trace_id: str
    span_id: str
    flags: int = SAMPLED
    state: str = ""

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def traceparent(self) -> str:
        """The header naming this span as the parent (version 00, unknown flags zeroed)."""
        return f"00-{self.trace_id}-{self.span_id}-{self.flags & SAMPLED:02x}"

    def headers(self) -> dict[str, str]:
        """What a request sent from inside this span carries."""
        out = {TRACEPARENT: self.traceparent()}
        if self.state:
            out[TRACESTATE] = self.state
        return out

    def child(self, span_id: str) -> SpanContext:
        """A span under this one: same trace, flags and state."""
        return replace(self, span_id=span_id)


def _hex(value: str, size: int) -> bool:
    return len(value) == size and _HEX.fullmatch(value) is not None


def parse(value: str) -> SpanContext | None:
    """The span a ``traceparent`` value names, or None when the header is invalid
    (surrounding spaces and tabs are optional whitespace, RFC 9110)."""
    value = value.strip(" \t")
    version = value[:2]
    if not _hex(version, 2) or version == "ff" or value[2:3] != "-":
        return None
    if version == "00" and len(value) != 55:
        return None
    if len(value) < 55 or (len(value) > 55 and value[55] != "-"):
        return None  # a later version: four fields, then only a dash may follow
    trace_id, span_id, flags = value[3:35], value[36:52], value[53:55]
    if value[35] != "-" or value[52] != "-":
        return None
    if not (_hex(trace_id, 32) and _hex(span_id, 16) and _hex(flags, 2)):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return SpanContext(trace_id, span_id, int(flags, 16))


def incoming(parents: Sequence[str], states: Sequence[str] = ()) -> SpanContext | None:
    """The caller's span from a request's ``traceparent`` fields (more than one: invalid)
    with its ``tracestate`` fields joined (RFC 9110 field order); None: start a trace."""
    if len(parents) != 1:
        return None
    parent = parse(parents[0])
    if parent is None:
        return None
    state = ",".join(s.strip(" \t") for s in states if s.strip(" \t"))
    return replace(parent, state=state)


def new_span_id(random: RandomBytes) -> str:
    """A span id: 8 random bytes, never all zero."""
    while True:
        span = random(8).hex()
        if span != _ZERO_SPAN:
            return span


def new_trace_id(random: RandomBytes) -> str:
    """A trace id: 16 random bytes, never all zero."""
    while True:
        trace = random(16).hex()
        if trace != _ZERO_TRACE:
            return trace


def sampled_by_ratio(trace_id: str, ratio: float) -> bool:
    """OpenTelemetry's TraceIdRatioBased: the trace is kept when its id's low 64 bits fall
    under ``ratio`` of their range (so every process keeps the same traces)."""
    return int(trace_id[16:], 16) < ratio * _RATIO_BITS


def start(parent: SpanContext | None, span_id: str, trace_id: str, ratio: float) -> SpanContext:
    """This process's span under ``parent`` (its sampling decision kept:
    OpenTelemetry's ParentBased sampler), or the root of a new trace ``trace_id``, sampled
    by ``ratio``."""
    if parent is not None:
        return parent.child(span_id)
    flags = SAMPLED if sampled_by_ratio(trace_id, ratio) else 0
    return SpanContext(trace_id, span_id, flags)
