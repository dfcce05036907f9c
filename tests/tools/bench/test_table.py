"""The operator bench's table: targets marked, the per-CR call bound only where it applies."""

from __future__ import annotations

from disagg_tools.bench import operator as bench


def _marks(result: dict[str, object]) -> dict[str, str]:
    rows = bench.table(result).splitlines()[1:]
    return {row.split()[0]: " ".join(row.split()[2:]) for row in rows if not row.startswith(" ")}


def test_the_call_bound_applies_to_one_prefill_and_one_decode_pod_per_cr() -> None:
    one_each = {"pods_per_cr": {"prefill": 1, "decode": 1}, "api_calls_per_cr": 13.0}
    assert _marks(one_each)["api_calls_per_cr"] == "<= 12 MISSED"
    assert _marks({**one_each, "api_calls_per_cr": 11.0})["api_calls_per_cr"] == "<= 12 ok"
    bigger = {"pods_per_cr": {"prefill": 2, "decode": 2}, "api_calls_per_cr": 15.2}
    assert _marks(bigger)["api_calls_per_cr"] == "(target at 1P+1D only)"


def test_a_bound_named_by_another_key_is_read_from_the_result() -> None:
    result = {"rollout_min_ready_fraction": 0.5, "rollout_min_ready_target": 0.75}
    assert _marks(result)["rollout_min_ready_fraction"] == ">= 0.75 MISSED"
