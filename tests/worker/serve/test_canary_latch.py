"""The canary's readiness latch and the words a failed hop is given: pure rules, fixed
inputs (the hop messages are the proxy's own, built by its error helper)."""

from __future__ import annotations

import asyncio

import aiohttp

from disagg_worker.serve.proxy.upstream import hop_failure
from disagg_worker.serve.rules.canary_verdict import (
    BUSY,
    UNREACHABLE,
    Latch,
    engine_identity,
    hop_problem,
)

PREFILL = "prefill http://demo-p-abc:8000"


def _connection_refused() -> aiohttp.ClientConnectorError:
    key = aiohttp.client_reqrep.ConnectionKey("demo-p-abc", 8000, False, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))


def test_a_prefill_hop_past_the_deadline_is_prefill_busy() -> None:
    e = hop_failure(PREFILL, 15.0, asyncio.TimeoutError())
    said = hop_problem(e.status, str(e))
    assert said.startswith(f"{BUSY}: {PREFILL}: no answer within the 15s deadline"), said
    # a prefill that says it is full is busy too
    assert hop_problem(503, f"{PREFILL} answered 503: queue full").startswith(BUSY)
    assert hop_problem(429, f"{PREFILL} answered 429: too many").startswith(BUSY)
    # the prefill took the whole deadline, so the decode hop was never tried
    late = "decode http://127.0.0.1:8000: not tried, the 15s deadline passed"
    assert hop_problem(504, late).startswith(BUSY)


def test_a_prefill_nobody_accepts_is_prefill_unreachable() -> None:
    e = hop_failure(PREFILL, 15.0, _connection_refused())
    said = hop_problem(e.status, str(e))
    assert said.startswith(f"{UNREACHABLE}: {PREFILL}: cannot connect"), said


def test_other_failures_keep_the_proxys_words() -> None:
    for status, message in [
        (502, f"{PREFILL} answered 500: boom"),
        (502, "decode http://127.0.0.1:8000 answered 500: NIXL_ERR_REMOTE_DISCONNECT"),
        (504, "decode http://127.0.0.1:8000: no answer within the 15s deadline"),
    ]:
        assert hop_problem(status, message) == message


def test_the_engine_instance_is_the_workers_pid_and_start_else_vllms_start_time() -> None:
    health = {"status": "ok", "pid": 41, "started_at": 1700000000.5}
    assert engine_identity(health) == "pid 41 started 1700000000.5"
    page = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e+09\n"
    assert engine_identity(None, page) == "started 1.7e+09"
    assert engine_identity({"status": "ok"}, "vllm:num_requests_waiting 0\n") is None
    assert engine_identity("", None) is None


def test_the_latch_holds_from_the_first_pass_on_an_instance_until_it_changes() -> None:
    latch = Latch()
    assert latch.seen("pid 1", answers=True) is False and not latch.ready
    latch.passed("pid 1")
    assert latch.ready and latch.engine == "pid 1"
    # the prefill pool may do anything now: nothing the latch sees changes
    assert latch.seen("pid 1", answers=True) is False and latch.ready
    # a restarted engine (another pid) re-gates the pod, once
    assert latch.seen("pid 2", answers=True) is True and not latch.ready
    assert latch.seen("pid 2", answers=True) is False
    latch.passed("pid 1")  # a pass proven on the old instance does not count for this one
    assert not latch.ready
    latch.passed("pid 2")
    assert latch.ready


def test_an_engine_that_stops_answering_re_gates_even_without_an_identity() -> None:
    latch = Latch()
    latch.seen(None, answers=True)
    latch.passed(None)
    assert latch.ready
    assert latch.seen(None, answers=False) is True and not latch.ready
    assert latch.seen(None, answers=False) is False  # once
    latch.seen(None, answers=True)
    latch.passed(None)
    assert latch.ready
