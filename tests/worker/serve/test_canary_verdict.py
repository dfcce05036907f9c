"""The transfer canary's pure rules: when one runs, what counts as a token, the verdict."""

from __future__ import annotations

from disagg_worker.serve.canary_verdict import (
    PROMPT,
    RECOMPUTED,
    Result,
    due,
    flipped,
    kv_problem,
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
