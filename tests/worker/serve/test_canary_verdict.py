"""The transfer canary's pure rules: when one runs, what counts as a token, how fast its KV
moved and the floor, the verdict."""

from __future__ import annotations

from disagg_worker.serve.rules.canary_verdict import (
    PROMPT,
    RECOMPUTED,
    SLOW,
    Result,
    Transfer,
    bandwidth_problem,
    due,
    flipped,
    kv_fields,
    kv_problem,
    measured,
    request_body,
    token_problem,
    verdict,
)

PASS = Result(at=100.0, took_ms=12.0)
FAIL = Result(at=100.0, took_ms=3.0, problem="prefill http://p:8000: cannot connect")


def test_the_request_is_one_token_of_a_fixed_prompt_for_the_served_model() -> None:
    assert request_body("tiny") == {"model": "tiny", "prompt": PROMPT, "max_tokens": 1}


def test_a_canary_is_due_first_and_then_once_per_interval() -> None:
    assert due(None, 0.0, 7.0)
    assert not due(PASS, 106.9, 7.0)  # a probe in between reuses the last result
    assert due(PASS, 107.0, 7.0)
    assert due(FAIL, 107.5, 7.0)


def test_ready_only_while_the_last_canary_passed_and_is_fresh() -> None:
    assert verdict(PASS, 130.0, 45.0).ready
    assert "passed 30 s ago in 12 ms" in verdict(PASS, 130.0, 45.0).reason
    stale = verdict(PASS, 146.0, 45.0)
    assert not stale.ready and "46 s old" in stale.reason
    failed = verdict(FAIL, 100.0, 45.0)
    assert not failed.ready and failed.reason.endswith("cannot connect")
    assert not verdict(None, 0.0, 45.0).ready


def test_a_token_is_a_counted_completion_token_a_token_id_or_text() -> None:
    assert token_problem({"choices": [{"text": "a"}]}) is None
    assert token_problem({"choices": [{"text": "", "token_ids": [7]}]}) is None
    assert token_problem({"choices": [{"text": ""}], "usage": {"completion_tokens": 1}}) is None
    assert token_problem({"choices": [{"text": ""}], "usage": {"completion_tokens": 0}})
    assert "no token" in (token_problem({"choices": [{"text": ""}]}) or "")
    assert "without choices" in (token_problem({"choices": []}) or "")
    assert "without choices" in (token_problem({"object": "text_completion"}) or "")


def test_a_decode_that_computed_the_prompt_itself_is_named_decode_recomputing() -> None:
    computed = {"choices": [{"text": "a"}], "disagg": {"role": "decode", "kv_source": "computed"}}
    problem = kv_problem(computed) or ""
    assert problem.startswith(RECOMPUTED + ":") and "instead of reading its KV" in problem
    assert kv_problem({"choices": [{"text": "a"}], "disagg": {"kv_source": "transferred"}}) is None
    assert kv_problem({"choices": [{"text": "a"}]}) is None  # vLLM: its answer does not say


def test_only_a_change_of_verdict_is_a_flip() -> None:
    assert flipped(None, PASS) and flipped(None, FAIL)
    assert flipped(PASS, FAIL) and flipped(FAIL, PASS)
    assert not flipped(PASS, Result(at=200.0, took_ms=1.0))
    assert not flipped(FAIL, Result(at=200.0, took_ms=1.0, problem="other"))


# A reference decode's answer: one 64 KiB block read in 0.5 ms on the wire (0.131 GB/s).
READ = {"choices": [{"text": "a"}], "disagg": {"transfer_bytes": 65536.0, "transfer_wire_ms": 0.5}}


def test_the_kv_a_canary_moved_comes_from_the_answer_else_vllms_metrics() -> None:
    read = measured(READ)
    assert read == Transfer(65536.0, 0.0005, "answer")
    assert read.gbytes_per_second == 65536 / 0.0005 / 1e9
    vllm = {"choices": [{"text": "a"}], "disagg": {"proxy": {}}}
    before, after = {"bytes": 1e6, "seconds": 0.01}, {"bytes": 3e6, "seconds": 0.011}
    moved = measured(vllm, before, after)
    assert moved is not None and moved.via == "metrics" and moved.nbytes == 2e6
    assert abs(moved.gbytes_per_second - 2.0) < 1e-6  # 2 MB in 1 ms
    # nothing measurable: no figure (no metrics, no growth, no time)
    assert measured(vllm) is None and measured(vllm, {}, after) is None
    assert measured(vllm, after, after) is None
    assert measured(vllm, before, {"bytes": 2e6, "seconds": 0.01}) is None
    zero = {"choices": [], "disagg": {"transfer_bytes": 0.0, "transfer_wire_ms": 0.0}}
    assert measured(zero) is None


def test_below_the_floor_is_slow_transport_naming_both_figures() -> None:
    moved = measured(READ)
    problem = bandwidth_problem(moved, 5.0) or ""
    assert problem == (
        f"{SLOW}: the KV moved at 0.131 GB/s (65536 bytes in 0.5 ms), below the floor of "
        "5 GB/s; check the RDMA device, UCX_TLS and UCX_NET_DEVICES"
    )
    assert bandwidth_problem(moved, 0.1) is None  # above the floor
    assert bandwidth_problem(moved, None) is None  # no floor
    assert bandwidth_problem(None, 5.0) is None  # no figure: no verdict on bandwidth


def test_the_kv_fields_say_the_figures_and_how_they_compare() -> None:
    slow = kv_fields(measured(READ), 5.0)
    assert slow == {
        "kv_bytes": 65536,
        "kv_seconds": 0.0005,
        "kv_gbytes_per_second": 0.131072,
        "kv_measured_from": "answer",
        "kv_floor_gbytes_per_second": 5.0,
        "kv_bandwidth": "below the floor of 5 GB/s",
    }
    assert kv_fields(measured(READ), 0.1)["kv_bandwidth"] == "at or above the floor of 0.1 GB/s"
    assert kv_fields(measured(READ), None)["kv_bandwidth"] == "not checked: no floor"
    unmeasured = kv_fields(None, 5.0)
    assert unmeasured["kv_bytes"] is None and unmeasured["kv_gbytes_per_second"] is None
    assert unmeasured["kv_bandwidth"].startswith("not measured")
