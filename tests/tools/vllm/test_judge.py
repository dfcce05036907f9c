"""The logprob judge: equal runs have gap 0, a moved logprob is its size, runs that do not
line up — or rank a token at a position that the other does not — are infinitely apart."""

from __future__ import annotations

import math

from disagg_tools.vllm.rules import judge


def test_logprobs_are_read_by_token_id_and_compared_over_both_lists() -> None:
    choice = {"logprobs": {"top_logprobs": [{"token_id:7": -0.1, "token_id:9": -2.5}]}}
    tops = judge.tops_of(choice)
    assert tops == [{7: -0.1, 9: -2.5}]
    assert judge.gap(tops, tops) == 0.0
    assert abs(judge.gap(tops, [{7: -0.4, 9: -2.0}]) - 0.5) < 1e-12  # the larger move
    # a token one side ranks and the other does not: its logprob there is unbounded below
    assert math.isinf(judge.gap(tops, [{7: -0.1, 3: -1.0}]))
    assert math.isinf(judge.gap(tops, [{7: -0.1}]))
    assert math.isinf(judge.gap(tops, [{3: -1.0}]))  # nothing shared at a position
    assert math.isinf(judge.gap(tops, tops * 2))  # different lengths
    assert math.isinf(judge.gap([], []))
    assert judge.request_fields()["logprobs"] == judge.TOP
