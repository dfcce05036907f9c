"""`disagg bench prefix`'s figures (bench/rules/prefix.py): prediction errors in blocks
against the engine's own prefix-cache hits, and the trace's turns."""

from __future__ import annotations

import random

from disagg_tools.bench.rules import prefix as rules


def _row(side: str, predicted: int | None, hits: int, ttft: float = 10.0) -> rules.Row:
    return rules.Row(side, 0, "http://e", 100, predicted, hits, ttft)


def test_errors_are_signed_blocks() -> None:
    assert rules.error_blocks(_row("a", 96, 64), 32) == 1.0
    assert rules.error_blocks(_row("a", 0, 64), 32) == -2.0
    assert rules.error_blocks(_row("rr", None, 64), 32) is None


def test_side_figures() -> None:
    rows = [_row("a", 96, 96, 5), _row("a", 128, 64, 7), _row("a", 0, 32, 9)]
    got = rules.side_figures(rows, 32)
    assert got["within_one_block"] == 2  # exact, and one block under
    assert (got["over_predicted"], got["under_predicted"]) == (1, 0)
    assert got["max_abs_error_blocks"] == 2.0
    assert (got["ttft_p50_ms"], got["ttft_p90_ms"]) == (7.0, 9.0)
    assert (got["hit_tokens"], got["prompt_tokens"]) == (192, 300)


def test_a_router_that_predicts_nothing_has_no_error_figures() -> None:
    got = rules.figures([_row("rr", None, 0)], 32)["rr"]
    assert "within_one_block" not in got
    assert "| - |" in rules.table({"rr": got})


def test_turns_extend_the_conversation() -> None:
    (first,) = rules.conversations(seed=1, count=1, words=5)
    second = rules.next_turn(first, "an answer", random.Random(1), 5)
    assert second[: len(first)] == first
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert rules.conversations(1, 1, 5) == [first]  # the seed fixes it
