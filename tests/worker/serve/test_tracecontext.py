"""traceparent read and written as W3C Trace Context level 1 says: the Recommendation's
own examples and its test suite's cases (w3c/trace-context acab820, test/test.py: each
case names the test function it comes from), each expected to keep the caller's trace id
or to start a new trace."""

from __future__ import annotations

import pytest

from disagg_worker.serve.rules import tracecontext as tc

ID = "12345678901234567890123456789012"
PARENT = "1234567890123456"
GOOD = f"00-{ID}-{PARENT}-01"

# (test/test.py function, header value): the trace is kept
KEPT = [
    ("test_traceparent_included_tracestate_missing", GOOD),
    ("test_traceparent_version_0xcc", f"cc-{ID}-{PARENT}-01"),
    ("test_traceparent_version_0xcc", f"cc-{ID}-{PARENT}-01-what-the-future-will-be-like"),
    ("test_traceparent_ows_handling", f" {GOOD}"),
    ("test_traceparent_ows_handling", f"\t{GOOD}"),
    ("test_traceparent_ows_handling", f"{GOOD} "),
    ("test_traceparent_ows_handling", f"{GOOD}\t"),
    ("test_traceparent_ows_handling", f"\t {GOOD} \t"),
]
# (test/test.py function, header value): invalid, a new trace starts
REFUSED = [
    ("test_traceparent_version_0x00", f"{GOOD}."),
    ("test_traceparent_version_0x00", f"{GOOD}-what-the-future-will-be-like"),
    ("test_traceparent_version_0xcc", f"cc-{ID}-{PARENT}-01.what-the-future-will-be-like"),
    ("test_traceparent_version_0xff", f"ff-{ID}-{PARENT}-01"),
    ("test_traceparent_version_illegal_characters", f".0-{ID}-{PARENT}-01"),
    ("test_traceparent_version_illegal_characters", f"0.-{ID}-{PARENT}-01"),
    ("test_traceparent_version_too_long", f"000-{ID}-{PARENT}-01"),
    ("test_traceparent_version_too_long", f"0000-{ID}-{PARENT}-01"),
    ("test_traceparent_version_too_short", f"0-{ID}-{PARENT}-01"),
    ("test_traceparent_trace_id_all_zero", f"00-{'0' * 32}-{PARENT}-01"),
    ("test_traceparent_trace_id_illegal_characters", f"00-.{ID[1:]}-{PARENT}-01"),
    ("test_traceparent_trace_id_illegal_characters", f"00-{ID[:-1]}.-{PARENT}-01"),
    ("test_traceparent_trace_id_too_long", f"00-{ID}3-{PARENT}-01"),
    ("test_traceparent_trace_id_too_short", f"00-{ID[:-1]}-{PARENT}-01"),
    ("test_traceparent_parent_id_all_zero", f"00-{ID}-{'0' * 16}-01"),
    ("test_traceparent_parent_id_illegal_characters", f"00-{ID}-.{PARENT[1:]}-01"),
    ("test_traceparent_parent_id_illegal_characters", f"00-{ID}-{PARENT[:-1]}.-01"),
    ("test_traceparent_parent_id_too_long", f"00-{ID}-{PARENT}7-01"),
    ("test_traceparent_parent_id_too_short", f"00-{ID}-{PARENT[:-1]}-01"),
    ("test_traceparent_trace_flags_illegal_characters", f"00-{ID}-{PARENT}-.0"),
    ("test_traceparent_trace_flags_illegal_characters", f"00-{ID}-{PARENT}-0."),
    ("test_traceparent_trace_flags_too_long", f"00-{ID}-{PARENT}-001"),
    ("test_traceparent_trace_flags_too_short", f"00-{ID}-{PARENT}-1"),
    # the Recommendation's ABNF (section 3.2.2): lower-case hex only
    ("spec 3.2.2.3 trace-id = 32HEXDIGLC", f"00-{'4BF92F3577B34DA6A3CE929D0E0E4736'}-{PARENT}-01"),
]


@pytest.mark.parametrize(("case", "header"), KEPT, ids=[f"{c}:{h!r}" for c, h in KEPT])
def test_valid_traceparent_keeps_the_trace(case: str, header: str) -> None:
    got = tc.incoming([header])
    assert got is not None, case
    assert (got.trace_id, got.span_id, got.sampled) == (ID, PARENT, True)


@pytest.mark.parametrize(("case", "header"), REFUSED, ids=[f"{c}:{h!r}" for c, h in REFUSED])
def test_invalid_traceparent_starts_a_trace(case: str, header: str) -> None:
    assert tc.parse(header) is None, case
    assert tc.incoming([header], ["rojo=00f067aa0ba902b7"]) is None, case


def test_repeated_traceparent_starts_a_trace() -> None:
    """test_traceparent_duplicated: two headers, even both valid, are not one parent."""
    assert tc.incoming([f"00-{ID[:-1]}1-{PARENT}-01", GOOD]) is None
    assert tc.incoming([]) is None


def test_the_recommendations_examples() -> None:
    """Section 3.2.2.5's two examples (sampled and not), and section 2's headers."""
    sampled = tc.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    unsampled = tc.parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
    assert sampled == tc.SpanContext("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1)
    assert unsampled is not None and not unsampled.sampled
    got = tc.incoming(
        ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
        ["congo=t61rcWkgMzE", " rojo=00f067aa0ba902b7 "],
    )
    assert got is not None and got.state == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def test_written_header_is_version_00_with_unknown_flags_zeroed() -> None:
    """A later version's header is passed on as 00 (section 3.2.4); flags other than
    sampled are written as zero (section 3.2.2.5); tracestate only with a traceparent."""
    parent = tc.parse(f"cc-{ID}-{PARENT}-ff-future")
    assert parent is not None
    child = parent.child("b7ad6b7169203331")
    assert child.traceparent() == f"00-{ID}-b7ad6b7169203331-01"
    assert child.headers() == {"traceparent": child.traceparent()}
    stated = tc.incoming([GOOD], ["a=1"])
    assert stated is not None and stated.child(PARENT).headers()["tracestate"] == "a=1"
    for header in (child.traceparent(), tc.SpanContext(ID, PARENT, 0).traceparent()):
        assert tc.parse(header) is not None and len(header) == 55


def test_new_ids_are_never_all_zero() -> None:
    draws = iter([b"\0" * 16, b"\1" * 16, b"\0" * 8, b"\2" * 8])

    def rand(n: int) -> bytes:
        got = next(draws)
        assert len(got) == n
        return got

    assert tc.new_trace_id(rand) == "01" * 16
    assert tc.new_span_id(rand) == "02" * 8


def test_sampling_keeps_the_callers_decision_and_a_ratio_of_new_traces() -> None:
    """ParentBased(TraceIdRatioBased): a caller's flag is kept whatever the ratio; a new
    trace is kept when its id's low 64 bits are under ratio x 2^64."""
    caller = tc.SpanContext(ID, PARENT, 0)
    assert not tc.start(caller, "1" * 16, "unused", 1.0).sampled
    assert tc.start(tc.SpanContext(ID, PARENT, 1), "1" * 16, "", 0.0).sampled
    low, high = "f" * 16 + "0" * 16, "0" * 16 + "f" * 16
    assert tc.start(None, "1" * 16, low, 0.5).sampled
    assert not tc.start(None, "1" * 16, high, 0.5).sampled
    assert tc.start(None, "1" * 16, high, 1.0).sampled
    assert not tc.start(None, "1" * 16, low, 0.0).sampled
